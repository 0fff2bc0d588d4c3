"""Triton kernels of the fused MaxSim InfoNCE loss (imported lazily by :mod:`hopscotch.kernels.maxsim`).

Notation: ``q`` is ``[B, LQ, D]``, ``p`` is ``[N, LP, D]`` (unit stride on ``D``); ``qmask [B, LQ]`` and
``pmask [N, LP]`` are uint8 (1 = real token); ``preal [N]`` is 1 where a passage has a real token.
``s_ij = sum_{t real} max_{u real} q[i, t] . p[j, u]``; logits in base 2, ``s2 = s * log2(e) / t``.
The ``[B, N, LQ, LP]`` token similarities exist only one ``[BLOCK_T, BLOCK_U]`` tile at a time.

* :func:`maxsim_fwd_kernel`, grid ``(B, cdiv(N, BLOCK_J))``: one program per query and block of
  ``BLOCK_J`` passages. Per passage it streams query-token blocks and passage-token tiles, keeps per
  query token the running max and its arg max over the passage's real tokens, writes the arg max
  (``arg [B, N, LQ]``, the first maximal token on ties) and the score ``s [B, N]``; over its block of
  passages it keeps the online log-sum-exp of the single-vector kernel (base 2, the positive left
  out, excluded passages left out) and writes its running max ``m``, sum ``l`` and the positive's
  ``s2`` to ``[splits, B]`` rows that the wrapper merges.
* :func:`maxsim_dq_kernel`, grid ``(B, cdiv(LQ, BLOCK_T))``: ``dq[i, t] = qmask[i, t] sum_j
  G[i, j] p[j, arg[i, j, t]]``: a gather of passage-token rows through the arg max.
* :func:`maxsim_dp_kernel`, grid ``(N, cdiv(LP, BLOCK_U))``: ``dp[j, u] = sum_i G[i, j] sum_{t real,
  arg[i, j, t] = u} q[i, t]``: the scatter through the arg max written as a gather, a one-hot
  ``[BLOCK_U, BLOCK_T]`` tile (exact 0 / 1 in every dtype) times the query-token tile on the tensor
  cores, scaled by ``G[i, j]`` in fp32. No atomics: each program owns its rows of ``dp``.

``G`` (``[B, N]`` fp32, ``grad / (B t) * (softmax - onehot)``, 0 for excluded and empty passages) is
formed by the wrapper from the saved scores: it is ``Lq`` times smaller than the saved arg max.

Exclusion (``EXCLUDE``): 0 none; 1 ids (drop ``j`` from row ``i`` when ``p_ids[j] == q_pos_ids[i]``);
2 dense ``[B, N]`` uint8 mask; the positive is never dropped. As in :mod:`._triton_kernels`, masked
values become ``NEG_BIG`` (finite) and results are zeroed with ``where``: no ``-inf``, no NaN; the
kernels call only Triton builtins and ``@triton.jit`` helpers (``tl.reduce`` with a combine function,
never ``tl.sum`` / ``tl.max``), so they can be redefined for the interpreter after ``import triton``.
Shared helpers (``_dot``, the combine functions) come from :mod:`._triton_kernels`, reloaded here when
it was defined for the other mode.
"""

from __future__ import annotations

import importlib
import os

import triton
import triton.language as tl

from . import _triton_kernels as _base

#: Whether these kernels were defined under ``TRITON_INTERPRET=1`` (the CPU interpreter).
INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
if _base.INTERPRET != INTERPRET:  # the shared helpers must be defined for the same mode as these kernels
    _base = importlib.reload(_base)

NEG_BIG = tl.constexpr(-1.0e30)
#: ``EMPTY_PASSAGE_SCORE`` of :mod:`hopscotch.kernels.maxsim_reference` (kept equal by a test).
EMPTY_SCORE = tl.constexpr(-1.0e9)
#: Larger than any token index: the "no index yet" of the arg max's min-reduction.
BIG_INDEX = tl.constexpr(2**30)

_dot = _base._dot
_span = _base._span
_SUM = _base._SUM
_MAX = _base._MAX


@triton.jit
def _minimum(a, b):
    return tl.minimum(a, b)


_MIN = getattr(tl.standard, "_elementwise_min", _minimum)


@triton.jit
def _token_tile(q_rows, p_rows, t_ok, u_ok, D, BLOCK_T: tl.constexpr, BLOCK_U: tl.constexpr,
                BLOCK_K: tl.constexpr, PRECISION: tl.constexpr):
    """fp32 ``[BLOCK_T, BLOCK_U]`` tile of ``q[i, ts] . p[j, us]``; ``q_rows`` / ``p_rows`` are the row
    pointers (``[BLOCK_T, 1]`` and ``[1, BLOCK_U]``); out-of-range entries are 0."""
    acc = tl.full((BLOCK_T, BLOCK_U), 0.0, tl.float32)
    for k0 in range(0, D, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        k_ok = ks < D
        q_tile = tl.load(q_rows + ks[None, :], mask=t_ok[:, None] & k_ok[None, :], other=0.0)
        p_tile = tl.load(p_rows + ks[:, None], mask=k_ok[:, None] & u_ok[None, :], other=0.0)
        acc = _dot(q_tile, p_tile, acc, PRECISION)
    return acc


@triton.jit
def maxsim_fwd_kernel(q_ptr, p_ptr, qmask_ptr, pmask_ptr, preal_ptr, labels_ptr, qpos_ptr, pid_ptr, xmask_ptr,
                      s_ptr, arg_ptr, m_ptr, l_ptr, pos_ptr,
                      B, N, LQ, LP, D, stride_qb, stride_qt, stride_pn, stride_pu, stride_xmask, scale2,
                      EXCLUDE: tl.constexpr, PRECISION: tl.constexpr, BLOCK_J: tl.constexpr,
                      BLOCK_T: tl.constexpr, BLOCK_U: tl.constexpr, BLOCK_K: tl.constexpr):
    """Grid ``(B, cdiv(N, BLOCK_J))``: scores, arg max and the online log-sum-exp of one block of passages."""
    i = tl.program_id(0)
    split = tl.program_id(1)
    js = split * BLOCK_J + tl.arange(0, BLOCK_J)
    j_ok = js < N
    q_base = q_ptr + i.to(tl.int64) * stride_qb
    scores = tl.full((BLOCK_J,), 0.0, tl.float32)
    for jj in range(0, BLOCK_J):
        j = tl.minimum(split * BLOCK_J + jj, N - 1)  # past the end: recompute passage N - 1, stored nowhere
        p_base = p_ptr + j.to(tl.int64) * stride_pn
        s_j = tl.reduce(tl.full((BLOCK_T,), 0.0, tl.float32), 0, _SUM)
        for t0 in range(0, LQ, BLOCK_T):
            ts = t0 + tl.arange(0, BLOCK_T)
            t_ok = ts < LQ
            q_real = tl.load(qmask_ptr + i.to(tl.int64) * LQ + ts, mask=t_ok, other=0) != 0
            best = tl.full((BLOCK_T,), NEG_BIG, tl.float32)
            arg = tl.full((BLOCK_T,), 0, tl.int32)
            for u0 in range(0, LP, BLOCK_U):
                us = u0 + tl.arange(0, BLOCK_U)
                u_ok = us < LP
                p_real = tl.load(pmask_ptr + j.to(tl.int64) * LP + us, mask=u_ok, other=0) != 0
                tile = _token_tile(q_base + ts.to(tl.int64)[:, None] * stride_qt,
                                   p_base + us.to(tl.int64)[None, :] * stride_pu,
                                   t_ok, u_ok, D, BLOCK_T, BLOCK_U, BLOCK_K, PRECISION)
                tile = tl.where(p_real[None, :], tile, NEG_BIG)
                tile_max = tl.reduce(tile, 1, _MAX)
                # The first token reaching the max (torch.max's choice for ties).
                tile_arg = tl.reduce(tl.where(tile == tile_max[:, None], us[None, :], BIG_INDEX), 1, _MIN)
                better = tile_max > best
                arg = tl.where(better, tile_arg, arg)
                best = tl.where(better, tile_max, best)
            j_in = (0 * ts + split * BLOCK_J + jj) < N  # block-shaped: the interpreter wants a block mask
            tl.store(arg_ptr + (i.to(tl.int64) * N + j) * LQ + ts, arg.to(arg_ptr.dtype.element_ty),
                     mask=t_ok & j_in)
            s_j += tl.reduce(tl.where(q_real, best, 0.0), 0, _SUM)
        scores = tl.where(tl.arange(0, BLOCK_J) == jj, s_j, scores)
    real = tl.load(preal_ptr + js, mask=j_ok, other=0) != 0
    scores = tl.where(real, scores, EMPTY_SCORE)
    tl.store(s_ptr + i.to(tl.int64) * N + js, scores, mask=j_ok)
    # Online log-sum-exp over the kept passages other than the positive (as infonce_fwd_kernel).
    label = tl.load(labels_ptr + i)
    is_pos = js == label
    keep = j_ok & ~is_pos
    if EXCLUDE == 1:
        p_ids = tl.load(pid_ptr + js, mask=j_ok, other=0)
        keep = keep & (p_ids != tl.load(qpos_ptr + i))
    elif EXCLUDE == 2:
        flags = tl.load(xmask_ptr + i.to(tl.int64) * stride_xmask + js, mask=j_ok, other=0)
        keep = keep & (flags == 0)
    s2 = scores * scale2
    pos2 = tl.reduce(tl.where(is_pos, s2, 0.0), 0, _SUM)
    safe = tl.where(keep, s2, NEG_BIG)
    m = tl.reduce(safe, 0, _MAX)
    l = tl.reduce(tl.where(keep, tl.exp2(safe - m), 0.0), 0, _SUM)
    out = split.to(tl.int64) * B + i
    tl.store(m_ptr + out, m)
    tl.store(l_ptr + out, l)
    tl.store(pos_ptr + out, pos2)


@triton.jit
def maxsim_dq_kernel(p_ptr, qmask_ptr, arg_ptr, g_ptr, dq_ptr,
                     B, N, LQ, D, stride_pn, stride_pu, stride_dqb, stride_dqt,
                     BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):
    """Grid ``(B, cdiv(LQ, BLOCK_T))``: ``dq[i, ts] = qmask[i, ts] * sum_j G[i, j] p[j, arg[i, j, ts]]``."""
    i = tl.program_id(0)
    ts = tl.program_id(1) * BLOCK_T + tl.arange(0, BLOCK_T)
    t_ok = ts < LQ
    q_real = (tl.load(qmask_ptr + i.to(tl.int64) * LQ + ts, mask=t_ok, other=0) != 0) & t_ok
    for d0 in range(0, D, BLOCK_D):
        ds, d_ok = _span(d0, D, BLOCK_D)
        acc = tl.full((BLOCK_T, BLOCK_D), 0.0, tl.float32)
        for j0 in range(0, N):
            j = i.to(tl.int64) * 0 + j0  # int64 (a loop variable is a Python int in the interpreter)
            g = tl.load(g_ptr + i.to(tl.int64) * N + j)
            idx = tl.load(arg_ptr + (i.to(tl.int64) * N + j) * LQ + ts, mask=q_real, other=0).to(tl.int64)
            rows = tl.load(p_ptr + j * stride_pn + idx[:, None] * stride_pu + ds[None, :],
                           mask=q_real[:, None] & d_ok[None, :], other=0.0)
            acc += g * rows.to(tl.float32)
        tl.store(dq_ptr + i.to(tl.int64) * stride_dqb + ts.to(tl.int64)[:, None] * stride_dqt + ds[None, :],
                 acc.to(dq_ptr.dtype.element_ty), mask=t_ok[:, None] & d_ok[None, :])


@triton.jit
def maxsim_dp_kernel(q_ptr, qmask_ptr, arg_ptr, g_ptr, dp_ptr,
                     B, N, LQ, LP, D, stride_qb, stride_qt, stride_dpn, stride_dpu,
                     PRECISION: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_U: tl.constexpr,
                     BLOCK_D: tl.constexpr):
    """Grid ``(N, cdiv(LP, BLOCK_U))``: ``dp[j, us] = sum_i G[i, j] sum_{t real, arg[i, j, t] = u} q[i, t]``."""
    j = tl.program_id(0)
    us = tl.program_id(1) * BLOCK_U + tl.arange(0, BLOCK_U)
    u_ok = us < LP
    for d0 in range(0, D, BLOCK_D):
        ds, d_ok = _span(d0, D, BLOCK_D)
        acc = tl.full((BLOCK_U, BLOCK_D), 0.0, tl.float32)
        for i0 in range(0, B):
            i = j.to(tl.int64) * 0 + i0  # int64 (a loop variable is a Python int in the interpreter)
            g = tl.load(g_ptr + i * N + j)
            part = tl.full((BLOCK_U, BLOCK_D), 0.0, tl.float32)
            for t0 in range(0, LQ, BLOCK_T):
                ts, t_ok = _span(t0, LQ, BLOCK_T)
                q_real = (tl.load(qmask_ptr + i * LQ + ts, mask=t_ok, other=0) != 0) & t_ok
                idx = tl.load(arg_ptr + (i * N + j) * LQ + ts, mask=q_real, other=-1).to(tl.int32)
                q_tile = tl.load(q_ptr + i * stride_qb + ts.to(tl.int64)[:, None] * stride_qt
                                 + ds[None, :], mask=t_ok[:, None] & d_ok[None, :], other=0.0)
                hits = (us[:, None] == idx[None, :]) & q_real[None, :]
                onehot = tl.where(hits, 1.0, 0.0).to(q_tile.dtype)
                part = _dot(onehot, q_tile, part, PRECISION)
            acc += g * part
        tl.store(dp_ptr + j.to(tl.int64) * stride_dpn + us.to(tl.int64)[:, None] * stride_dpu + ds[None, :],
                 acc.to(dp_ptr.dtype.element_ty), mask=u_ok[:, None] & d_ok[None, :])
