"""bf16 on CPU: detecting native bfloat16, resolving a requested precision (the fallback warns once), and the dual
encoder's float32 embeddings under autocast."""

from __future__ import annotations

import types
import warnings

import pytest
import torch

from hopscotch.retriever.model import cpu_precision
from hopscotch.retriever.model.config import EncoderConfig
from hopscotch.retriever.model.cpu_precision import cpu_supports_bf16, runnable_precision
from hopscotch.retriever.model.dual_encoder import DualEncoder


@pytest.fixture
def detect(monkeypatch):
    """Run detection afresh (its result is cached per process) with ``/proc/cpuinfo`` flags faked."""

    def fake(flags, platform="linux", onednn=False):
        cpu_supports_bf16.cache_clear()
        monkeypatch.setattr(cpu_precision, "_cpuinfo_flags", lambda: flags)
        monkeypatch.setattr(cpu_precision, "_onednn_bf16", lambda: onednn)
        monkeypatch.setattr(cpu_precision, "sys", types.SimpleNamespace(platform=platform))
        return cpu_supports_bf16()

    yield fake
    cpu_supports_bf16.cache_clear()


def test_detection_reads_cpuinfo_flags_then_onednn(detect):
    assert detect({"sse4_2", "avx512f", "avx512_bf16"}) is True
    assert detect({"sse4_2", "amx_bf16", "amx_tile"}) is True
    assert detect({"fp", "asimd", "bf16"}) is True                   # Arm's Features line
    assert detect({"sse4_2", "avx512f", "avx512bw"}, onednn=True) is False  # Linux: the flags decide
    assert detect(None, onednn=True) is True                          # unreadable: oneDNN decides
    assert detect({"avx512_bf16"}, platform="darwin", onednn=False) is False
    assert detect(set(), platform="win32", onednn=True) is True


def test_cpuinfo_parsing_takes_flags_and_features_lines(tmp_path, monkeypatch):
    text = "processor\t: 0\nflags\t\t: fpu avx512_bf16 amx_tile\n\nprocessor\t: 1\nFeatures\t: fp asimd bf16\n"
    real_open = open
    monkeypatch.setattr("builtins.open", lambda path, *a, **kw: real_open(tmp_path / "cpuinfo", *a, **kw))
    (tmp_path / "cpuinfo").write_text(text)
    assert cpu_precision._cpuinfo_flags() == {"fpu", "avx512_bf16", "amx_tile", "fp", "asimd", "bf16"}


def test_requests_resolve_and_the_fallback_warns_once(monkeypatch):
    monkeypatch.setattr(cpu_precision, "_warned", set())
    monkeypatch.setattr(cpu_precision, "cpu_supports_bf16", lambda: True)
    assert [runnable_precision(r, "cpu") for r in ("auto", "no", "fp32", "bf16", "fp16")] == [
        "fp32", "fp32", "fp32", "bf16", "fp16"]
    assert [runnable_precision(r, "cuda") for r in ("auto", "no", "bf16", "fp16")] == ["fp16", "fp32", "bf16", "fp16"]
    monkeypatch.setattr(cpu_precision, "cpu_supports_bf16", lambda: False)
    assert runnable_precision("bf16", "cuda") == "bf16"               # only a CPU falls back
    with pytest.warns(RuntimeWarning, match=r"train\.mixed_precision: bf16 .* running in float32"):
        assert runnable_precision("bf16", "cpu", "train.mixed_precision") == "fp32"
    with warnings.catch_warnings():
        warnings.simplefilter("error")                                 # once per setting
        assert runnable_precision("bf16", "cpu", "train.mixed_precision") == "fp32"
    with pytest.warns(RuntimeWarning, match="--precision"):
        runnable_precision("bf16", "cpu", "--precision")


def test_dual_encoder_embeddings_are_float32_and_unit_norm_under_autocast(tiny_bert_dir):
    model = DualEncoder.from_pretrained(tiny_bert_dir, EncoderConfig(passage_max_len=32)).eval()
    features = model.tokenize_passages([("A", "a short passage about colours"), ("", "another one, longer " * 3)])
    seen = []
    model.passage_backbone.encoder.layer[0].intermediate.dense.register_forward_hook(
        lambda module, args, out: seen.append(out.dtype))
    with torch.no_grad():
        plain = model.encode(features, "passage")
        with torch.autocast("cpu", dtype=torch.bfloat16):
            mixed = model.encode(features, "passage", chunk_size=1)
    assert seen == [torch.float32, torch.bfloat16, torch.bfloat16]     # the matmuls did run in bf16
    assert mixed.dtype == torch.float32 and not torch.equal(mixed, plain)
    assert torch.allclose(mixed.norm(dim=-1), torch.ones(2), atol=1e-6)
    assert torch.nn.functional.cosine_similarity(mixed, plain).min() > 0.99
    assert all(p.dtype == torch.float32 for p in model.parameters())   # autocast leaves the weights alone
