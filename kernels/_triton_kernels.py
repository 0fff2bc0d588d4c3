"""Triton kernels of the fused InfoNCE loss (imported lazily by :mod:`hopscotch.kernels.infonce`).

Notation: ``q`` is ``[B, D]``, ``p`` is ``[N, D]``, both row-major with unit stride on ``D``;
``labels[i]`` is the index of query ``i``'s positive. Scores are kept in base 2:
``s2 = (q p^T) * log2(e) / t``, so ``exp(s / t - lse) = exp2(s2 - lse2)`` and ``lse = lse2 * ln 2``.

* :func:`infonce_fwd_kernel` streams passage tiles with an online log-sum-exp in fp32 over the
  passages *other than the positive* and writes, per query and per split of the passages, the
  running max ``m``, the running sum ``l`` and the positive's score (all base 2). The wrapper merges
  the splits into ``log S_i`` (``S_i = sum_{j != pos} exp(s_ij - s_i,pos)``) and the loss
  ``log1p(S_i)``: the positive never enters the sum, so nothing cancels when it dominates.
* :func:`infonce_bwd_kernel` recomputes score tiles and accumulates ``G P`` (``SIDE=0``, dQ) or
  ``G^T Q`` (``SIDE=1``, dP) into an fp32 workspace of shape ``[splits, B, D]`` or ``[splits, N, D]``;
  nothing of size ``B x N`` exists. ``G`` is ``exp2(s2_ij - lse2_i)``
  (``= exp(s_ij - s_i,pos) / (1 + S_i)``) for the kept non-positive entries, ``gpos_i = -S_i / (1 + S_i)``
  at the positive (computed once per row by the wrapper, never as ``softmax - 1``), 0 elsewhere.
* :func:`infonce_grad_tile_kernel` writes ``G`` for a column chunk of passages, for the
  ``backward="chunked"`` variant that hands the two products to cuBLAS.

Exclusion (``EXCLUDE`` constexpr): 0 none; 1 ids -- drop ``j`` from row ``i`` when
``p_ids[j] == q_pos_ids[i]``; 2 dense ``[B, N]`` uint8 mask. The positive is never dropped.
Masked scores are replaced by a large finite negative before ``exp2`` and the result is zeroed with
``where``: no ``-inf`` enters arithmetic, so no NaN.

The kernels call only Triton builtins (``tl.full``, ``tl.reduce``, ...) and ``@triton.jit`` helpers of
this module, never Triton's own ``@jit`` library functions (``tl.zeros``, ``tl.sum``, ``tl.max``):
those are defined once, when ``triton`` is first imported, for the compiler or for the interpreter,
while this module can be redefined for the interpreter later (``TRITON_INTERPRET=1`` set after
``import triton``, as in a test suite). Triton's combine functions are only passed to ``tl.reduce``,
never called, which works in both modes.
"""

from __future__ import annotations

import os

import triton
import triton.language as tl

#: Whether these kernels were defined under ``TRITON_INTERPRET=1`` (the CPU interpreter).
INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

NEG_BIG = tl.constexpr(-1.0e30)


@triton.jit
def _add(a, b):
    return a + b


@triton.jit
def _maximum(a, b):
    return tl.maximum(a, b)


# Triton's own combine functions where they exist: the interpreter recognises them and reduces with
# numpy instead of calling the combine function element by element.
_SUM = getattr(tl.standard, "_sum_combine", _add)
_MAX = getattr(tl.standard, "_elementwise_max", _maximum)


@triton.jit
def _span(start, limit, BLOCK: tl.constexpr):
    """``(idx, idx < limit)``: the ``BLOCK`` indices from ``start`` and which of them are in range."""
    idx = start + tl.arange(0, BLOCK)
    return idx, idx < limit


@triton.jit
def _dot(a, b, acc, PRECISION: tl.constexpr):
    """``acc + a @ b`` in fp32. ``PRECISION == "upcast"`` multiplies fp32 copies: Triton's CPU
    interpreter multiplies the raw bits of bfloat16 tiles, so the wrapper asks for it there."""
    if PRECISION == "upcast":
        out = tl.dot(a.to(tl.float32), b.to(tl.float32), acc=acc, input_precision="ieee")
    else:
        out = tl.dot(a, b, acc=acc, input_precision=PRECISION)
    return out


@triton.jit
def _score_tile(q_ptr, p_ptr, rows, cols, B, N, D, stride_q, stride_p,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                PRECISION: tl.constexpr):
    """fp32 ``[BLOCK_M, BLOCK_N]`` tile of ``q[rows] . p[cols]``; out-of-range entries are 0."""
    row_ok = rows < B
    col_ok = cols < N
    q_rows = q_ptr + rows.to(tl.int64)[:, None] * stride_q
    p_cols = p_ptr + cols.to(tl.int64)[None, :] * stride_p
    acc = tl.full((BLOCK_M, BLOCK_N), 0.0, tl.float32)
    for k0 in range(0, D, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        k_ok = ks < D
        q_tile = tl.load(q_rows + ks[None, :], mask=row_ok[:, None] & k_ok[None, :], other=0.0)
        p_tile = tl.load(p_cols + ks[:, None], mask=k_ok[:, None] & col_ok[None, :], other=0.0)
        acc = _dot(q_tile, p_tile, acc, PRECISION)
    return acc


@triton.jit
def _keep_tile(rows, cols, labels, q_pos, pid_ptr, mask_ptr, stride_mask, B, N,
               EXCLUDE: tl.constexpr):
    """Bool ``[BLOCK_M, BLOCK_N]``: entry in range and not excluded (the positive is always kept)."""
    in_range = (rows[:, None] < B) & (cols[None, :] < N)
    if EXCLUDE == 1:
        p_ids = tl.load(pid_ptr + cols, mask=cols < N, other=0)
        dropped = (p_ids[None, :] == q_pos[:, None]) & (cols[None, :] != labels[:, None])
        keep = in_range & ~dropped
    elif EXCLUDE == 2:
        flags = tl.load(mask_ptr + rows.to(tl.int64)[:, None] * stride_mask + cols[None, :],
                        mask=in_range, other=0)
        dropped = (flags != 0) & (cols[None, :] != labels[:, None])
        keep = in_range & ~dropped
    else:
        keep = in_range
    return keep


@triton.jit
def _grad_tile(s2, keep, lse2, gpos, labels, cols):
    """fp32 ``G`` (``softmax - onehot``) for a tile of base-2 scores; excluded entries are 0.

    Non-positive entries: ``exp2(s2 - lse2)``; the positive: ``gpos`` (``-S / (1 + S)``)."""
    is_pos = cols[None, :] == labels[:, None]
    others = keep & ~is_pos
    safe = tl.where(others, s2, NEG_BIG)
    prob = tl.where(others, tl.exp2(safe - lse2[:, None]), 0.0)
    return prob + tl.where(is_pos, gpos[:, None], 0.0)


@triton.jit
def _row_labels(labels_ptr, qpos_ptr, rows, row_ok, EXCLUDE: tl.constexpr):
    """``(labels, q_pos)`` of a block of query rows: each row's positive and, with id exclusion, the id of
    that positive (else the labels again, unused)."""
    labels = tl.load(labels_ptr + rows, mask=row_ok, other=-1)
    q_pos = labels
    if EXCLUDE == 1:
        q_pos = tl.load(qpos_ptr + rows, mask=row_ok, other=0)
    return labels, q_pos


@triton.jit
def _row_stats(lse2_ptr, gpos_ptr, rows, row_ok):
    """``(lse2, gpos)`` of a block of query rows, from the forward."""
    lse2 = tl.load(lse2_ptr + rows, mask=row_ok, other=0.0)
    gpos = tl.load(gpos_ptr + rows, mask=row_ok, other=0.0)
    return lse2, gpos


@triton.jit
def _accumulate(g, src_rows, src_ok, ws_rows, ws_ok, step, first_step, D,
                BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr, PRECISION: tl.constexpr):
    """``ws[r] += g @ src`` for a ``[BLOCK_R, *]`` tile ``g``, ``BLOCK_D`` columns at a time; the workspace
    rows are read back only after the split's first tile stored them (``step > first_step``)."""
    for d0 in range(0, D, BLOCK_D):
        ds = d0 + tl.arange(0, BLOCK_D)
        d_ok = ds < D
        src_tile = tl.load(src_rows + ds[None, :], mask=src_ok[:, None] & d_ok[None, :], other=0.0)
        part = _dot(g, src_tile, tl.full((BLOCK_R, BLOCK_D), 0.0, tl.float32), PRECISION)
        ws_mask = ws_ok[:, None] & d_ok[None, :]
        # Add what earlier tiles stored (the block-shaped compare keeps the interpreter happy).
        has_prev = (step + 0 * ds[None, :]) > first_step
        part += tl.load(ws_rows + ds[None, :], mask=ws_mask & has_prev, other=0.0)
        tl.store(ws_rows + ds[None, :], part, mask=ws_mask)


@triton.jit
def infonce_fwd_kernel(q_ptr, p_ptr, labels_ptr, qpos_ptr, pid_ptr, mask_ptr,
                       m_ptr, l_ptr, pos_ptr,
                       B, N, D, stride_q, stride_p, stride_mask, scale2, split_size, SIZE_CLASS,
                       EXCLUDE: tl.constexpr, PRECISION: tl.constexpr,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """Grid ``(cdiv(B, BLOCK_M), splits)``: online log-sum-exp over the non-positive passages of one split."""
    pid_m, split = tl.program_id(0), tl.program_id(1)
    rows, row_ok = _span(pid_m * BLOCK_M, B, BLOCK_M)
    labels, q_pos = _row_labels(labels_ptr, qpos_ptr, rows, row_ok, EXCLUDE)
    m_i = tl.full((BLOCK_M,), NEG_BIG, tl.float32)
    l_i = tl.full((BLOCK_M,), 0.0, tl.float32)
    pos_i = tl.full((BLOCK_M,), 0.0, tl.float32)
    n_start = split * split_size
    n_end = tl.minimum(N, n_start + split_size)
    for n0 in range(n_start, n_end, BLOCK_N):
        cols = n0 + tl.arange(0, BLOCK_N)
        s2 = _score_tile(q_ptr, p_ptr, rows, cols, B, N, D, stride_q, stride_p,
                         BLOCK_M, BLOCK_N, BLOCK_K, PRECISION) * scale2
        is_pos = cols[None, :] == labels[:, None]
        keep = _keep_tile(rows, cols, labels, q_pos, pid_ptr, mask_ptr, stride_mask, B, N, EXCLUDE) & ~is_pos
        pos_i += tl.reduce(tl.where(is_pos, s2, 0.0), 1, _SUM)
        safe = tl.where(keep, s2, NEG_BIG)
        m_new = tl.maximum(m_i, tl.reduce(safe, 1, _MAX))
        alpha = tl.exp2(m_i - m_new)
        weights = tl.where(keep, tl.exp2(safe - m_new[:, None]), 0.0)
        l_i = l_i * alpha + tl.reduce(weights, 1, _SUM)
        m_i = m_new
    out = split * B + rows
    tl.store(m_ptr + out, m_i, mask=row_ok)
    tl.store(l_ptr + out, l_i, mask=row_ok)
    tl.store(pos_ptr + out, pos_i, mask=row_ok)


@triton.jit
def infonce_bwd_kernel(q_ptr, p_ptr, labels_ptr, qpos_ptr, pid_ptr, mask_ptr, lse2_ptr, gpos_ptr, ws_ptr,
                       B, N, D, stride_q, stride_p, stride_mask, scale2, split_size, SIZE_CLASS,
                       SIDE: tl.constexpr, EXCLUDE: tl.constexpr, PRECISION: tl.constexpr,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                       BLOCK_D: tl.constexpr):
    """The gradient of one side, summed over one split of the other side into ``ws[split]``.

    ``SIDE == 0`` (dQ): grid ``(cdiv(B, BLOCK_M), splits)``, ``ws[split, rows] = sum over the split's
    passages of G P``. ``SIDE == 1`` (dP): grid ``(cdiv(N, BLOCK_N), splits)``, ``ws[split, cols] = sum
    over the split's queries of G^T Q``. A program keeps its own block of rows (queries) or columns
    (passages) and streams blocks of the other side; the ``SIDE`` branches are resolved at compile time."""
    BLOCK_OWN: tl.constexpr = BLOCK_M if SIDE == 0 else BLOCK_N
    BLOCK_OTHER: tl.constexpr = BLOCK_N if SIDE == 0 else BLOCK_M
    if SIDE == 0:
        own_len, other_len, src_ptr, stride_src = B, N, p_ptr, stride_p
    else:
        own_len, other_len, src_ptr, stride_src = N, B, q_ptr, stride_q
    pid, split = tl.program_id(0), tl.program_id(1)
    own, own_ok = _span(pid * BLOCK_OWN, own_len, BLOCK_OWN)
    if SIDE == 0:  # the program's query rows: their labels and statistics are loaded once
        labels, q_pos = _row_labels(labels_ptr, qpos_ptr, own, own_ok, EXCLUDE)
        lse2, gpos = _row_stats(lse2_ptr, gpos_ptr, own, own_ok)
    ws_own = ws_ptr + (split * own_len + own).to(tl.int64)[:, None] * D
    start = split * split_size
    end = tl.minimum(other_len, start + split_size)
    for o0 in range(start, end, BLOCK_OTHER):
        # The workspace rows are read back below after other threads of this program stored them
        # in the previous iteration (load and store layouts may differ): order them with a barrier.
        tl.debug_barrier()
        other, other_ok = _span(o0, other_len, BLOCK_OTHER)
        if SIDE == 0:
            rows, cols = own, other
        else:  # the streamed blocks are query rows
            rows, cols = other, own
            labels, q_pos = _row_labels(labels_ptr, qpos_ptr, rows, other_ok, EXCLUDE)
            lse2, gpos = _row_stats(lse2_ptr, gpos_ptr, rows, other_ok)
        s2 = _score_tile(q_ptr, p_ptr, rows, cols, B, N, D, stride_q, stride_p,
                         BLOCK_M, BLOCK_N, BLOCK_K, PRECISION) * scale2
        keep = _keep_tile(rows, cols, labels, q_pos, pid_ptr, mask_ptr, stride_mask, B, N, EXCLUDE)
        g = _grad_tile(s2, keep, lse2, gpos, labels, cols).to(src_ptr.dtype.element_ty)
        if SIDE == 1:
            g = tl.trans(g)  # [BLOCK_N, BLOCK_M]: G^T
        src = src_ptr + other.to(tl.int64)[:, None] * stride_src
        _accumulate(g, src, other_ok, ws_own, own_ok, o0, start, D, BLOCK_OWN, BLOCK_D, PRECISION)


@triton.jit
def infonce_grad_tile_kernel(q_ptr, p_ptr, labels_ptr, qpos_ptr, pid_ptr, mask_ptr, lse2_ptr, gpos_ptr, g_ptr,
                             B, N, D, stride_q, stride_p, stride_mask, stride_g, scale2, col_start,
                             col_count, SIZE_CLASS,
                             EXCLUDE: tl.constexpr, PRECISION: tl.constexpr,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """Grid ``(cdiv(B, BLOCK_M), cdiv(col_count, BLOCK_N))``: ``g[:, c] = G[:, col_start + c]``."""
    pid_m, pid_c = tl.program_id(0), tl.program_id(1)
    rows, row_ok = _span(pid_m * BLOCK_M, B, BLOCK_M)
    local = pid_c * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = col_start + local
    labels, q_pos = _row_labels(labels_ptr, qpos_ptr, rows, row_ok, EXCLUDE)
    lse2, gpos = _row_stats(lse2_ptr, gpos_ptr, rows, row_ok)
    s2 = _score_tile(q_ptr, p_ptr, rows, cols, B, N, D, stride_q, stride_p,
                     BLOCK_M, BLOCK_N, BLOCK_K, PRECISION) * scale2
    keep = _keep_tile(rows, cols, labels, q_pos, pid_ptr, mask_ptr, stride_mask, B, N, EXCLUDE)
    g = _grad_tile(s2, keep, lse2, gpos, labels, cols)
    out_ok = row_ok[:, None] & (local[None, :] < col_count)
    tl.store(g_ptr + rows.to(tl.int64)[:, None] * stride_g + local[None, :],
             g.to(g_ptr.dtype.element_ty), mask=out_ok)


def _configs(shapes, with_block_d):
    configs = []
    for block_m, block_n, block_k, block_d, warps, stages in shapes:
        meta = {"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k}
        if with_block_d:
            meta["BLOCK_D"] = block_d
        configs.append(triton.Config(meta, num_warps=warps, num_stages=stages))
    return configs


# Candidate tiles for the GPU autotuner: (BLOCK_M, BLOCK_N, BLOCK_K, BLOCK_D, warps, stages). Every
# BLOCK_M / BLOCK_N divides SPLIT_ALIGN so that split boundaries fall on tile boundaries.
SPLIT_ALIGN = 256
# Checked with experiments/kernel_checks/compile_report.py for sm_90: no register spills beyond a few bytes.
_FWD_SHAPES = [(128, 128, 64, 0, 8, 3), (128, 128, 32, 0, 8, 4), (128, 64, 64, 0, 8, 3), (64, 128, 64, 0, 4, 3),
               (64, 64, 64, 0, 4, 4)]
_BWD_SHAPES = [(64, 128, 64, 64, 8, 2), (128, 64, 64, 64, 8, 2), (128, 128, 64, 64, 8, 2), (128, 128, 32, 64, 8, 3),
               (64, 64, 64, 128, 4, 2), (64, 128, 32, 64, 4, 3)]
_TUNE_KEY = ["D", "SIZE_CLASS", "EXCLUDE"]

infonce_fwd_tuned = triton.autotune(_configs(_FWD_SHAPES, False), key=_TUNE_KEY)(infonce_fwd_kernel)
# One autotuner for both sides of the backward: ``SIDE`` is in its key, so each side is tuned on its own.
infonce_bwd_tuned = triton.autotune(_configs(_BWD_SHAPES, True), key=_TUNE_KEY + ["SIDE"])(infonce_bwd_kernel)
infonce_grad_tile_tuned = triton.autotune(_configs(_FWD_SHAPES, False), key=_TUNE_KEY)(infonce_grad_tile_kernel)
