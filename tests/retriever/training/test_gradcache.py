"""GradCache: the cached step (mini-batches of 3) gives the full batch's loss and parameter gradients,
with a fixed or learnable temperature, and replays dropout masks exactly."""

from __future__ import annotations

import json

import pytest
import torch

from hopscotch.retriever.io.tuples import read_training_tuples
from hopscotch.retriever.model.config import EncoderConfig
from hopscotch.retriever.model.dual_encoder import DualEncoder
from hopscotch.retriever.training.batches import Collator, plan_epoch
from hopscotch.retriever.training.loss import InfoNCELoss
from hopscotch.retriever.training.step import GradCache, cached_step, full_step

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma".split()


def tuples_file(tmp_path, n=8):
    rows = []
    for i in range(n):
        text = lambda k: " ".join(WORDS[(i * 3 + j * k) % len(WORDS)] for j in range(3 + (i * k) % 11))  # noqa: E731
        rows.append({"query_id": f"q{i}", "query": text(1), "reasoning": text(2) if i % 2 else None,
                     "positive_passages": [{"docid": f"p{i}", "text": text(5)}],
                     "negative_passages": [{"docid": f"n{i}_{k}", "text": text(7 + k)} for k in range(2)]})
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def setup(tiny_bert_dir, tmp_path, learn_temperature=False):
    torch.manual_seed(0)
    model = DualEncoder.from_pretrained(tiny_bert_dir, EncoderConfig(query_max_len=32, passage_max_len=48,
                                                                     learn_temperature=learn_temperature))
    tuples = read_training_tuples(tuples_file(tmp_path))
    batch = Collator(model)(plan_epoch(tuples, 0, 0, group_size=3, global_batch=8)[0])
    return model, batch


def grads(model):
    out = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return out


def backward(loss):
    loss.backward()


def run_cached(model, batch, chunk):
    c = model.config
    return cached_step(model, batch, InfoNCELoss("reference"), backward, model.temperature,
                       GradCache(chunk, c.padding_side, c.learn_temperature))


@pytest.mark.parametrize("learn_temperature", [False, True])
def test_cached_step_equals_full_batch(tiny_bert_dir, tmp_path, learn_temperature):
    model, batch = setup(tiny_bert_dir, tmp_path, learn_temperature)
    model.eval()  # no dropout: both paths see the same network
    full_loss = full_step(model, batch, InfoNCELoss("reference"), backward)
    full = grads(model)
    cached_loss = run_cached(model, batch, chunk=3)   # 3 query and 8 passage mini-batches
    cached = grads(model)
    assert cached_loss == pytest.approx(full_loss, abs=1e-6)
    assert set(cached) == set(full) and len(full) > 10
    assert ("log_temperature" in full) == learn_temperature
    for name in full:
        assert torch.allclose(cached[name], full[name], atol=1e-5, rtol=1e-4), name


def test_cached_step_replays_dropout(tiny_bert_dir, tmp_path, monkeypatch):
    model, batch = setup(tiny_bert_dir, tmp_path)
    model.train()  # dropout on: the second pass must draw the masks of the first
    seen = {"cache": {}, "replay": {}}
    encode = DualEncoder.encode

    def recording(self, features, kind="query", chunk_size=None):
        out = encode(self, features, kind, chunk_size)
        key = (kind, features["input_ids"].numpy().tobytes())
        seen["replay" if torch.is_grad_enabled() else "cache"][key] = out.detach().clone()
        return out

    monkeypatch.setattr(DualEncoder, "encode", recording)
    torch.manual_seed(123)
    run_cached(model, batch, chunk=3)
    assert seen["cache"].keys() == seen["replay"].keys() and len(seen["cache"]) == 3 + 8
    for key, first in seen["cache"].items():
        assert torch.equal(first, seen["replay"][key])
    features = {k: v[:3] for k, v in batch.queries.items()}
    with torch.no_grad():
        a, b = encode(model, features, "query"), encode(model, features, "query")
    assert not torch.allclose(a, b, atol=1e-4)  # dropout is active, so the equality above is the replay's doing


def test_mini_batches_are_length_sorted_and_trimmed(tiny_bert_dir, tmp_path):
    from hopscotch.retriever.training.step import _chunks

    model, batch = setup(tiny_bert_dir, tmp_path)
    chunks = _chunks(batch.passages, 4, "right")
    assert sorted(torch.cat([rows for rows, _ in chunks]).tolist()) == list(range(batch.p_ids.shape[0]))
    widths = [f["input_ids"].shape[1] for _, f in chunks]
    assert widths == sorted(widths, reverse=True) and widths[-1] < batch.passages["input_ids"].shape[1]
