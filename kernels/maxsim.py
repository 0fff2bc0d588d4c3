"""Fused MaxSim InfoNCE loss: Triton kernels that never build the ``[B, N, Lq, Lp]`` token similarities.

Same contract as :func:`hopscotch.kernels.maxsim_reference.maxsim_infonce_loss` (default
``formulation="stable"``): MaxSim scores ``s_ij = sum_{t real} max_{u real} q[i, t] . p[j, u]``, the
single-vector InfoNCE loss ``mean_i log1p(sum_{j != pos, kept} exp((s_ij - s_i,pos) / t))`` over them,
``exclude`` as in :mod:`hopscotch.kernels.exclusion`, passages without a real token scored
``EMPTY_PASSAGE_SCORE`` (no gradient).

* forward (:func:`~hopscotch.kernels._triton_maxsim.maxsim_fwd_kernel`): per query and block of passages,
  token-similarity tiles with a running max / arg max per (query token, passage), the scores, and an
  online log-sum-exp over the passages; the splits are merged by the single-vector kernel's
  :func:`hopscotch.kernels.infonce._merge_splits`. Saved: ``s [B, N]`` fp32, the arg max ``[B, N, Lq]``
  (int16), ``lse2`` and the positive's gradient ``gpos`` (``[B]``).
* backward: ``G = grad / (B t) * (softmax - onehot)`` (``[B, N]``, 0 where excluded or empty) from the
  saved scores, then ``dq`` by gathering passage-token rows through the arg max and ``dp`` by a one-hot
  product per passage-token block (:mod:`hopscotch.kernels._triton_maxsim`); no atomics, deterministic.

Memory beyond the inputs and their gradients: ``B N Lq`` arg-max indices (2 bytes each) and ``O(B N)``
floats, against the reference's ``B N Lq Lp`` token similarities and their gradient (4 bytes each,
twice): ``4 Lp`` times less (720 x for ``Lp = 180``). The token-similarity FLOPs (``2 B N Lq Lp d``)
are done once in the forward and once more by the one-hot ``dp`` product; ``dq`` is a gather.

On CPU the kernels run in Triton's interpreter while ``TRITON_INTERPRET=1`` is set (tests); without
it CPU tensors fall back to the reference with a one-time warning, as :func:`hopscotch.kernels.infonce_loss`
(both by :func:`hopscotch.kernels.select.choose_impl`).

Example (not run: it needs CUDA)::

    import torch
    from hopscotch import kernels
    from hopscotch.kernels.maxsim_reference import group_labels

    q = torch.nn.functional.normalize(torch.randn(32, 32, 128, device="cuda"), dim=-1).bfloat16().requires_grad_()
    p = torch.nn.functional.normalize(torch.randn(64, 180, 128, device="cuda"), dim=-1).bfloat16().requires_grad_()
    q_mask = torch.ones(32, 32, dtype=torch.bool, device="cuda")
    p_mask = torch.arange(180, device="cuda") < torch.randint(20, 181, (64, 1), device="cuda")
    loss = kernels.maxsim_infonce_loss(q, p, group_labels(32, 2, device="cuda"), 1.0, q_mask=q_mask, p_mask=p_mask)
    loss.backward()
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Optional

import torch

from .exclusion import ExcludeArg, ExcludeSpec, normalize_exclude
from .infonce import LOG2E, _EXCLUDE_MODES, _merge_splits, _precision
from .maxsim_reference import check_maxsim_inputs
from .maxsim_reference import maxsim_infonce_loss as reference_maxsim_infonce_loss
from .select import choose_impl, kernel_module


@dataclass(frozen=True)
class MaxSimConfig:
    """Tile sizes of the MaxSim kernels (``None``: picked from the shapes and the GPU).

    Args:
        block_j: passages per forward program (a power of two, 1 to 64); ``None``: about four
            programs per SM on a GPU, 16 in the interpreter.
        block_t: query tokens per tile (default: ``Lq`` rounded up to a power of two, 16 to 64).
        block_u: passage tokens per tile; block_k: embedding columns per step of the token-similarity
            product; block_d: embedding columns per gradient tile (defaults 64, less for short sides).
            Powers of two in [16, 256].
        num_warps, num_stages: Triton launch options (ignored by the interpreter). With 8 warps and
            the default tiles no kernel spills registers on sm_90 (bf16 and fp32, ``block_t`` 16-64:
            ``tests/kernels/test_maxsim_kernel.py`` compiles them).
    """

    block_j: Optional[int] = None
    block_t: Optional[int] = None
    block_u: Optional[int] = None
    block_k: Optional[int] = None
    block_d: Optional[int] = None
    num_warps: int = 8
    num_stages: int = 2

    def __post_init__(self):
        for name in ("block_t", "block_u", "block_k", "block_d"):
            value = getattr(self, name)
            if value is not None and (value < 16 or value > 256 or value & (value - 1)):
                raise ValueError(f"MaxSimConfig.{name}: expected a power of two in [16, 256], got {value}")
        if self.block_j is not None and (self.block_j < 1 or self.block_j > 64 or self.block_j & (self.block_j - 1)):
            raise ValueError(f"MaxSimConfig.block_j: expected a power of two in [1, 64], got {self.block_j}")

    def resolved(self, num_q: int, num_p: int, len_q: int, len_p: int, dim: int, device) -> "MaxSimConfig":
        """This config with every ``None`` replaced by the default for these shapes on ``device``."""
        def fit(length, most=64):
            return min(most, max(16, triton_next_power_of_2(length)))

        block_j = self.block_j
        if block_j is None:
            if device.type == "cuda":
                sms = torch.cuda.get_device_properties(device).multi_processor_count
                want = max(1, num_q * num_p // (4 * sms))
                block_j = min(16, 1 << (want.bit_length() - 1))
            else:
                block_j = min(16, triton_next_power_of_2(num_p))
        return MaxSimConfig(block_j, self.block_t or fit(len_q), self.block_u or fit(len_p),
                            self.block_k or fit(dim), self.block_d or fit(dim), self.num_warps, self.num_stages)


def triton_next_power_of_2(value: int) -> int:
    return 1 << max(0, int(value) - 1).bit_length()


def _kernel_module():
    """The MaxSim kernels, redefined if ``TRITON_INTERPRET`` changed since."""
    return kernel_module("hopscotch.kernels._triton_maxsim")


def maxsim_infonce_loss(
    q: torch.Tensor,
    p: torch.Tensor,
    labels: torch.Tensor,
    temperature,
    exclude: ExcludeArg = None,
    *,
    q_mask: Optional[torch.Tensor] = None,
    p_mask: Optional[torch.Tensor] = None,
    config: Optional[MaxSimConfig] = None,
) -> torch.Tensor:
    """Mean InfoNCE loss over MaxSim scores, fused (see the module docstring).

    Args:
        q: ``[B, Lq, d]`` float16, bfloat16 or float32 query token embeddings (CUDA, or CPU under
            ``TRITON_INTERPRET=1``).
        p: ``[N, Lp, d]`` passage token embeddings, same dtype and device.
        labels: ``[B]`` integer index of each query's positive in ``p``.
        temperature: ``t > 0`` (float or scalar tensor; no gradient flows to it).
        exclude: ``None``, a ``[B, N]`` bool mask or ``(q_pos_ids [B], p_ids [N])``.
        q_mask, p_mask: ``[B, Lq]`` / ``[N, Lp]`` masks of real tokens (bool or 0 / 1); None: all real.
        config: tile sizes (:class:`MaxSimConfig`); ``None`` picks them from the shapes.

    Returns:
        A float32 scalar; the gradients of ``q`` and ``p`` come back in their dtype.
    """
    t, q_mask, p_mask = check_maxsim_inputs(q, p, labels, temperature, q_mask, p_mask)
    spec = normalize_exclude(exclude, labels, q.shape[0], p.shape[0])
    if isinstance(temperature, torch.Tensor) and temperature.requires_grad:
        raise ValueError("temperature: the fused loss takes a fixed temperature; use "
                         "hopscotch.kernels.reference_maxsim_infonce_loss for a learnable one")
    if choose_impl(q.device, "fused", "maxsim_infonce_loss") == "reference":  # no Triton here
        return reference_maxsim_infonce_loss(q, p, labels, temperature, exclude, q_mask=q_mask, p_mask=p_mask)
    if q.dtype == torch.float64:
        raise TypeError("q, p: the fused kernel takes float16, bfloat16 or float32; use "
                        "hopscotch.kernels.reference_maxsim_infonce_loss for float64")
    config = (config or MaxSimConfig()).resolved(q.shape[0], p.shape[0], q.shape[1], p.shape[1], q.shape[2],
                                                 q.device)
    return _FusedMaxSimInfoNCE.apply(q, p, labels, q_mask, p_mask, _Setup(t, spec, config))


@dataclass(frozen=True)
class _Setup:
    """The arguments of one call that are not tensors with a gradient (checked already)."""

    temperature: float
    spec: ExcludeSpec
    config: MaxSimConfig

    @property
    def scale2(self) -> float:
        return LOG2E / self.temperature


def _token_masks(q, p, q_mask, p_mask):
    """uint8 ``[B, Lq]`` / ``[N, Lp]`` masks (all ones for None) and the ``[N]`` "has a real token" flags."""
    q_real = (torch.ones(q.shape[:2], dtype=torch.bool, device=q.device) if q_mask is None else q_mask)
    p_real = (torch.ones(p.shape[:2], dtype=torch.bool, device=p.device) if p_mask is None else p_mask)
    return (q_real.contiguous().view(torch.uint8), p_real.contiguous().view(torch.uint8),
            p_real.any(dim=1))


def _launch_options(mod, config: MaxSimConfig) -> dict:
    return {} if mod.INTERPRET else {"num_warps": config.num_warps, "num_stages": config.num_stages}


class _FusedMaxSimInfoNCE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, p, labels, q_mask, p_mask, setup: _Setup):
        q = q.contiguous()
        p = p.contiguous()
        labels = labels.to(torch.int64).contiguous()
        qm, pm, p_real = _token_masks(q, p, q_mask, p_mask)
        with torch.cuda.device(q.device) if q.is_cuda else contextlib.nullcontext():
            scores, arg, losses, lse2, gpos = _forward(q, p, labels, qm, pm, p_real, setup)
        ctx.save_for_backward(q, p, labels, qm, p_real, scores, arg, lse2, gpos)
        ctx.setup = setup
        return losses.mean()

    @staticmethod
    def backward(ctx, grad_out):
        q, p, labels, qm, p_real, scores, arg, lse2, gpos = ctx.saved_tensors
        setup = ctx.setup
        need_q, need_p = ctx.needs_input_grad[:2]
        scale = grad_out.to(torch.float32) / (q.shape[0] * setup.temperature)
        g = score_gradient(scores, labels, lse2, gpos, p_real, setup.spec, setup.scale2) * scale
        with torch.cuda.device(q.device) if q.is_cuda else contextlib.nullcontext():
            dq = _grad_q(p, qm, arg, g, q, setup.config) if need_q else None
            dp = _grad_p(q, qm, arg, g, p, setup.config) if need_p else None
        return dq, dp, None, None, None, None


def _forward(q, p, labels, qm, pm, p_real, setup: _Setup):
    mod = _kernel_module()
    cfg = setup.config
    num_q, len_q, dim = q.shape
    num_p, len_p, _ = p.shape
    splits = -(-num_p // cfg.block_j)
    scores = torch.empty(num_q, num_p, device=q.device, dtype=torch.float32)
    arg = torch.empty(num_q, num_p, len_q, device=q.device, dtype=torch.int16 if len_p < 2**15 else torch.int32)
    m = torch.empty(splits, num_q, device=q.device, dtype=torch.float32)
    l = torch.empty_like(m)
    pos = torch.empty_like(m)
    q_pos, p_ids, xmask, stride_xmask = setup.spec.kernel_args(labels)
    mod.maxsim_fwd_kernel[(num_q, splits)](
        q, p, qm, pm, p_real.view(torch.uint8), labels, q_pos, p_ids, xmask, scores, arg, m, l, pos,
        num_q, num_p, len_q, len_p, dim, q.stride(0), q.stride(1), p.stride(0), p.stride(1), stride_xmask,
        setup.scale2, EXCLUDE=_EXCLUDE_MODES[setup.spec.mode], PRECISION=_precision(q), BLOCK_J=cfg.block_j,
        BLOCK_T=cfg.block_t, BLOCK_U=cfg.block_u, BLOCK_K=cfg.block_k, **_launch_options(mod, cfg))
    losses, lse2, gpos = _merge_splits(m, l, pos)
    return scores, arg, losses, lse2, gpos


def score_gradient(scores, labels, lse2, gpos, p_real, spec: ExcludeSpec, scale2: float) -> torch.Tensor:
    """``softmax - onehot`` of the base-2 logits ``scores * scale2`` (``[B, N]`` fp32): ``exp2(s2 - lse2)``
    for kept non-positive passages, ``gpos = -S / (1 + S)`` at the positive (from the forward, never
    ``softmax - 1``), 0 for excluded passages and for passages without a real token (constant score)."""
    rows = torch.arange(labels.shape[0], device=labels.device)
    keep = p_real.unsqueeze(0).expand_as(scores).clone()
    dropped = spec.dense_mask(labels, scores.shape[1])
    if dropped is not None:
        keep &= ~dropped
    keep[rows, labels] = False
    s2 = torch.where(keep, scores * scale2, torch.full_like(scores, -math.inf))
    g = torch.exp2(s2 - lse2.unsqueeze(1))
    g[rows, labels] = torch.where(p_real[labels], gpos, torch.zeros_like(gpos))
    return g


def _grad_q(p, qm, arg, g, q, cfg: MaxSimConfig):
    """``dq`` by ``maxsim_dq_kernel``: a program per query and block of ``block_t`` query tokens."""
    num_q, len_q, dim = q.shape
    return _token_gradient("maxsim_dq_kernel", p, qm, arg, g, q, cfg.block_t, (num_q, p.shape[0], len_q, dim), cfg,
                           BLOCK_T=cfg.block_t, BLOCK_D=cfg.block_d)


def _grad_p(q, qm, arg, g, p, cfg: MaxSimConfig):
    """``dp`` by ``maxsim_dp_kernel``: a program per passage and block of ``block_u`` passage tokens."""
    num_p, len_p, dim = p.shape
    return _token_gradient("maxsim_dp_kernel", q, qm, arg, g, p, cfg.block_u,
                           (q.shape[0], num_p, q.shape[1], len_p, dim), cfg, PRECISION=_precision(q),
                           BLOCK_T=cfg.block_t, BLOCK_U=cfg.block_u, BLOCK_D=cfg.block_d)


def _token_gradient(kernel_name, other, qm, arg, g, like, block, sizes, cfg: MaxSimConfig, **constexprs):
    """The gradient of ``like`` (``[rows, tokens, d]``) from ``kernel_name``, launched over its rows x blocks of
    ``block`` tokens with ``(other, qm, arg, g, out, *sizes, other's and out's row and token strides)``."""
    mod = _kernel_module()
    out = torch.empty_like(like)
    getattr(mod, kernel_name)[(like.shape[0], -(-like.shape[1] // block))](
        other, qm, arg, g, out, *sizes, other.stride(0), other.stride(1), out.stride(0), out.stride(1),
        **constexprs, **_launch_options(mod, cfg))
    return out
