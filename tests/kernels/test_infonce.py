"""Tests of the fused Triton InfoNCE loss (hopscotch.kernels.infonce) against the PyTorch reference.

The kernels run on CPU in Triton's interpreter: a module fixture sets ``TRITON_INTERPRET=1`` before
the first test here defines the Triton kernels (``hopscotch.kernels._triton_kernels`` is imported lazily, and
``hopscotch.kernels.infonce`` redefines the kernels if the variable changed since they were last defined, so
it does not matter what other test modules imported first), and puts the old value back afterwards
so that no other module runs under the interpreter. Inputs come from fixed seeds, except in the
fresh-seed sweep, whose failure message names the seed that reproduces it; bounds and cases are
those of :mod:`hopscotch_experiments.kernel_checks.accuracy`.

Errors are relative: ``|a - b| / |b|`` for the loss, ``||a - b||_F / ||b||_F`` for a gradient.
"""

from __future__ import annotations

import os
import warnings

import pytest
import torch

from hopscotch.kernels import select
from hopscotch_experiments.kernel_checks import accuracy
from hopscotch.kernels.reference import infonce_loss as reference_loss


@pytest.fixture(autouse=True, scope="module")
def _interpreter():
    """Set TRITON_INTERPRET=1 for this module only, then put back what was there."""
    previous = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    yield
    if previous is None:
        os.environ.pop("TRITON_INTERPRET", None)
    else:
        os.environ["TRITON_INTERPRET"] = previous


def _fused():
    from hopscotch.kernels import infonce

    assert infonce._kernel_module().INTERPRET, "the Triton kernels must be defined in interpreter mode"
    return infonce


def _inputs(seed, num_q, num_p, dim, dtype, exclusion):
    gen = torch.Generator().manual_seed(seed)
    q = torch.nn.functional.normalize(torch.randn(num_q, dim, generator=gen), dim=-1).to(dtype)
    p = torch.nn.functional.normalize(torch.randn(num_p, dim, generator=gen), dim=-1).to(dtype)
    labels = torch.randint(0, num_p, (num_q,), generator=gen)
    exclude = None
    if exclusion == "ids":  # duplicates of a docid across the batch, as in a gathered batch
        p_ids = torch.randint(0, max(1, num_p // 3), (num_p,), generator=gen)
        exclude = (p_ids[labels], p_ids)
    elif exclusion == "dense":
        exclude = torch.rand(num_q, num_p, generator=gen) < 0.3
    return q, p, labels, exclude


def _loss_and_grads(fn, q, p, labels, temperature, exclude, **options):
    q = q.clone().requires_grad_()
    p = p.clone().requires_grad_()
    loss = fn(q, p, labels, temperature, exclude, **options)
    dq, dp = torch.autograd.grad(loss, (q, p))
    return loss.detach(), dq, dp


def _rel(a, b):
    a, b = a.double(), b.double()
    scale = b.norm().item()
    return (a - b).norm().item() / scale if scale > 0 else (a - b).norm().item()


def _assert_matches(seed, q, p, labels, exclude, tol, temperature=0.05, **options):
    fused = _loss_and_grads(_fused().infonce_loss, q, p, labels, temperature, exclude, **options)
    # Ground truth: the reference in float32 on the same (possibly rounded) inputs.
    ref = _loss_and_grads(reference_loss, q.float(), p.float(), labels, temperature, exclude)
    errors = {name: _rel(a, b) for name, a, b in zip(("loss", "dq", "dp"), fused, ref)}
    context = f"seed={seed} B={q.shape[0]} N={p.shape[0]} d={q.shape[1]} dtype={q.dtype} options={options}"
    assert all(torch.isfinite(t).all() for t in fused), context
    assert fused[0].dtype == torch.float32 and fused[1].dtype == q.dtype and fused[2].dtype == p.dtype, context
    assert max(errors.values()) < tol, f"{context}: relative errors {errors}"


@pytest.mark.parametrize("seed", accuracy.FIXED_SEEDS)
def test_fused_matches_float64_on_the_fixed_cases(seed):
    """fp32 within 1e-5 relative (1e-7 absolute below 1e-3) of float64, near-zero losses included."""
    errors = accuracy.compare(_fused().infonce_loss, accuracy.draw_case(seed))
    assert errors.ok, errors


@pytest.mark.parametrize("exclusion", ["none", "ids"])
@pytest.mark.parametrize("dim", [16, 384])
@pytest.mark.parametrize("num_p", [1, 7, 513])
@pytest.mark.parametrize("num_q", [1, 3, 64])
def test_fused_matches_reference_fp32(num_q, num_p, dim, exclusion):
    seed = num_q * 1000 + num_p * 10 + dim
    q, p, labels, exclude = _inputs(seed, num_q, num_p, dim, torch.float32, exclusion)
    _assert_matches(seed, q, p, labels, exclude, tol=1e-5)


def test_fused_fp32_random_sweep_with_fresh_seeds():
    """A short sweep on fresh seeds (the 500-draw one: ``python -m hopscotch_experiments.kernel_checks.accuracy``)."""
    report = accuracy.sweep(_fused().infonce_loss, accuracy.fresh_seeds(60))
    assert report.ok, report.summary() + "".join(f"\n{f}" for f in report.failures)


@pytest.mark.parametrize("exclusion", ["none", "ids", "dense"])
@pytest.mark.parametrize("shape", [(3, 7, 16), (64, 513, 384)])
def test_fused_matches_reference_bf16(shape, exclusion):
    seed = 20261130
    q, p, labels, exclude = _inputs(seed, *shape, torch.bfloat16, exclusion)
    _assert_matches(seed, q, p, labels, exclude, tol=1e-2)


def test_fused_matches_reference_fp16_and_dense_fp32():
    seed = 20261130
    q, p, labels, exclude = _inputs(seed, 64, 513, 384, torch.float16, "ids")
    _assert_matches(seed, q, p, labels, exclude, tol=1e-2)
    q, p, labels, exclude = _inputs(seed, 64, 513, 384, torch.float32, "dense")
    _assert_matches(seed, q, p, labels, exclude, tol=1e-5)


@pytest.mark.parametrize(
    "options",
    [
        dict(backward="chunked", chunk_size=64),
        dict(backward="chunked"),
        dict(config="split"),
        dict(config="small"),
    ],
    ids=["chunked-64", "chunked-default", "splits", "16x16-tiles"],
)
def test_fused_variants_match_reference(options):
    infonce = _fused()
    if options.get("config") == "split":  # 7 splits of passages (fwd, dQ), 2 of queries (dP)
        options = dict(config=infonce.KernelConfig(block_m=16, block_n=32, split_size=32))
    elif options.get("config") == "small":
        options = dict(config=infonce.KernelConfig(block_m=16, block_n=16, block_k=16, block_d=16))
    seed = 20261130
    q, p, labels, exclude = _inputs(seed, 48, 200, 48, torch.float32, "ids")
    _assert_matches(seed, q, p, labels, exclude, tol=1e-5, **options)
    qb, pb = q.bfloat16(), p.bfloat16()
    _assert_matches(seed, qb, pb, labels, exclude, tol=1e-2, **options)


def test_fused_textbook_case_and_shift_invariance():
    infonce = _fused()
    for shift in (0.0, 7.0, -50.0):
        q = torch.ones(1, 2, requires_grad=True)
        p = torch.tensor([[2.0, shift], [1.0, shift], [0.0, shift]], requires_grad=True)
        loss = infonce.infonce_loss(q, p, torch.tensor([0]), 1.0)
        loss.backward()
        assert round(loss.item(), 4) == 0.4076
        assert torch.allclose(p.grad[:, 0], torch.tensor([-0.335, 0.245, 0.090]), atol=5e-4)
        assert torch.equal(p.grad[:, 1], p.grad[:, 0])  # dL/dp_j = g_j q and q = (1, 1)
        assert abs(q.grad[0, 1].item()) < 1e-6 * max(1.0, abs(shift))  # c * sum_j g_j = 0


@pytest.mark.parametrize("backward", ["fused", "chunked"])
def test_fused_low_temperature_and_full_exclusion_stay_finite(backward):
    infonce = _fused()
    seed = 20261130
    q, p, labels, _ = _inputs(seed, 40, 300, 32, torch.float32, "none")
    exclude = torch.rand(40, 300, generator=torch.Generator().manual_seed(seed)) < 0.5
    exclude[:10] = True  # rows 0..9 keep only their positive
    fused = _loss_and_grads(infonce.infonce_loss, q, p, labels, 0.01, exclude, backward=backward)
    ref = _loss_and_grads(reference_loss, q, p, labels, 0.01, exclude)
    assert all(torch.isfinite(t).all() for t in fused), f"seed={seed}"
    assert fused[1][:10].abs().max().item() == 0.0, f"seed={seed}"
    for a, b in zip(fused, ref):
        assert _rel(a, b) < 1e-5, f"seed={seed}"
    only_positive = infonce.infonce_loss(q[:10], p, labels[:10], 0.01, exclude[:10], backward=backward)
    assert only_positive.item() == 0.0


def test_fused_on_cpu_without_interpreter_falls_back_to_reference_with_a_warning(monkeypatch):
    infonce = _fused()
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.setattr(select, "_warned", set())  # the rule (and its one-time warning) is select.choose_impl
    q, p, labels, exclude = _inputs(0, 4, 9, 16, torch.float32, "ids")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = infonce.infonce_loss(q, p, labels, 0.1, exclude)
    assert any("using the PyTorch reference" in str(w.message) for w in caught)
    assert value.item() == pytest.approx(reference_loss(q, p, labels, 0.1, exclude).item())


def test_fused_rejects_what_it_cannot_do():
    infonce = _fused()
    q, p, labels, _ = _inputs(0, 2, 5, 16, torch.float32, "none")
    with pytest.raises(TypeError, match="float64"):
        infonce.infonce_loss(q.double(), p.double(), labels, 0.1)
    with pytest.raises(ValueError, match="learnable"):
        infonce.infonce_loss(q, p, labels, torch.tensor(0.1, requires_grad=True))
    with pytest.raises(ValueError, match="backward"):
        infonce.infonce_loss(q, p, labels, 0.1, backward="flash")
    with pytest.raises(ValueError, match="split_size"):
        infonce.KernelConfig(block_m=32, block_n=64, split_size=96)
    with pytest.raises(ValueError, match="power of two"):
        infonce.KernelConfig(block_k=48)


@pytest.mark.parametrize("first", ["triton-then-interpreter", "interpreter-then-compiler"])
def test_kernels_can_be_redefined_after_triton_was_imported(first):
    """A test suite imports triton long before this module sets TRITON_INTERPRET (and back)."""
    import subprocess
    import sys

    code = f"""
import os, torch, triton
mode = {first!r}
os.environ["TRITON_INTERPRET"] = "1" if mode == "triton-then-interpreter" else "0"
from hopscotch.kernels import infonce
torch.manual_seed(0)
q, p, labels = torch.randn(3, 16), torch.randn(5, 16), torch.tensor([0, 1, 4])
if mode == "triton-then-interpreter":
    value = infonce.infonce_loss(q, p, labels, 0.1)
    assert infonce._kernel_module().INTERPRET
    expected = infonce.reference_infonce_loss(q, p, labels, 0.1)
    assert abs(value.item() - expected.item()) < 1e-5 * abs(expected.item()), (value, expected)
else:
    os.environ["TRITON_INTERPRET"] = "1"
    assert infonce._kernel_module().INTERPRET
    os.environ["TRITON_INTERPRET"] = "0"
    module = infonce._kernel_module()
    assert not module.INTERPRET and type(module.infonce_fwd_kernel).__name__ == "JITFunction"
print("ok")
"""
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=1800)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


@pytest.mark.parametrize("backward", ["fused", "chunked"])
def test_fused_gradient_of_only_one_side(backward):
    infonce = _fused()
    seed = 20261130
    q, p, labels, exclude = _inputs(seed, 20, 90, 32, torch.float32, "ids")
    frozen_p = q.clone().requires_grad_(), p
    loss = infonce.infonce_loss(*frozen_p, labels, 0.05, exclude, backward=backward)
    (dq,) = torch.autograd.grad(loss, frozen_p[0])
    _, ref_dq, _ = _loss_and_grads(reference_loss, q, p, labels, 0.05, exclude)
    assert _rel(dq, ref_dq) < 1e-5, f"seed={seed}"
    frozen_q = q, p.clone().requires_grad_()
    loss = infonce.infonce_loss(*frozen_q, labels, 0.05, exclude, backward=backward)
    (dp,) = torch.autograd.grad(loss, frozen_q[1])
    _, _, ref_dp = _loss_and_grads(reference_loss, q, p, labels, 0.05, exclude)
    assert _rel(dp, ref_dp) < 1e-5, f"seed={seed}"


@pytest.mark.slow
def test_fused_fp32_sweep_of_500_fresh_draws():
    """The acceptance sweep: 500 fresh draws, run as a user would (``python -m ... accuracy``)."""
    import subprocess
    import sys

    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    out = subprocess.run([sys.executable, "-m", "hopscotch_experiments.kernel_checks.accuracy", "--draws", "500"],
                         capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0 and "500 draws: PASS" in out.stdout, out.stdout[-3000:] + out.stderr[-2000:]
