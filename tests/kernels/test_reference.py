"""Tests of the PyTorch reference InfoNCE loss (hopscotch.kernels.reference) and of the package surface."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import torch

from hopscotch import kernels
from hopscotch.kernels.exclusion import normalize_exclude
from hopscotch.kernels.reference import infonce_loss


def _textbook():
    # d = 1, q = 1: the scores are p itself, so dL/dp is the score gradient.
    q = torch.ones(1, 1, dtype=torch.float64, requires_grad=True)
    p = torch.tensor([[2.0], [1.0], [0.0]], dtype=torch.float64, requires_grad=True)
    return q, p, torch.tensor([0])


def test_textbook_loss_and_score_gradient():
    q, p, labels = _textbook()
    loss = infonce_loss(q, p, labels, temperature=1.0)
    loss.backward()
    assert round(loss.item(), 4) == 0.4076
    assert torch.allclose(p.grad.squeeze(1), torch.tensor([-0.335, 0.245, 0.090], dtype=torch.float64), atol=5e-4)
    assert p.grad.sum().abs().item() < 1e-12  # softmax - onehot sums to zero


def test_adding_a_constant_to_every_score_changes_nothing():
    # Scores q.p with q = (1, 1) and p_j = (s_j, c) are s_j + c.
    scores = torch.tensor([2.0, 1.0, 0.0], dtype=torch.float64)
    base = None
    for shift in (0.0, 5.0, -40.0, 300.0):
        q = torch.ones(1, 2, dtype=torch.float64, requires_grad=True)
        p = torch.stack([scores, torch.full_like(scores, shift)], dim=1).requires_grad_()
        loss = infonce_loss(q, p, torch.tensor([0]), temperature=1.0)
        loss.backward()
        if base is None:
            base = (loss.item(), p.grad[:, 0].clone())
        assert loss.item() == pytest.approx(base[0], abs=1e-12)
        assert torch.allclose(p.grad[:, 0], base[1], atol=1e-12)
        assert abs(q.grad[0, 1].item()) < 1e-9  # the shift column: c * sum_j (softmax - onehot)_j = 0


@pytest.mark.parametrize("exclusion", ["none", "dense", "ids"])
def test_gradcheck_float64(exclusion):
    gen = torch.Generator().manual_seed(7)
    num_q, num_p, dim = 3, 7, 5
    q = torch.randn(num_q, dim, dtype=torch.float64, generator=gen, requires_grad=True)
    p = torch.randn(num_p, dim, dtype=torch.float64, generator=gen, requires_grad=True)
    temperature = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    labels = torch.tensor([0, 3, 6])
    exclude = None
    if exclusion == "dense":
        exclude = torch.rand(num_q, num_p, generator=gen) < 0.4
    elif exclusion == "ids":
        p_ids = torch.tensor([0, 1, 0, 2, 1, 0, 2])
        exclude = (p_ids[labels], p_ids)
    assert torch.autograd.gradcheck(
        lambda a, b, t: infonce_loss(a, b, labels, t, exclude), (q, p, temperature), eps=1e-6, atol=1e-7
    )


def test_row_with_only_its_positive_left_has_zero_loss_and_gradient():
    gen = torch.Generator().manual_seed(3)
    q = torch.nn.functional.normalize(torch.randn(2, 8, generator=gen), dim=-1).requires_grad_()
    p = torch.nn.functional.normalize(torch.randn(5, 8, generator=gen), dim=-1).requires_grad_()
    labels = torch.tensor([1, 4])
    exclude = torch.zeros(2, 5, dtype=torch.bool)
    exclude[0] = True  # every passage, the positive included: the positive stays in
    loss_row0 = infonce_loss(q[:1], p, labels[:1], 0.01, exclude[:1])
    assert loss_row0.item() == 0.0
    loss = infonce_loss(q, p, labels, 0.01, exclude)
    loss.backward()
    assert torch.isfinite(loss)
    assert q.grad[0].abs().max().item() == 0.0
    assert q.grad[1].abs().max().item() > 0.0


def test_ids_encoding_matches_the_dense_mask_it_stands_for():
    gen = torch.Generator().manual_seed(11)
    q = torch.randn(4, 6, generator=gen)
    p = torch.randn(12, 6, generator=gen)
    labels = torch.tensor([0, 3, 6, 9])
    p_ids = torch.tensor([5, 5, 1, 2, 2, 7, 1, 1, 3, 4, 5, 2])
    q_pos = p_ids[labels]
    dense = p_ids[None, :] == q_pos[:, None]
    by_ids = infonce_loss(q, p, labels, 0.1, (q_pos, p_ids))
    by_mask = infonce_loss(q, p, labels, 0.1, dense)
    assert by_ids.item() == pytest.approx(by_mask.item(), rel=1e-6)
    assert by_ids.item() < infonce_loss(q, p, labels, 0.1).item()  # fewer negatives, smaller loss
    mask = normalize_exclude((q_pos, p_ids), labels, 4, 12).dense_mask(labels, 12)
    assert not mask[torch.arange(4), labels].any()


def test_low_temperature_unit_norm_inputs_stay_finite():
    gen = torch.Generator().manual_seed(5)
    q = torch.nn.functional.normalize(torch.randn(16, 32, generator=gen), dim=-1).bfloat16().requires_grad_()
    p = torch.nn.functional.normalize(torch.randn(64, 32, generator=gen), dim=-1).bfloat16().requires_grad_()
    labels = torch.arange(16) * 4
    p_ids = torch.arange(64) // 8
    loss = infonce_loss(q, p, labels, 0.01, (p_ids[labels], p_ids))
    loss.backward()
    assert loss.dtype == torch.float32 and torch.isfinite(loss)
    assert q.grad.dtype == torch.bfloat16 and torch.isfinite(q.grad).all() and torch.isfinite(p.grad).all()


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(labels=torch.tensor([0, 9])), r"labels\[1\] = 9"),
        (dict(labels=torch.tensor([0.0, 1.0])), "integer tensor"),
        (dict(labels=torch.tensor([0])), "length B=2"),
        (dict(p=torch.randn(5, 3)), "same embedding size"),
        (dict(p=torch.randn(5, 4, dtype=torch.float64)), "same dtype"),
        (dict(temperature=0.0), "temperature"),
        (dict(exclude=torch.zeros(2, 4, dtype=torch.bool)), r"\[2, 5\]"),
        (dict(exclude=torch.zeros(2, 5)), "torch.bool"),
        (dict(exclude=(torch.zeros(2, dtype=torch.long), torch.zeros(4, dtype=torch.long))), "length 5"),
        (dict(exclude="docids"), "expected None"),
    ],
)
def test_bad_input_raises_a_clear_error(change, message):
    args = dict(q=torch.randn(2, 4), p=torch.randn(5, 4), labels=torch.tensor([0, 1]), temperature=0.1, exclude=None)
    args.update(change)
    with pytest.raises((ValueError, TypeError), match=message):
        infonce_loss(**args)


def test_select_infonce_loss_picks_fused_on_cuda_and_reference_elsewhere(monkeypatch):
    from hopscotch.kernels import select

    assert kernels.select_infonce_loss("cuda:0") is kernels.infonce_loss
    assert kernels.select_infonce_loss("cuda:0", impl="reference") is kernels.reference_infonce_loss
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # Triton runs on CPU: "auto" still picks the reference
    assert kernels.select_infonce_loss("cpu") is kernels.reference_infonce_loss
    assert kernels.select_infonce_loss("cpu", impl="fused") is kernels.infonce_loss
    monkeypatch.setenv("TRITON_INTERPRET", "0")  # no Triton on CPU: "fused" is the reference, with a warning
    monkeypatch.setattr(select, "_warned", set())
    with pytest.warns(UserWarning, match="using the PyTorch reference"):
        assert kernels.select_infonce_loss("cpu", impl="fused") is kernels.reference_infonce_loss
    assert kernels.select_infonce_loss("cpu") is kernels.reference_infonce_loss
    with pytest.raises(ValueError, match="impl"):
        kernels.select_infonce_loss("cpu", impl="flash")


def test_package_exports_both_losses_with_one_signature():
    gen = torch.Generator().manual_seed(1)
    q, p = torch.randn(3, 8, generator=gen), torch.randn(6, 8, generator=gen)
    labels = torch.tensor([0, 2, 4])
    value = kernels.reference_infonce_loss(q, p, labels, 0.5, exclude=None)
    assert value.item() == pytest.approx(infonce_loss(q, p, labels, 0.5).item())


def test_importing_kernels_imports_neither_torch_nor_triton():
    code = "import sys; from hopscotch import kernels; print('triton' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_reference_fp32_matches_float64_on_fixed_cases_and_a_fresh_sweep():
    """The stable form ``log1p(S)`` keeps fp32 within 1e-5 relative of float64, near-zero losses too."""
    from hopscotch_experiments.kernel_checks import accuracy

    report = accuracy.sweep(infonce_loss, list(accuracy.FIXED_SEEDS) + accuracy.fresh_seeds(300))
    assert report.ok, report.summary() + "".join(f"\n{f}" for f in report.failures)


def test_near_zero_loss_keeps_its_digits():
    # One competitor 30 / t below the positive: S = exp(-30), loss = log1p(S) ~ 9.4e-14, not 0.
    q = torch.tensor([[1.0, 0.0]])
    p = torch.tensor([[1.0, 0.0], [0.7, 0.71414284]])
    loss = infonce_loss(q, p, torch.tensor([0]), temperature=0.01)
    expected = math.log1p(math.exp((p[1, 0].double().item() - 1.0) / 0.01))  # the fp32 inputs, exactly
    assert loss.item() == pytest.approx(expected, rel=1e-5)
