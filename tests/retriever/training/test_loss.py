"""InfoNCE loss wrapper: value and gradients against a plain formula, exclusion of positive duplicates,
learnable temperature, backend dispatch."""

from __future__ import annotations

import pytest
import torch

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.docids import signed_docid_hash as docid_hash
from hopscotch.retriever.training.loss import InfoNCELoss, infonce


def formula(q, p, labels, t, exclude_mask=None):
    """The loss written out: mean_i(logsumexp_j(s_ij/t) - s_i,label/t), excluded j dropped."""
    s = q @ p.T / t
    if exclude_mask is not None:
        s = s.masked_fill(exclude_mask, float("-inf"))
    return (torch.logsumexp(s, 1) - s[torch.arange(len(labels)), labels]).mean()


def make(b=4, g=3, d=16, seed=0):
    torch.manual_seed(seed)
    q = torch.nn.functional.normalize(torch.randn(b, d, dtype=torch.float64), dim=-1).requires_grad_()
    p = torch.nn.functional.normalize(torch.randn(b * g, d, dtype=torch.float64), dim=-1).requires_grad_()
    return q, p, torch.arange(b) * g


def test_reference_backend_matches_formula_value_and_gradients():
    q, p, labels = make()
    loss = infonce(q, p, labels, 0.05, backend="reference")
    gq, gp = torch.autograd.grad(loss, (q, p))
    q2, p2 = q.detach().clone().requires_grad_(), p.detach().clone().requires_grad_()
    expected = formula(q2, p2, labels, 0.05)
    eq, ep = torch.autograd.grad(expected, (q2, p2))
    assert torch.allclose(loss, expected, atol=1e-10)
    assert torch.allclose(gq, eq, atol=1e-10) and torch.allclose(gp, ep, atol=1e-10)


def test_duplicate_of_a_positive_leaves_the_denominator():
    q, p, labels = make(b=3, g=2)
    docids = ["d0", "n0", "d1", "n1", "d2", "d0"]  # passage 5 is a copy of query 0's positive
    q_pos = torch.tensor([docid_hash(docids[i]) for i in labels.tolist()])
    p_ids = torch.tensor([docid_hash(d) for d in docids])
    out = InfoNCELoss("reference")(q, p, labels, 0.05, q_pos, p_ids)
    mask = torch.zeros(3, 6, dtype=torch.bool)
    mask[0, 5] = True
    assert out.value == pytest.approx(float(formula(q, p, labels, 0.05, mask).detach()), abs=1e-10)
    unmasked = InfoNCELoss("reference", exclude_positive_duplicates=False)(q, p, labels, 0.05, q_pos, p_ids)
    assert unmasked.value > out.value  # the copy counted as a negative would raise the loss


def test_learnable_temperature_receives_the_formula_gradient():
    q, p, labels = make()
    log_t = torch.tensor(-3.0, dtype=torch.float64, requires_grad=True)
    loss = infonce(q, p, labels, log_t.exp(), backend="reference")
    (g,) = torch.autograd.grad(loss, log_t)
    log_t2 = torch.tensor(-3.0, dtype=torch.float64, requires_grad=True)
    (expected,) = torch.autograd.grad(formula(q, p, labels, log_t2.exp()), log_t2)
    assert g.item() == pytest.approx(expected.item(), rel=1e-9)
    assert g.item() != 0.0


def test_single_process_loss_is_the_plain_mean():
    q, p, labels = make()
    out = InfoNCELoss("reference")(q, p, labels, 0.1)
    assert torch.allclose(out.loss, formula(q, p, labels, 0.1))
    assert out.value == pytest.approx(float(out.loss))


def test_backend_dispatch(monkeypatch):
    from hopscotch import kernels

    monkeypatch.setenv("TRITON_INTERPRET", "1")  # Triton could run on CPU: "fused" is honoured, "auto" is not
    calls = []
    monkeypatch.setattr(kernels, "infonce_loss", lambda *a, **k: calls.append("fused") or torch.tensor(0.0))
    monkeypatch.setattr(kernels, "reference_infonce_loss", lambda *a, **k: calls.append("ref") or torch.tensor(0.0))
    q, p, labels = make()
    infonce(q, p, labels, 0.05)            # CPU tensors: reference
    infonce(q, p, labels, 0.05, backend="fused")
    infonce(q, p, labels, 0.05, backend="reference")
    assert calls == ["ref", "fused", "ref"]
    with pytest.raises(UsageError, match="loss.backend"):
        infonce(q, p, labels, 0.05, backend="triton")


def test_the_loss_resolves_through_the_kernels_selector(monkeypatch):
    """The trainer's loss makes no choice of its own: it asks :func:`hopscotch.kernels.select_infonce_loss`
    (and its MaxSim analogue) for the loss of the tensors' device and ``loss.backend``."""
    from hopscotch import kernels
    from hopscotch.retriever.model.multi_vector_trainable import TokenEmbeddings

    asked = []

    def selector(name):
        def select(device, impl="auto"):
            asked.append((name, torch.device(device).type, impl))
            return lambda *a, **k: torch.tensor(0.25, dtype=torch.float64)
        return select

    monkeypatch.setattr(kernels, "select_infonce_loss", selector("infonce"))
    monkeypatch.setattr(kernels, "select_maxsim_infonce_loss", selector("maxsim"))
    q, p, labels = make()
    assert float(InfoNCELoss("fused")(q, p, labels, 0.05).loss) == 0.25
    infonce(q, p, labels, 0.05)
    tokens = TokenEmbeddings(torch.randn(4, 3, 16), torch.ones(4, 3, dtype=torch.bool))
    passages = TokenEmbeddings(torch.randn(12, 5, 16), torch.ones(12, 5, dtype=torch.bool))
    InfoNCELoss("reference")(tokens, passages, labels, 0.05)
    assert asked == [("infonce", "cpu", "fused"), ("infonce", "cpu", "auto"), ("maxsim", "cpu", "reference")]


def test_docid_hash_is_stable_and_signed_64_bit():
    assert docid_hash("ic00001") == docid_hash("ic00001")
    assert docid_hash("ic00001") != docid_hash("ic00002")
    assert -(2 ** 63) <= docid_hash("x") < 2 ** 63
    assert docid_hash("ic00001") == 1519032488672271561  # blake2b: the same in every process and run


def test_fused_kernel_in_the_triton_interpreter_matches_the_reference(monkeypatch):
    """The loss through ``hopscotch.kernels.infonce_loss`` (Triton, interpreted on CPU): same value and gradients,
    the id exclusion and a learnable temperature included."""
    pytest.importorskip("triton")
    import hopscotch.kernels.infonce

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    calls = []
    apply = hopscotch.kernels.infonce._FusedInfoNCE.apply
    monkeypatch.setattr(hopscotch.kernels.infonce._FusedInfoNCE, "apply", lambda *a: calls.append(1) or apply(*a))
    torch.manual_seed(0)
    q = torch.nn.functional.normalize(torch.randn(8, 32), dim=-1).requires_grad_()
    p = torch.nn.functional.normalize(torch.randn(24, 32), dim=-1).requires_grad_()
    labels = torch.arange(8) * 3
    p_ids = torch.arange(24)
    p_ids[5] = 0  # a copy of query 0's positive
    log_t = torch.tensor(-3.0, requires_grad=True)
    results = []
    for backend in ("fused", "reference"):
        out = InfoNCELoss(backend)(q, p, labels, log_t.exp(), p_ids[labels], p_ids)
        results.append((out.value, torch.autograd.grad(out.loss, (q, p, log_t))))
    (fused_value, fused_grads), (ref_value, ref_grads) = results
    assert calls == [1]  # the Triton kernels ran (interpreted), not the CPU fallback
    assert fused_value == pytest.approx(ref_value, abs=1e-5)
    for a, b in zip(fused_grads, ref_grads):
        assert torch.allclose(a, b, atol=1e-5)


def test_loss_backend_is_checked_in_one_place_for_the_loss_the_recipe_and_the_kernels():
    """``loss.backend`` has one check, the kernels' ``checked_impl``: the loss module, the recipe key and the
    kernels' selector all go through it, with the same values and words."""
    from hopscotch.kernels import select
    from hopscotch.kernels.select import IMPLS, checked_impl
    from hopscotch.retriever.training.loss import BACKENDS, InfoNCELoss, checked_backend
    from hopscotch.retriever.training.recipe import load_recipe

    assert BACKENDS == IMPLS == ("auto", "fused", "reference")
    assert [checked_backend(b) for b in BACKENDS] == list(BACKENDS)
    words = "expected one of 'auto', 'fused', 'reference', got 'triton'"
    with pytest.raises(ValueError, match=f"^impl: {words}$"):
        checked_impl("triton")
    with pytest.raises(ValueError, match=f"^impl: {words}$"):
        select.choose_impl("cpu", "triton")
    with pytest.raises(UsageError, match=f"^loss.backend: {words}$"):
        InfoNCELoss(backend="triton")
    with pytest.raises(UsageError, match=f"^recipe key loss.backend: {words}$"):
        load_recipe({"data": {"train": "t.jsonl"}}, ["loss.backend=triton"])
    assert load_recipe({"data": {"train": "t.jsonl"}}, ["loss.backend=fused"]).loss.backend == "fused"
