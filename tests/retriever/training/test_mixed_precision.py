"""``train.mixed_precision: bf16`` on CPU: the forward passes (plain, chunked, GradCache) run under bf16 autocast
while the loss, the parameters and AdamW's state stay float32; the result is close to float32's. On a CPU without
bfloat16 instructions the run falls back to float32 (a warning, the float32 result exactly); fp16 on CPU is refused."""

from __future__ import annotations

import pytest
import torch

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.model import cpu_precision
from hopscotch.retriever.training import setup
from hopscotch.retriever.training.loss import InfoNCELoss
from hopscotch.retriever.training.trainer import train


def run(tmp_path, tiny_bert_dir, tuples, monkeypatch, name: str, **train_keys) -> dict:
    """Two optimizer steps; what the run's model, optimizer and loss saw (the forward passes of the steps: saving
    ``final/`` encodes its golden vectors in float32 afterwards)."""
    seen = {"matmul": set(), "embeddings": set(), "loss": set(), "losses": []}
    built = {}

    def build_model(recipe):
        model = built["model"] = build(recipe)
        model.passage_backbone.encoder.layer[0].intermediate.dense.register_forward_hook(
            lambda module, args, out: len(seen["losses"]) < 2 and seen["matmul"].add(out.dtype))
        return model

    def build_optimizer(model, tr):
        built["optimizer"] = optimize(model, tr)
        return built["optimizer"]

    def score(self, q, p, labels, temperature, exclude):
        seen["embeddings"].update({q.dtype, p.dtype})
        out = plain_score(self, q, p, labels, temperature, exclude)
        seen["loss"].add(out.dtype)
        return out

    build, optimize, plain_score = setup.build_model, setup.build_optimizer, InfoNCELoss._score
    monkeypatch.setattr(setup, "build_model", build_model)
    monkeypatch.setattr(setup, "build_optimizer", build_optimizer)
    monkeypatch.setattr(InfoNCELoss, "_score", score)
    recipe = {"model": {"name": str(tiny_bert_dir), "query_max_len": 32, "passage_max_len": 32},
              "data": {"train": str(tuples), "group_size": 3},
              "train": {"batch_size": 8, "max_steps": 2, "lr": 1e-3, "save_every": 0, "threads": 1, **train_keys}}
    train(recipe, tmp_path / name, on_step_end=lambda state, loss: seen["losses"].append(loss), show_progress=False)
    monkeypatch.undo()
    seen["model"], seen["optimizer"] = built["model"], built["optimizer"]
    return seen


def weights(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


@pytest.fixture
def tuples(tmp_path, write_training_tuples):
    return write_training_tuples(tmp_path / "t.jsonl", n=16)


@pytest.fixture
def native_bf16(monkeypatch):
    """Whether the CPU counts as having bfloat16 instructions (set it), warnings counted afresh."""
    monkeypatch.setattr(cpu_precision, "_warned", set())

    def set_support(value: bool):
        monkeypatch.setattr(cpu_precision, "cpu_supports_bf16", lambda: value)

    return set_support


@pytest.mark.parametrize("keys", [{"encode_chunk_size": 4}, {"gradcache_chunk_size": 4}], ids=["chunked", "gradcache"])
def test_bf16_autocasts_the_forward_and_keeps_loss_weights_and_adam_state_in_fp32(
        tmp_path, tiny_bert_dir, tuples, monkeypatch, native_bf16, keys):
    native_bf16(True)
    with monkeypatch.context() as m:
        bf16 = run(tmp_path, tiny_bert_dir, tuples, m, "bf16", mixed_precision="bf16", **keys)
    with monkeypatch.context() as m:
        fp32 = run(tmp_path, tiny_bert_dir, tuples, m, "fp32", **keys)
    assert bf16["matmul"] == {torch.bfloat16} and fp32["matmul"] == {torch.float32}
    assert bf16["embeddings"] == {torch.float32} and bf16["loss"] == {torch.float32}
    model, optimizer = bf16["model"], bf16["optimizer"]
    assert all(p.dtype == torch.float32 for p in model.parameters())
    states = [optimizer.state[p] for group in optimizer.param_groups for p in group["params"] if p in optimizer.state]
    assert states and all(s["exp_avg"].dtype == s["exp_avg_sq"].dtype == torch.float32 for s in states)
    assert len(bf16["losses"]) == 2 and bf16["losses"] != fp32["losses"]
    assert bf16["losses"] == pytest.approx(fp32["losses"], abs=0.05)
    a, b = weights(bf16["model"]), weights(fp32["model"])
    assert any(not torch.equal(a[k], b[k]) for k in a)
    assert all(torch.allclose(a[k].float(), b[k].float(), atol=5e-3) for k in a)


def test_bf16_without_native_support_falls_back_to_the_fp32_run(tmp_path, tiny_bert_dir, tuples, monkeypatch,
                                                                native_bf16):
    native_bf16(False)
    with monkeypatch.context() as m, pytest.warns(RuntimeWarning, match=r"train\.mixed_precision: bf16"):
        fallback = run(tmp_path, tiny_bert_dir, tuples, m, "fallback", mixed_precision="bf16")
    with monkeypatch.context() as m:
        fp32 = run(tmp_path, tiny_bert_dir, tuples, m, "fp32")
    assert fallback["matmul"] == {torch.float32} and fallback["losses"] == fp32["losses"]
    a, b = weights(fallback["model"]), weights(fp32["model"])
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.skipif(torch.cuda.is_available(), reason="fp16 is refused on CPU only")
def test_fp16_on_cpu_is_refused_naming_the_key(tmp_path, tiny_bert_dir, tuples):
    recipe = {"model": {"name": str(tiny_bert_dir)}, "data": {"train": str(tuples)},
              "train": {"mixed_precision": "fp16", "max_steps": 1}}
    with pytest.raises(UsageError, match=r"train\.mixed_precision: fp16 needs a GPU"):
        train(recipe, tmp_path / "fp16", show_progress=False)
    assert not (tmp_path / "fp16").exists()
