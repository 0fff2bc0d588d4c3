"""Fused InfoNCE loss: Triton kernels that never build the ``B x N`` score matrix.

The loss is computed in the stable form of :mod:`hopscotch.kernels.reference`,
``loss_i = log1p(S_i)`` with ``S_i = sum_{j != pos, kept} exp((s_ij - s_i,pos) / t)``: the forward
kernel streams passage tiles with an online log-sum-exp in fp32 that leaves the positive out, and
keeps per query only ``lse2`` and the positive's gradient ``-S_i / (1 + S_i)``; the backward kernels
recompute score tiles and accumulate ``dQ = G P / t`` and ``dP = G^T Q / t`` tile by tile
(``G = softmax - onehot``, its positive entry taken from the forward, never computed as
``softmax - 1``). Memory is ``O((B + N) d)``: the inputs, their gradients and fp32 accumulators.

Two backward variants, same results:

* ``backward="fused"`` (default): everything in Triton, fp32 accumulators ``[splits, B, d]`` and
  ``[splits, N, d]`` (``splits`` is 1 unless a side is too short to fill the GPU).
* ``backward="chunked"``: a Triton kernel writes ``softmax - onehot`` for ``chunk_size`` passages at
  a time (a ``B x chunk_size`` buffer, 64 Mi elements by default) and cuBLAS does both products.

On CPU the kernels run in Triton's interpreter while ``TRITON_INTERPRET=1`` is set (tests do that;
the kernels are redefined when the variable changes, even after ``import triton``). Without it, CPU
tensors fall back to :func:`hopscotch.kernels.reference.infonce_loss` with a one-time warning, by the rule
of :func:`hopscotch.kernels.select.choose_impl`.

Example (not run: it needs CUDA)::

    import torch
    from hopscotch import kernels

    q = torch.nn.functional.normalize(torch.randn(4096, 768, device="cuda"), dim=-1).bfloat16().requires_grad_()
    p = torch.nn.functional.normalize(torch.randn(32768, 768, device="cuda"), dim=-1).bfloat16().requires_grad_()
    labels = torch.arange(4096, device="cuda") * 8
    loss = kernels.infonce_loss(q, p, labels, temperature=0.02)
    loss.backward()
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Optional

import torch

from .exclusion import ExcludeArg, ExcludeSpec, check_inputs, normalize_exclude
from .reference import infonce_loss as reference_infonce_loss
from .select import choose_impl, kernel_module

LOG2E = 1.0 / math.log(2.0)
LN2 = math.log(2.0)
#: Elements of the ``B x chunk_size`` buffer of ``backward="chunked"`` (128 MiB in bf16).
CHUNK_ELEMENTS = 64 * 1024 * 1024
_EXCLUDE_MODES = {"none": 0, "ids": 1, "dense": 2}


@dataclass(frozen=True)
class KernelConfig:
    """Fixed tile sizes instead of autotuning (always used by the CPU interpreter).

    Args:
        block_m: queries per tile; block_n: passages per tile; block_k: embedding columns per step
            of the score product; block_d: embedding columns per step of the gradient products.
            All powers of two, at least 16.
        split_size: passages (forward, dQ) or queries (dP) per split; ``None`` picks it from the
            GPU's SM count (one split on CPU). Must be a multiple of ``block_m`` and ``block_n``.
        num_warps, num_stages: Triton launch options (ignored by the interpreter).
    """

    block_m: int = 32
    block_n: int = 64
    block_k: int = 64
    block_d: int = 128
    split_size: Optional[int] = None
    num_warps: int = 4
    num_stages: int = 2

    def __post_init__(self):
        for name in ("block_m", "block_n", "block_k", "block_d"):
            value = getattr(self, name)
            if value < 16 or value > 256 or value & (value - 1):
                raise ValueError(f"KernelConfig.{name}: expected a power of two in [16, 256], got {value}")
        if self.split_size is not None and (
            self.split_size <= 0 or self.split_size % self.block_m or self.split_size % self.block_n
        ):
            raise ValueError(
                f"KernelConfig.split_size: expected a positive multiple of block_m={self.block_m} and "
                f"block_n={self.block_n}, got {self.split_size}"
            )


def _kernel_module():
    """The Triton kernels, redefined if ``TRITON_INTERPRET`` changed since."""
    return kernel_module("hopscotch.kernels._triton_kernels")


def infonce_loss(
    q: torch.Tensor,
    p: torch.Tensor,
    labels: torch.Tensor,
    temperature,
    exclude: ExcludeArg = None,
    *,
    backward: str = "fused",
    config: Optional[KernelConfig] = None,
    chunk_size: Optional[int] = None,
) -> torch.Tensor:
    """Mean InfoNCE loss ``mean_i log1p(sum_{j != pos, kept} exp((s_ij - s_i,pos) / t))``, fused.

    Same contract as :func:`hopscotch.kernels.reference.infonce_loss`: excluded passages leave the row's
    sum, the positive is never excluded, a row with only its positive left has loss 0.

    Args:
        q: ``[B, d]`` float16, bfloat16 or float32 queries (CUDA, or CPU under ``TRITON_INTERPRET=1``).
        p: ``[N, d]`` passages, same dtype and device.
        labels: ``[B]`` integer index of each query's positive in ``p``.
        temperature: ``t > 0`` (float or scalar tensor; no gradient flows to it).
        exclude: ``None``, a ``[B, N]`` bool mask, or ``(q_pos_ids [B], p_ids [N])`` integer tensors
            meaning "drop passage j from query i when ``p_ids[j] == q_pos_ids[i]``".
        backward: ``"fused"`` (all Triton, no buffer of size ``B x anything``) or ``"chunked"``
            (Triton writes ``softmax - onehot`` per passage chunk, cuBLAS multiplies).
        config: fixed tile sizes; ``None`` autotunes on GPU (interpreter: ``KernelConfig()``).
        chunk_size: passages per chunk for ``backward="chunked"``; default ``CHUNK_ELEMENTS // B``.

    Returns:
        A float32 scalar. Scores, log-sum-exp and gradient accumulators are fp32 for every input
        dtype; the gradients of ``q`` and ``p`` come back in the input dtype.
    """
    t = check_inputs(q, p, labels, temperature)
    spec = normalize_exclude(exclude, labels, q.shape[0], p.shape[0])
    if isinstance(temperature, torch.Tensor) and temperature.requires_grad:
        raise ValueError("temperature: the fused loss takes a fixed temperature; use "
                         "hopscotch.kernels.reference_infonce_loss for a learnable one")
    if backward not in ("fused", "chunked"):
        raise ValueError(f"backward: expected 'fused' or 'chunked', got {backward!r}")
    if chunk_size is not None and chunk_size < 1:
        raise ValueError(f"chunk_size: expected a positive integer, got {chunk_size}")
    if choose_impl(q.device, "fused", "infonce_loss") == "reference":  # no Triton here (CPU, no interpreter)
        return reference_infonce_loss(q, p, labels, temperature, exclude)
    if q.dtype == torch.float64:
        raise TypeError("q, p: the fused kernel takes float16, bfloat16 or float32; use "
                        "hopscotch.kernels.reference_infonce_loss for float64")
    if config is None and q.device.type == "cpu":
        config = KernelConfig()
    return _FusedInfoNCE.apply(q, p, labels, _Setup(t, spec, config, backward, chunk_size))


@dataclass(frozen=True)
class _Setup:
    """The arguments of one fused loss call that are not tensors with a gradient (checked already)."""

    temperature: float
    spec: ExcludeSpec
    config: Optional[KernelConfig]
    backward: str
    chunk_size: Optional[int]

    @property
    def scale2(self) -> float:
        """Factor from ``q . p`` to the base-2 score ``s2``."""
        return LOG2E / self.temperature

    @property
    def exclude_mode(self) -> int:
        return _EXCLUDE_MODES[self.spec.mode]


class _FusedInfoNCE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, p, labels, setup: _Setup):
        q = q.contiguous()
        p = p.contiguous()
        labels = labels.to(torch.int64).contiguous()
        with torch.cuda.device(q.device) if q.is_cuda else contextlib.nullcontext():
            losses, lse2, gpos = _forward(q, p, labels, setup)
        ctx.save_for_backward(q, p, labels, lse2, gpos)
        ctx.setup = setup
        return losses.mean()

    @staticmethod
    def backward(ctx, grad_out):
        q, p, labels, lse2, gpos = ctx.saved_tensors
        setup = ctx.setup
        # dL/ds_ij = grad_out / (B t) * (softmax_ij - onehot_ij); the kernels produce the bracket.
        scale = grad_out.to(torch.float32) / (q.shape[0] * setup.temperature)
        need_q, need_p = ctx.needs_input_grad[:2]
        with torch.cuda.device(q.device) if q.is_cuda else contextlib.nullcontext():
            if setup.backward == "fused":
                dq, dp = _backward_fused(q, p, labels, (lse2, gpos), setup, scale, need_q, need_p)
            else:
                dq, dp = _backward_chunked(q, p, labels, (lse2, gpos), setup, scale)
        return (dq if need_q else None), (dp if need_p else None), None, None


def _size_class(num_queries: int, num_passages: int) -> int:
    """Autotuning bucket: re-tune only when B x N changes by a factor of 4."""
    return max(0, (num_queries * num_passages).bit_length() // 2)


def _split_size(length: int, other_blocks: int, config: Optional[KernelConfig], device) -> int:
    """Items per split along a side of ``length`` so that about 2 programs per SM run."""
    mod = _kernel_module()
    if config is not None and config.split_size is not None:
        return config.split_size
    if device.type != "cuda":
        align = math.lcm(config.block_m, config.block_n) if config else mod.SPLIT_ALIGN
        return max(align, -(-length // align) * align)
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    splits = max(1, min(-(-length // mod.SPLIT_ALIGN), round(2 * sms / max(1, other_blocks))))
    per_split = -(-length // splits)
    return -(-per_split // mod.SPLIT_ALIGN) * mod.SPLIT_ALIGN


def _launch(kernel_name, grid_fn, args, config: Optional[KernelConfig], with_block_d: bool, exclude_mode, precision,
            **constexprs):
    """Launch ``{kernel_name}_tuned`` (autotuned) or, with a ``config``, ``{kernel_name}_kernel``;
    ``constexprs`` are further compile-time arguments (the backward's ``SIDE``)."""
    mod = _kernel_module()
    constexprs = {"EXCLUDE": exclude_mode, "PRECISION": precision, **constexprs}
    if config is None:
        kernel = getattr(mod, f"{kernel_name}_tuned")
        kernel[grid_fn](*args, **constexprs)
        return
    meta = {"BLOCK_M": config.block_m, "BLOCK_N": config.block_n, "BLOCK_K": config.block_k}
    if with_block_d:
        meta["BLOCK_D"] = config.block_d
    kernel = getattr(mod, f"{kernel_name}_kernel")
    options = {} if mod.INTERPRET else {"num_warps": config.num_warps, "num_stages": config.num_stages}
    kernel[grid_fn(meta)](*args, **constexprs, **meta, **options)


def _precision(q) -> str:
    """bf16 / fp16 use tensor cores with fp32 sums; fp32 inputs multiply in IEEE fp32 unless
    ``torch.backends.cuda.matmul.allow_tf32`` allows TF32, as for ``torch.matmul``."""
    if q.dtype == torch.float32:
        return "tf32" if q.is_cuda and torch.backends.cuda.matmul.allow_tf32 else "ieee"
    if q.dtype == torch.bfloat16 and _kernel_module().INTERPRET:
        return "upcast"
    return "tf32"


def _forward(q, p, labels, setup: _Setup):
    num_q, dim = q.shape
    num_p = p.shape[0]
    q_pos, p_ids, mask, stride_mask = setup.spec.kernel_args(labels)
    split = _split_size(num_p, -(-num_q // 64), setup.config, q.device)
    splits = -(-num_p // split)
    m = torch.empty(splits, num_q, device=q.device, dtype=torch.float32)
    l = torch.empty_like(m)
    pos = torch.empty_like(m)
    args = (q, p, labels, q_pos, p_ids, mask, m, l, pos, num_q, num_p, dim, q.stride(0), p.stride(0),
            stride_mask, setup.scale2, split, _size_class(num_q, num_p))
    _launch("infonce_fwd", lambda meta: (-(-num_q // meta["BLOCK_M"]), splits), args, setup.config, False,
            setup.exclude_mode, _precision(q))
    return _merge_splits(m, l, pos)


def _merge_splits(m, l, pos):
    """Per-row loss ``log1p(S)``, ``lse2 = pos2 + log2(1 + S)`` and ``gpos = -S / (1 + S)``.

    ``m``, ``l``: ``[splits, B]`` running max and sum (base 2) over the non-positive passages;
    ``pos``: ``[splits, B]`` the positive's base-2 score (0 in every split but its own).
    ``log S = (m + log2 l - pos2) ln 2`` is ``-inf`` for a row with nothing but its positive.
    """
    m_all = m.max(dim=0).values
    pos2 = pos.sum(dim=0)
    log_s = (m_all + torch.log2((l * torch.exp2(m - m_all)).sum(dim=0)) - pos2) * LN2
    losses = torch.where(log_s > 0, log_s + torch.log1p(torch.exp(-log_s)), torch.log1p(torch.exp(log_s)))
    return losses, pos2 + losses * LOG2E, -torch.exp(log_s - losses)


def _backward_fused(q, p, labels, row_stats, setup: _Setup, scale, need_q=True, need_p=True):
    """dQ and dP from ``infonce_bwd`` with ``SIDE`` 0 and 1 (``None`` for one not needed)."""
    num_q, dim = q.shape
    num_p = p.shape[0]
    q_pos, p_ids, mask, stride_mask = setup.spec.kernel_args(labels)
    inputs = (q, p, labels, q_pos, p_ids, mask) + tuple(row_stats)
    sizes = (num_q, num_p, dim, q.stride(0), p.stride(0), stride_mask, setup.scale2)
    size_class = _size_class(num_q, num_p)

    def gradient(side: int, rows: int, other: int, block: str, dtype):
        """The gradient of the side with ``rows`` rows: programs over its blocks of ``block`` rows x splits
        of the ``other`` side, summed from a ``[splits, rows, d]`` fp32 workspace."""
        split = _split_size(other, -(-rows // 64), setup.config, q.device)
        ws = torch.empty(-(-other // split), rows, dim, device=q.device, dtype=torch.float32)
        _launch("infonce_bwd", lambda meta: (-(-rows // meta[block]), ws.shape[0]),
                inputs + (ws,) + sizes + (split, size_class), setup.config, True, setup.exclude_mode, _precision(q),
                SIDE=side)
        return _sum_splits(ws, scale, dtype)

    dq = gradient(0, num_q, num_p, "BLOCK_M", q.dtype) if need_q else None
    dp = gradient(1, num_p, num_q, "BLOCK_N", p.dtype) if need_p else None
    return dq, dp


def _sum_splits(ws, scale, dtype):
    """Sum a ``[splits, rows, d]`` fp32 workspace over splits, scale it, cast it to ``dtype``."""
    total = ws[0] if ws.shape[0] == 1 else ws.sum(dim=0)
    return total.mul_(scale).to(dtype)


def _backward_chunked(q, p, labels, row_stats, setup: _Setup, scale):
    num_q, dim = q.shape
    num_p = p.shape[0]
    q_pos, p_ids, mask, stride_mask = setup.spec.kernel_args(labels)
    size_class = _size_class(num_q, num_p)
    chunk = min(num_p, setup.chunk_size or max(256, CHUNK_ELEMENTS // num_q // 256 * 256))
    buffer = torch.empty(num_q, chunk, device=q.device, dtype=q.dtype)
    dq_acc = torch.zeros(num_q, dim, device=q.device, dtype=torch.float32)
    dp = torch.empty_like(p)
    for start in range(0, num_p, chunk):
        count = min(chunk, num_p - start)
        g = buffer[:, :count]
        args = (q, p, labels, q_pos, p_ids, mask, *row_stats, g, num_q, num_p, dim, q.stride(0), p.stride(0),
                stride_mask, buffer.stride(0), setup.scale2, start, count, size_class)
        _launch("infonce_grad_tile",
                lambda meta, count=count: (-(-num_q // meta["BLOCK_M"]), -(-count // meta["BLOCK_N"])),
                args, setup.config, False, setup.exclude_mode, _precision(q))
        dq_acc.add_(torch.mm(g, p[start:start + count]))
        dp[start:start + count] = torch.mm(g.t(), q).to(torch.float32).mul_(scale)
    return dq_acc.mul_(scale).to(q.dtype), dp
