"""The PyTorch reference of InfoNCE over MaxSim scores (hopscotch.kernels.maxsim_reference).

Against sentence-transformers 6.2 on the same batch: its ``colbert_scores`` (``util.maxsim`` per
passage group) and its ``MultiVectorMultipleNegativesRankingLoss`` class itself, run on the token
embeddings through a stand-in model that returns them (the loss calls ``model(features)``), with
``scale = 1 / temperature``. Bit-identical: the score matrix, the cross-entropy loss
(``formulation="cross_entropy"``) and the passages' gradient; the query gradient equals it to float
rounding (ST scores one passage group at a time, so autograd sums the query gradient group by group);
the default ``"stable"`` loss equals ST's to a few ulps of the largest logit. Then the contract of the
single-vector reference: exclusion (duplicates, hard negatives that copy another query's positive,
cross-device passages), one-token MaxSim equal to the single-vector loss, gradcheck, errors.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hopscotch import kernels
from hopscotch.kernels.maxsim_reference import (
    EMPTY_PASSAGE_SCORE,
    group_labels,
    maxsim_infonce_loss,
    maxsim_scores,
)
from hopscotch.kernels.reference import infonce_loss

st_loss_module = pytest.importorskip("sentence_transformers.multi_vector_encoder.losses.multiple_negatives_ranking")
from sentence_transformers.multi_vector_encoder.scoring import colbert_scores  # noqa: E402

EPS32 = torch.finfo(torch.float32).eps


class _TokenEmbeddings(nn.Module):
    """A stand-in multi-vector model: the features are the token embeddings and their mask."""

    def forward(self, features, task=None):
        return {"token_embeddings": features["token_embeddings"], "attention_mask": features["attention_mask"]}


def _batch(seed, num_q=4, group=3, len_q=7, len_p=11, dim=16):
    """Query tokens ``[B, Lq, d]``, grouped passage tokens ``[B, G, Lp, d]`` and ragged masks (every
    query and passage keeps at least one real token)."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.nn.functional.normalize(torch.randn(num_q, len_q, dim, generator=gen), dim=-1)
    docs = torch.nn.functional.normalize(torch.randn(num_q, group, len_p, dim, generator=gen), dim=-1)
    q_mask = torch.arange(len_q) < torch.randint(1, len_q + 1, (num_q, 1), generator=gen)
    d_mask = torch.arange(len_p) < torch.randint(1, len_p + 1, (num_q, group, 1), generator=gen)
    return q, docs, q_mask, d_mask


def _st_loss(q, docs, q_mask, d_mask, temperature, **options):
    """sentence-transformers' multi-vector MNRL on the batch: column 0 the queries, column 1 the
    positives, then one column per hard negative."""
    features = [{"token_embeddings": q, "attention_mask": q_mask}]
    features += [{"token_embeddings": docs[:, g], "attention_mask": d_mask[:, g]} for g in range(docs.shape[1])]
    # MaxSim named explicitly: sentence-transformers 6.2 defaults to colbert_scores, 6.3 to the model's own
    # ``similarity`` (the same MaxSim), which this stand-in module does not have
    options.setdefault("similarity_fct", colbert_scores)
    loss_fn = st_loss_module.MultiVectorMultipleNegativesRankingLoss(_TokenEmbeddings(), scale=1 / temperature,
                                                                       **options)
    return loss_fn(features)


def _rel(a, b):
    a, b = a.double(), b.double()
    return (a - b).norm().item() / max(b.norm().item(), 1e-300)


@pytest.mark.parametrize("seed, num_q, group, len_q, len_p, dim, temperature", [
    (0, 4, 3, 7, 11, 16, 1.0),
    (1, 1, 1, 5, 9, 16, 0.05),
    (2, 6, 2, 32, 40, 64, 0.7),
    (3, 3, 4, 1, 1, 8, 0.1),
    (4, 8, 2, 16, 180, 32, 1 / 3),
])
def test_scores_loss_and_gradients_equal_sentence_transformers(seed, num_q, group, len_q, len_p, dim, temperature):
    q, docs, q_mask, d_mask = _batch(seed, num_q, group, len_q, len_p, dim)
    q.requires_grad_()
    docs.requires_grad_()
    st_scores = colbert_scores(q, docs, queries_mask=q_mask, documents_mask=d_mask)
    st_loss = _st_loss(q, docs, q_mask, d_mask, temperature)
    st_dq, st_dd = torch.autograd.grad(st_loss, (q, docs))

    p = docs.reshape(num_q * group, len_p, dim)  # query i's passages at rows i * G ... i * G + G - 1
    p_mask = d_mask.reshape(num_q * group, len_p)
    labels = group_labels(num_q, group)
    assert torch.equal(maxsim_scores(q, p, q_mask, p_mask), st_scores)
    loss = maxsim_infonce_loss(q, p, labels, temperature, q_mask=q_mask, p_mask=p_mask, formulation="cross_entropy")
    dq, dd = torch.autograd.grad(loss, (q, docs))
    assert torch.equal(loss, st_loss), (loss.item(), st_loss.item())
    assert torch.equal(dd, st_dd)
    # dq sums over the N passages; ST adds its G per-group partial sums: rounding of N terms at most.
    assert _rel(dq, st_dq) <= num_q * group * EPS32, _rel(dq, st_dq)

    # The default (stable) form: the same value to rounding of the logits, |z| <= max |s| / t.
    stable = maxsim_infonce_loss(q, p, labels, temperature, q_mask=q_mask, p_mask=p_mask)
    bound = 16 * EPS32 * (st_scores.abs().max().item() / temperature + 1)
    assert abs(stable.item() - st_loss.item()) <= bound, (stable.item(), st_loss.item(), bound)


def test_gathered_passages_equal_sentence_transformers_across_devices(monkeypatch):
    """Cross-device negatives: ST's ``gather_across_devices`` on rank 1 of 2 (the gather stubbed with
    the other rank's passages) is the reference with those passages as further rows of ``p``."""
    num_q, group, len_q, len_p, dim = 3, 2, 6, 10, 16
    q, docs, q_mask, d_mask = _batch(5, num_q, group, len_q, len_p, dim)
    _, other, _, other_mask = _batch(6, num_q, group, len_q, len_p, dim)
    columns = iter(range(group))

    def gather(tensor, mask, with_grad=False):  # column g of rank 0, then ours
        g = next(columns)
        return torch.cat([other[:, g], tensor]), torch.cat([other_mask[:, g], mask])

    monkeypatch.setattr(st_loss_module, "all_gather_padded", gather)
    monkeypatch.setattr(st_loss_module, "get_rank", lambda: 1)
    st_loss = _st_loss(q, docs, q_mask, d_mask, 0.25, gather_across_devices=True)

    p = torch.cat([other, docs]).reshape(2 * num_q * group, len_p, dim)
    p_mask = torch.cat([other_mask, d_mask]).reshape(2 * num_q * group, len_p)
    labels = group_labels(num_q, group, rank=1)
    assert labels.tolist() == [6, 8, 10]
    loss = maxsim_infonce_loss(q, p, labels, 0.25, q_mask=q_mask, p_mask=p_mask, formulation="cross_entropy")
    assert torch.equal(loss, st_loss)


def test_textbook_scores_by_hand():
    # Query tokens (1, 0) and (0, 1); passage 0 tokens (1, 0), (0.5, 0.5); passage 1 tokens (0, 2), (-1, 0), pad.
    q = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])
    p = torch.tensor([[[1.0, 0.0], [0.5, 0.5], [9.0, 9.0]], [[0.0, 2.0], [-1.0, 0.0], [9.0, 9.0]]])
    p_mask = torch.tensor([[True, True, False], [True, True, False]])
    scores = maxsim_scores(q, p, None, p_mask)
    assert scores.tolist() == [[1.0 + 0.5, 0.0 + 2.0]]
    q_mask = torch.tensor([[True, False]])  # only the first query token counts
    assert maxsim_scores(q, p, q_mask, p_mask).tolist() == [[1.0, 0.0]]
    loss = maxsim_infonce_loss(q, p, torch.tensor([0]), 1.0, q_mask=q_mask, p_mask=p_mask)
    assert loss.item() == pytest.approx(torch.log1p(torch.exp(torch.tensor(-1.0))).item(), rel=1e-6)


def test_one_token_maxsim_is_the_single_vector_loss_with_its_exclusion():
    """Lq = Lp = 1: MaxSim is the dot product, and the loss (duplicates excluded by docid) is the
    single-vector reference's."""
    gen = torch.Generator().manual_seed(9)
    q = torch.randn(4, 8, generator=gen, dtype=torch.float64)
    p = torch.randn(12, 8, generator=gen, dtype=torch.float64)
    labels = group_labels(4, 3)
    p_ids = torch.tensor([5, 5, 1, 2, 2, 7, 1, 1, 3, 4, 5, 2])
    for exclude in (None, (p_ids[labels], p_ids)):
        a = maxsim_infonce_loss(q[:, None], p[:, None], labels, 0.1, exclude)
        b = infonce_loss(q, p, labels, 0.1, exclude)
        assert a.item() == pytest.approx(b.item(), rel=1e-12)


def _row_by_row(q, p, labels, temperature, dropped, q_mask, p_mask):
    """The loss as the mean over queries of the loss on that query alone with its dropped passages
    removed from the batch: what excluding a passage means."""
    losses = []
    for i in range(q.shape[0]):
        keep = (~dropped[i]).nonzero().squeeze(1)
        label = int((keep == labels[i]).nonzero())
        losses.append(maxsim_infonce_loss(q[i:i + 1], p[keep], torch.tensor([label]), temperature,
                                          q_mask=q_mask[i:i + 1], p_mask=p_mask[keep]))
    return torch.stack(losses).mean()


def test_duplicates_and_hard_negatives_that_copy_another_positive_are_excluded():
    """Query 0's positive (docid 100) is also query 1's hard negative and, gathered from another
    process, a further passage: both copies leave query 0's denominator but stay query 1's negatives;
    query 2's hard negative has query 1's positive's docid (101) and leaves query 1's row only."""
    num_q, group, len_q, len_p, dim = 3, 2, 5, 8, 16
    q, docs, q_mask, d_mask = _batch(21, num_q, group, len_q, len_p, dim)
    docs[1, 1], d_mask[1, 1] = docs[0, 0], d_mask[0, 0]  # query 1's hard negative is query 0's positive
    docs[2, 1], d_mask[2, 1] = docs[1, 0], d_mask[1, 0]  # query 2's hard negative is query 1's positive
    extra = docs[0, 0:1].clone()  # a copy gathered from another process
    p = torch.cat([docs.reshape(num_q * group, len_p, dim), extra])
    p_mask = torch.cat([d_mask.reshape(num_q * group, len_p), d_mask[0, 0:1]])
    labels = group_labels(num_q, group)
    p_ids = torch.tensor([100, 200, 101, 100, 102, 101, 100])
    q_pos_ids = p_ids[labels]
    exclude = (q_pos_ids, p_ids)
    dropped = (p_ids[None, :] == q_pos_ids[:, None])
    dropped[torch.arange(num_q), labels] = False
    assert dropped.nonzero().tolist() == [[0, 3], [0, 6], [1, 5]]

    loss = maxsim_infonce_loss(q, p, labels, 0.2, exclude, q_mask=q_mask, p_mask=p_mask)
    assert loss.item() == pytest.approx(_row_by_row(q, p, labels, 0.2, dropped, q_mask, p_mask).item(), rel=1e-6)
    assert loss.item() < maxsim_infonce_loss(q, p, labels, 0.2, q_mask=q_mask, p_mask=p_mask).item()
    by_mask = maxsim_infonce_loss(q, p, labels, 0.2, dropped, q_mask=q_mask, p_mask=p_mask)
    assert by_mask.item() == pytest.approx(loss.item(), rel=1e-6)
    # The cross-entropy form drops the same passages.
    ce = maxsim_infonce_loss(q, p, labels, 0.2, exclude, q_mask=q_mask, p_mask=p_mask, formulation="cross_entropy")
    assert ce.item() == pytest.approx(loss.item(), rel=1e-5)


def test_passage_without_real_tokens_scores_the_sentinel_and_gets_no_gradient():
    q, docs, q_mask, d_mask = _batch(8, 2, 2, 4, 6, 16)
    d_mask[1, 1] = False  # query 1's hard negative has no real token
    p = docs.reshape(4, 6, 16).clone().requires_grad_()
    p_mask = d_mask.reshape(4, 6)
    scores = maxsim_scores(q, p, q_mask, p_mask)
    assert (scores[:, 3] == EMPTY_PASSAGE_SCORE).all()
    assert torch.equal(scores, colbert_scores(q, docs, queries_mask=q_mask, documents_mask=d_mask))
    loss = maxsim_infonce_loss(q, p, group_labels(2, 2), 0.05, q_mask=q_mask, p_mask=p_mask)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(p.grad).all()
    assert p.grad[3].abs().max().item() == 0.0


@pytest.mark.parametrize("exclusion", ["none", "ids", "dense"])
def test_gradcheck_float64_with_masks(exclusion):
    gen = torch.Generator().manual_seed(13)
    q = torch.randn(3, 4, 5, dtype=torch.float64, generator=gen, requires_grad=True)
    p = torch.randn(6, 3, 5, dtype=torch.float64, generator=gen, requires_grad=True)
    q_mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 1, 0]], dtype=torch.bool)
    p_mask = torch.tensor([[1, 1, 1], [1, 0, 0], [1, 1, 0], [0, 1, 1], [1, 1, 1], [1, 0, 1]], dtype=torch.bool)
    temperature = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    labels = group_labels(3, 2)
    exclude = None
    if exclusion == "ids":
        p_ids = torch.tensor([0, 1, 2, 0, 4, 2])
        exclude = (p_ids[labels], p_ids)
    elif exclusion == "dense":
        exclude = torch.rand(3, 6, generator=gen) < 0.4
    assert torch.autograd.gradcheck(
        lambda a, b, t: maxsim_infonce_loss(a, b, labels, t, exclude, q_mask=q_mask, p_mask=p_mask),
        (q, p, temperature), eps=1e-6, atol=1e-7, fast_mode=True)


def test_reference_fp32_matches_float64_on_the_maxsim_cases():
    from hopscotch_experiments.kernel_checks import maxsim_accuracy

    report = maxsim_accuracy.sweep(maxsim_infonce_loss, list(maxsim_accuracy.FIXED_SEEDS)
                                   + maxsim_accuracy.fresh_seeds(40))
    assert report.ok, report.summary() + "".join(f"\n{f}" for f in report.failures)


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(q=torch.randn(2, 4)), r"3-D tensor \[B, Lq, d\]"),
        (dict(p=torch.randn(5, 0, 4)), "at least one token"),
        (dict(p=torch.randn(5, 3, 6)), "same embedding size"),
        (dict(labels=torch.tensor([0, 5])), r"labels\[1\] = 5"),
        (dict(q_mask=torch.ones(2, 3, dtype=torch.bool)), r"q_mask: expected a tensor of shape \[2, 4\]"),
        (dict(p_mask=torch.ones(5, 2, dtype=torch.bool)), r"p_mask: expected a tensor of shape \[5, 3\]"),
        (dict(temperature=-1.0), "temperature"),
        (dict(exclude=torch.zeros(2, 4, dtype=torch.bool)), r"\[2, 5\]"),
        (dict(formulation="softmax"), "formulation"),
    ],
)
def test_bad_input_raises_a_clear_error(change, message):
    args = dict(q=torch.randn(2, 4, 4), p=torch.randn(5, 3, 4), labels=torch.tensor([0, 1]), temperature=0.1,
                exclude=None, q_mask=None, p_mask=None)
    args.update(change)
    with pytest.raises((ValueError, TypeError), match=message):
        maxsim_infonce_loss(**args)


def test_select_maxsim_infonce_loss_follows_the_single_vector_rule(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert kernels.select_maxsim_infonce_loss("cuda:0") is kernels.maxsim_infonce_loss
    assert kernels.select_maxsim_infonce_loss("cpu") is kernels.reference_maxsim_infonce_loss
    assert kernels.select_maxsim_infonce_loss("cpu", impl="fused") is kernels.maxsim_infonce_loss
    assert kernels.select_infonce_loss("cpu") is kernels.reference_infonce_loss
    with pytest.raises(ValueError, match="impl"):
        kernels.select_maxsim_infonce_loss("cpu", impl="flash")
    q, docs, q_mask, d_mask = _batch(2, 2, 2, 3, 4, 8)
    p, p_mask = docs.reshape(4, 4, 8), d_mask.reshape(4, 4)
    value = kernels.reference_maxsim_infonce_loss(q, p, group_labels(2, 2), 0.5, None, q_mask=q_mask, p_mask=p_mask)
    assert torch.equal(value, maxsim_infonce_loss(q, p, group_labels(2, 2), 0.5, q_mask=q_mask, p_mask=p_mask))
