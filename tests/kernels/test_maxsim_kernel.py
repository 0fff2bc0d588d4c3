"""Tests of the fused MaxSim InfoNCE loss (hopscotch.kernels.maxsim) against its PyTorch reference.

The kernels run on CPU in Triton's interpreter (a module fixture sets ``TRITON_INTERPRET=1`` for this
module only, as tests/kernels/test_infonce.py does), at sizes small enough for it: a few seconds per
test. Bounds and random cases are those of :mod:`hopscotch_experiments.kernel_checks.maxsim_accuracy` (the bounds of
:mod:`hopscotch_experiments.kernel_checks.accuracy`: fp32 within 1e-5 relative of float64, Frobenius norm for the
gradients, 1e-7 absolute where the loss is below 1e-3). Fixed seeds, except the short fresh-seed
sweep, whose failure message names the seed that reproduces it. The GPU code path is compiled for
sm_90 without a GPU in a subprocess (the interpreter never runs it).
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest
import torch

from hopscotch.kernels import select
from hopscotch_experiments.kernel_checks import maxsim_accuracy
from hopscotch.kernels.maxsim_reference import EMPTY_PASSAGE_SCORE, group_labels
from hopscotch.kernels.maxsim_reference import maxsim_infonce_loss as reference_loss


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
    from hopscotch.kernels import maxsim

    assert maxsim._kernel_module().INTERPRET, "the Triton kernels must be defined in interpreter mode"
    return maxsim


def _inputs(seed, num_q, group, len_q, len_p, dim, exclusion="none", world=1, dtype=torch.float32):
    """Grouped batch (``world`` processes' passages gathered, ours last), ragged masks, exclusion."""
    gen = torch.Generator().manual_seed(seed)
    num_p = world * num_q * group
    q = torch.nn.functional.normalize(torch.randn(num_q, len_q, dim, generator=gen), dim=-1).to(dtype)
    p = torch.nn.functional.normalize(torch.randn(num_p, len_p, dim, generator=gen), dim=-1).to(dtype)
    q_mask = torch.arange(len_q) < torch.randint(1, len_q + 1, (num_q, 1), generator=gen)
    p_mask = torch.arange(len_p) < torch.randint(1, len_p + 1, (num_p, 1), generator=gen)
    labels = group_labels(num_q, group, rank=world - 1)
    exclude = None
    if exclusion == "ids":  # docids with duplicates across the batch
        p_ids = torch.randint(0, max(1, num_p // 3), (num_p,), generator=gen)
        exclude = (p_ids[labels], p_ids)
    elif exclusion == "dense":
        exclude = torch.rand(num_q, num_p, generator=gen) < 0.3
    return q, p, labels, exclude, q_mask, p_mask


def _loss_and_grads(fn, q, p, labels, temperature, exclude, q_mask, p_mask, **options):
    q = q.clone().requires_grad_()
    p = p.clone().requires_grad_()
    loss = fn(q, p, labels, temperature, exclude, q_mask=q_mask, p_mask=p_mask, **options)
    dq, dp = torch.autograd.grad(loss, (q, p))
    return loss.detach(), dq, dp


def _rel(a, b):
    a, b = a.double(), b.double()
    scale = b.norm().item()
    return (a - b).norm().item() / scale if scale > 0 else (a - b).norm().item()


def _assert_matches(context, inputs, temperature, tol=1e-5, **options):
    """Fused (in the inputs' dtype) against the fp32 reference on the same inputs."""
    q, p, labels, exclude, q_mask, p_mask = inputs
    fused = _loss_and_grads(_fused().maxsim_infonce_loss, q, p, labels, temperature, exclude, q_mask, p_mask,
                            **options)
    ref = _loss_and_grads(reference_loss, q.float(), p.float(), labels, temperature, exclude, q_mask, p_mask)
    errors = {name: _rel(a, b) for name, a, b in zip(("loss", "dq", "dp"), fused, ref)}
    assert all(torch.isfinite(t).all() for t in fused), context
    assert fused[0].dtype == torch.float32 and fused[1].dtype == q.dtype and fused[2].dtype == p.dtype, context
    assert max(errors.values()) < tol, f"{context}: relative errors {errors}"
    return fused, ref


@pytest.mark.parametrize("seed", maxsim_accuracy.FIXED_SEEDS)
def test_fused_matches_float64_on_the_fixed_cases(seed):
    """Each exclusion kind with and without a near-copy positive, gathered passages, empty negatives."""
    errors = maxsim_accuracy.compare(_fused().maxsim_infonce_loss, maxsim_accuracy.draw_case(seed))
    assert errors.ok, errors


def test_fused_fp32_random_sweep_with_fresh_seeds():
    """A short sweep on fresh seeds (longer:
    ``python -m hopscotch_experiments.kernel_checks.maxsim_accuracy --draws 200``)."""
    report = maxsim_accuracy.sweep(_fused().maxsim_infonce_loss, maxsim_accuracy.fresh_seeds(12))
    assert report.ok, report.summary() + "".join(f"\n{f}" for f in report.failures)


@pytest.mark.parametrize("exclusion", ["none", "ids", "dense"])
@pytest.mark.parametrize("shape", [(1, 1, 1, 1, 16), (3, 2, 7, 11, 16), (2, 3, 20, 37, 48)],
                         ids=["one-token", "small", "several-tiles"])
def test_fused_matches_reference_fp32(shape, exclusion):
    seed = sum(shape) * 7 + len(exclusion)
    _assert_matches(f"seed={seed} shape={shape} {exclusion}", _inputs(seed, *shape, exclusion), 0.1)


def test_fused_with_gathered_passages_and_small_tiles():
    """Passages of two processes (positives in the second half), 16-wide tiles over Lq, Lp and d, a
    passage block that does not divide N."""
    maxsim = _fused()
    seed = 20261201
    inputs = _inputs(seed, 3, 2, 21, 35, 40, "ids", world=2)
    config = maxsim.MaxSimConfig(block_j=4, block_t=16, block_u=16, block_k=16, block_d=16)
    _assert_matches(f"seed={seed}", inputs, 0.5, config=config)
    _assert_matches(f"seed={seed} block_j=1", inputs, 0.5, config=maxsim.MaxSimConfig(block_j=1))


def test_fused_hard_negative_copying_another_positive_is_excluded_like_the_reference():
    """Query 1's hard negative is a token-for-token copy of query 0's positive (same docid): dropped
    from query 0's row only; a second copy among the gathered passages too."""
    seed = 20261202
    q, p, labels, _, q_mask, p_mask = _inputs(seed, 3, 2, 6, 9, 16, world=2)
    positive_0, hard_negative_1, gathered = int(labels[0]), int(labels[1]) + 1, 2
    p[hard_negative_1], p_mask[hard_negative_1] = p[positive_0], p_mask[positive_0]
    p[gathered], p_mask[gathered] = p[positive_0], p_mask[positive_0]
    p_ids = torch.arange(p.shape[0])
    p_ids[hard_negative_1] = p_ids[gathered] = p_ids[positive_0]
    exclude = (p_ids[labels], p_ids)
    (loss, _, _), (ref_loss, _, _) = _assert_matches(f"seed={seed}", (q, p, labels, exclude, q_mask, p_mask), 0.1)
    without = reference_loss(q, p, labels, 0.1, None, q_mask=q_mask, p_mask=p_mask)
    assert loss.item() < without.item()  # two exact copies of the positive no longer compete with it


def test_fused_bf16_matches_the_reference_within_bf16_bounds():
    seed = 20261203
    _assert_matches(f"seed={seed}", _inputs(seed, 3, 2, 9, 13, 32, "ids", dtype=torch.bfloat16), 0.2, tol=1e-2)


def test_fused_ties_go_to_the_first_maximal_token_as_torch_max():
    """Duplicate passage tokens: the gradient goes to the first copy, as in the reference."""
    seed = 20261204
    q, p, labels, _, q_mask, p_mask = _inputs(seed, 2, 2, 5, 8, 16)
    p_mask[:] = True
    p[:, 4:] = p[:, :4]  # every token twice
    (_, _, dp), (_, _, ref_dp) = _assert_matches(f"seed={seed}", (q, p, labels, None, q_mask, p_mask), 0.3)
    assert dp[:, 4:].abs().max().item() == 0.0 and ref_dp[:, 4:].abs().max().item() == 0.0


def test_fused_rows_and_passages_that_drop_out():
    """A negative without a real token (sentinel score, no gradient), a query row with every other
    passage excluded (loss 0, gradient 0), masked query tokens (gradient 0)."""
    maxsim = _fused()
    seed = 20261205
    q, p, labels, _, q_mask, p_mask = _inputs(seed, 3, 2, 6, 7, 16)
    p_mask[3] = False
    exclude = torch.zeros(3, 6, dtype=torch.bool)
    exclude[0] = True
    fused, _ = _assert_matches(f"seed={seed}", (q, p, labels, exclude, q_mask, p_mask), 0.05)
    _, dq, dp = fused
    assert dq[0].abs().max().item() == 0.0 and dp[3].abs().max().item() == 0.0
    assert dq[~q_mask].abs().max().item() == 0.0
    only_positive = maxsim.maxsim_infonce_loss(q[:1], p, labels[:1], 0.05, exclude[:1], q_mask=q_mask[:1],
                                               p_mask=p_mask)
    assert only_positive.item() == 0.0
    from hopscotch.kernels import _triton_maxsim

    assert _triton_maxsim.EMPTY_SCORE.value == EMPTY_PASSAGE_SCORE


def test_fused_gradient_of_only_one_side():
    maxsim = _fused()
    seed = 20261206
    q, p, labels, exclude, q_mask, p_mask = _inputs(seed, 3, 2, 5, 6, 16, "ids")
    _, ref_dq, ref_dp = _loss_and_grads(reference_loss, q, p, labels, 0.1, exclude, q_mask, p_mask)
    q_leaf = q.clone().requires_grad_()
    (dq,) = torch.autograd.grad(maxsim.maxsim_infonce_loss(q_leaf, p, labels, 0.1, exclude, q_mask=q_mask,
                                                           p_mask=p_mask), q_leaf)
    p_leaf = p.clone().requires_grad_()
    (dp,) = torch.autograd.grad(maxsim.maxsim_infonce_loss(q, p_leaf, labels, 0.1, exclude, q_mask=q_mask,
                                                           p_mask=p_mask), p_leaf)
    assert _rel(dq, ref_dq) < 1e-5 and _rel(dp, ref_dp) < 1e-5, f"seed={seed}"


def test_fused_on_cpu_without_interpreter_falls_back_to_reference_with_a_warning(monkeypatch):
    maxsim = _fused()
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.setattr(select, "_warned", set())  # the rule (and its one-time warning) is select.choose_impl
    q, p, labels, exclude, q_mask, p_mask = _inputs(0, 2, 2, 3, 4, 16, "ids")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = maxsim.maxsim_infonce_loss(q, p, labels, 0.1, exclude, q_mask=q_mask, p_mask=p_mask)
    assert any("using the PyTorch reference" in str(w.message) for w in caught)
    assert torch.equal(value, reference_loss(q, p, labels, 0.1, exclude, q_mask=q_mask, p_mask=p_mask))


def test_fused_rejects_what_it_cannot_do():
    maxsim = _fused()
    q, p, labels, _, q_mask, p_mask = _inputs(0, 2, 2, 3, 4, 16)
    with pytest.raises(TypeError, match="float64"):
        maxsim.maxsim_infonce_loss(q.double(), p.double(), labels, 0.1)
    with pytest.raises(ValueError, match="fixed temperature"):
        maxsim.maxsim_infonce_loss(q, p, labels, torch.tensor(0.1, requires_grad=True))
    with pytest.raises(ValueError, match="p_mask"):
        maxsim.maxsim_infonce_loss(q, p, labels, 0.1, p_mask=q_mask)
    with pytest.raises(ValueError, match="block_t"):
        maxsim.MaxSimConfig(block_t=48)
    with pytest.raises(ValueError, match="block_j"):
        maxsim.MaxSimConfig(block_j=3)


def test_kernels_compile_for_sm90_without_spilling():
    """The GPU code path (never run by the interpreter), compiled in a clean process: bf16 with docid
    exclusion and fp32 with a dense mask, default tiles for Lq 32 and 256: no register spills."""
    code = r"""
import os
os.environ.pop("TRITON_INTERPRET", None)
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
import torch, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from hopscotch.kernels import maxsim
from hopscotch_experiments.kernel_checks import compile_report

mod = maxsim._kernel_module()
assert not mod.INTERPRET
def signature(fn, dtype, exclude):
    out = {}
    for a in fn.arg_names:
        if a in ("q_ptr", "p_ptr", "dq_ptr", "dp_ptr"): out[a] = "*" + dtype
        elif a in ("s_ptr", "m_ptr", "l_ptr", "pos_ptr", "g_ptr"): out[a] = "*fp32"
        elif a in ("labels_ptr", "qpos_ptr", "pid_ptr"): out[a] = "*i64"
        elif a in ("qmask_ptr", "pmask_ptr", "preal_ptr"): out[a] = "*u8"
        elif a == "xmask_ptr": out[a] = "*u8" if exclude == 2 else "*i64"
        elif a == "arg_ptr": out[a] = "*i16"
        elif a == "scale2": out[a] = "fp32"
        elif a.isupper() and a not in ("B", "N", "D", "LQ", "LP"): out[a] = "constexpr"
        else: out[a] = "i32"
    return out
for dtype, exclude, len_q in (("bf16", 1, 32), ("fp32", 2, 256)):
    cfg = maxsim.MaxSimConfig().resolved(32, 64, len_q, 180, 128, torch.device("cpu"))
    precision = "ieee" if dtype == "fp32" else "tf32"
    for name, constexprs in (
            ("maxsim_fwd_kernel", dict(EXCLUDE=exclude, PRECISION=precision, BLOCK_J=4, BLOCK_T=cfg.block_t,
                                       BLOCK_U=cfg.block_u, BLOCK_K=cfg.block_k)),
            ("maxsim_dq_kernel", dict(BLOCK_T=cfg.block_t, BLOCK_D=cfg.block_d)),
            ("maxsim_dp_kernel", dict(PRECISION=precision, BLOCK_T=cfg.block_t, BLOCK_U=cfg.block_u,
                                      BLOCK_D=cfg.block_d))):
        fn = getattr(mod, name)
        sig = signature(fn, dtype, exclude)
        attrs = {(i,): [["tt.divisibility", 16]] for i, a in enumerate(fn.arg_names) if sig[a].startswith("*")}
        compiled = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=constexprs, attrs=attrs),
                                  target=GPUTarget("cuda", 90, 32),
                                  options={"num_warps": cfg.num_warps, "num_stages": cfg.num_stages})
        registers, spill = compile_report._resource_usage(compiled.asm["cubin"])
        assert spill == 0, (name, dtype, len_q, registers, spill)
print("ok")
"""
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=1800)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]
