"""Matryoshka dimensions in training: the loss is the weighted sum of plain InfoNCE losses over the re-normalised
prefixes (and the plain loss when off), composes with duplicate masking, a learnt temperature and GradCache; the
recipe keys are checked naming the key; a tiny-BERT run records the trained prefixes in hopscotch_config.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.docids import signed_docid_hash as docid_hash
from hopscotch.retriever.training.loss import InfoNCELoss, infonce
from hopscotch.retriever.training.recipe import load_recipe

MINIMAL = {"data": {"train": "tuples.jsonl"}}
PREFIXES = ((16, 1.0), (8, 0.5), (4, 2.0))


def formula(q, p, labels, t, mask):
    """InfoNCE written out: mean_i(logsumexp_j(s_ij / t) - s_i,label / t), masked j dropped."""
    s = (q @ p.T / t).masked_fill(mask, float("-inf"))
    return (torch.logsumexp(s, 1) - s[torch.arange(len(labels)), labels]).mean()


def batch(b=4, g=3, d=16, seed=0):
    """Unit-length q and p (what a normalising model gives), labels, and a copy of query 0's positive among the
    passages (its docid masked out of query 0's denominator)."""
    torch.manual_seed(seed)
    q = torch.nn.functional.normalize(torch.randn(b, d, dtype=torch.float64), dim=-1).requires_grad_()
    p = torch.nn.functional.normalize(torch.randn(b * g, d, dtype=torch.float64), dim=-1).requires_grad_()
    labels = torch.arange(b) * g
    docids = [f"d{i}" for i in range(b * g)]
    docids[-1] = docids[0]
    p_ids = torch.tensor([docid_hash(x) for x in docids])
    mask = (p_ids[labels][:, None] == p_ids[None, :]) & (torch.arange(b * g)[None, :] != labels[:, None])
    return q, p, labels, p_ids[labels], p_ids, mask


def unit(x, d):
    return x[:, :d] / x[:, :d].norm(dim=-1, keepdim=True)


def test_matryoshka_loss_is_the_weighted_sum_of_prefix_losses():
    q, p, labels, q_pos, p_ids, mask = batch()
    out = InfoNCELoss("reference", matryoshka=PREFIXES)(q, p, labels, 0.05, q_pos, p_ids)
    gq, gp = torch.autograd.grad(out.loss, (q, p))
    # the plain loss on each prefix, cut and re-normalised here, weighted and summed in the same order: equal
    plain = InfoNCELoss("reference")
    total = 0
    for d, w in PREFIXES:
        total = total + w * plain(torch.nn.functional.normalize(q[:, :d], dim=-1),
                                  torch.nn.functional.normalize(p[:, :d], dim=-1), labels, 0.05, q_pos, p_ids).loss
    assert torch.equal(out.loss, total)
    # and the formula written out (its own cut and norm, its own mask), value and gradients
    q2, p2 = q.detach().clone().requires_grad_(), p.detach().clone().requires_grad_()
    expected = sum(w * formula(unit(q2, d), unit(p2, d), labels, 0.05, mask) for d, w in PREFIXES)
    eq, ep = torch.autograd.grad(expected, (q2, p2))
    assert out.value == pytest.approx(float(expected.detach()), abs=1e-12)
    assert torch.allclose(gq, eq, atol=1e-12) and torch.allclose(gp, ep, atol=1e-12)
    assert out.value != pytest.approx(float(plain(q, p, labels, 0.05, q_pos, p_ids).loss))  # not the whole vector


def test_off_is_the_plain_loss_and_prefixes_are_not_renormalised_for_a_raw_model():
    q, p, labels, q_pos, p_ids, _ = batch()
    off = InfoNCELoss("reference")(q, p, labels, 0.05, q_pos, p_ids)
    assert torch.equal(off.loss, infonce(q, p, labels, 0.05, (q_pos, p_ids), "reference"))
    assert InfoNCELoss("reference").matryoshka == () == InfoNCELoss("reference", matryoshka=[]).matryoshka
    raw = InfoNCELoss("reference", matryoshka=[(8, 1.0)], normalize=False)(q, p, labels, 0.05, q_pos, p_ids)
    assert torch.equal(raw.loss, infonce(q[:, :8], p[:, :8], labels, 0.05, (q_pos, p_ids), "reference"))


def test_a_learnt_temperature_gets_every_prefix_gradient():
    q, p, labels, q_pos, p_ids, mask = batch()
    log_t = torch.tensor(-3.0, dtype=torch.float64, requires_grad=True)
    out = InfoNCELoss("reference", matryoshka=PREFIXES)(q, p, labels, log_t.exp(), q_pos, p_ids)
    (g,) = torch.autograd.grad(out.loss, log_t)
    log_t2 = torch.tensor(-3.0, dtype=torch.float64, requires_grad=True)
    expected = sum(w * formula(unit(q.detach(), d), unit(p.detach(), d), labels, log_t2.exp(), mask)
                   for d, w in PREFIXES)
    (e,) = torch.autograd.grad(expected, log_t2)
    assert g.item() == pytest.approx(e.item(), rel=1e-9) and g.item() != 0.0


def test_gradcache_gives_the_full_batch_gradients_with_prefixes(tiny_bert_dir, write_training_tuples, tmp_path):
    from hopscotch.retriever.io.tuples import read_training_tuples
    from hopscotch.retriever.model.config import EncoderConfig
    from hopscotch.retriever.model.dual_encoder import DualEncoder
    from hopscotch.retriever.training.batches import Collator, plan_epoch
    from hopscotch.retriever.training.step import GradCache, cached_step, full_step

    torch.manual_seed(0)
    model = DualEncoder.from_pretrained(tiny_bert_dir, EncoderConfig(query_max_len=32, passage_max_len=32))
    model.eval()  # no dropout: both paths see the same network
    tuples = read_training_tuples(write_training_tuples(tmp_path / "t.jsonl", n=8))
    b = Collator(model)(plan_epoch(tuples, 0, 0, group_size=3, global_batch=8)[0])
    loss_fn = InfoNCELoss("reference", matryoshka=[(32, 1.0), (16, 1.0), (8, 0.5)])

    def grads():
        out = {n: x.grad.clone() for n, x in model.named_parameters() if x.grad is not None}
        model.zero_grad(set_to_none=True)
        return out

    full_loss = full_step(model, b, loss_fn, lambda loss: loss.backward())
    full = grads()
    cached_loss = cached_step(model, b, loss_fn, lambda loss: loss.backward(), model.temperature, GradCache(3))
    cached = grads()
    assert cached_loss == pytest.approx(full_loss, abs=1e-6) and len(full) > 10
    for name in full:
        assert torch.allclose(cached[name], full[name], atol=1e-5, rtol=1e-4), name


def test_the_recipe_keys_and_their_refusals():
    r = load_recipe(MINIMAL, ["loss.matryoshka_dims=[384, 256, 128, 64]", "loss.matryoshka_weights=[1, 1, 0.5, 0.5]"])
    assert r.loss.matryoshka_dims == [384, 256, 128, 64] and r.loss.matryoshka_weights == [1.0, 1.0, 0.5, 0.5]
    c = r.encoder_config()
    assert (c.matryoshka_dims, c.matryoshka_weights) == ([384, 256, 128, 64], [1.0, 1.0, 0.5, 0.5])
    assert load_recipe(MINIMAL).loss.matryoshka_dims is None  # off by default
    refusals = {
        "descending": ["loss.matryoshka_dims=[64, 128]"],
        "descending order": ["loss.matryoshka_dims=[64, 64]"],
        "whole numbers >= 1": ["loss.matryoshka_dims=[64, 0]"],
        r"one weight per loss.matryoshka_dims entry \(2\)": ["loss.matryoshka_dims=[64, 32]",
                                                             "loss.matryoshka_weights=[1]"],
        "numbers > 0": ["loss.matryoshka_dims=[64, 32]", "loss.matryoshka_weights=[1, 0]"],
        "needs loss.matryoshka_dims": ["loss.matryoshka_weights=[1]"],
        "model.kind single_vector only": ["loss.matryoshka_dims=[64]", "model.kind=multi_vector"],
    }
    for message, overrides in refusals.items():
        with pytest.raises(UsageError, match=message) as err:
            load_recipe(MINIMAL, overrides)
        assert "loss.matryoshka_" in str(err.value)


def test_a_prefix_wider_than_the_model_is_refused_naming_the_key():
    from hopscotch.retriever.training.setup import build_loss

    r = load_recipe(MINIMAL, ["loss.matryoshka_dims=[64, 32]", "loss.matryoshka_weights=[2, 1]"])
    assert build_loss(r, 64).matryoshka == ((64, 2.0), (32, 1.0))
    with pytest.raises(UsageError, match=r"loss.matryoshka_dims: each dimension must be <= 32"):
        build_loss(r, 32)
    assert build_loss(load_recipe(MINIMAL), 32).matryoshka == ()


def test_a_training_run_records_the_trained_prefixes(tiny_bert_dir, tmp_path, write_training_tuples):
    from hopscotch.retriever.model.config import model_settings, read_saved_config
    from hopscotch.retriever.training.trainer import train

    write_training_tuples(tmp_path / "t.jsonl", n=16)
    recipe = {"model": {"name": str(tiny_bert_dir), "query_max_len": 32, "passage_max_len": 32},
              "loss": {"matryoshka_dims": [32, 16, 8], "matryoshka_weights": [1, 1, 0.5]},
              "data": {"train": str(tmp_path / "t.jsonl"), "group_size": 2},
              "train": {"batch_size": 8, "max_steps": 2, "save_every": 0, "threads": 1, "gradcache_chunk_size": 4}}
    final = train(recipe, tmp_path / "run", show_progress=False)
    saved = json.loads((Path(final) / "hopscotch_config.json").read_text())
    assert (saved["matryoshka_dims"], saved["matryoshka_weights"]) == ([32, 16, 8], [1.0, 1.0, 0.5])
    assert read_saved_config(final).matryoshka_dims == [32, 16, 8]
    assert model_settings(final).matryoshka_dims == [32, 16, 8]
    with pytest.raises(UsageError, match="must be <= 32"):
        train({**recipe, "loss": {"matryoshka_dims": [64, 32]}}, tmp_path / "wide", show_progress=False)
