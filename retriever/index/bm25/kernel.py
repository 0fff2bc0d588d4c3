"""The exact top-k of the on-disk BM25 backend (:mod:`.disk`): block-max MaxScore over impact postings.

Postings are term-major: for term ``t``, rows ``docs[indptr[t]:indptr[t+1]]`` (ascending) and their BM25 impacts
(``impacts``, the bm25s backend's per-(term, document) scores). Each term's postings are cut in blocks of ``block``
postings with the largest impact of each (``block_max``), and each query term has an upper bound ``weight * max
impact``. A query is answered window by window over the row space (``window`` rows at a time, starting at the lowest
row any cursor is on):

* every term's bound in the window is the largest block maximum of its blocks that overlap the window; when the
  bounds of all terms sum to no more than the current k-th best score ``theta`` the window is skipped;
* otherwise the terms are sorted by their window bounds, and the longest prefix whose bounds sum to no more than
  ``theta`` is *non-essential*: a row without an essential term cannot beat ``theta``. The essential terms' postings
  in the window are added into an accumulator (term at a time, sequential reads; the rows reached marked in a
  bitmap), and each row reached, in row order, is completed from the non-essential terms (largest bound first, a
  galloping search from each term's cursor), stopping as soon as the bounds left cannot lift it above ``theta``;
* a row scoring above ``theta`` enters a k-heap, which raises ``theta``. Rows are reached in ascending order, so of
  equal scores the lower row is kept (the result is the top k by score, then row).

Every row that can reach the top k is scored in full, so the result is exactly the top k of the sum of impacts
(MaxScore, Turtle & Flood 1995; window-local block maxima as Lucene's MaxScoreBulkScorer uses them). Compiled
with numba (``nogil``: several Python threads search at once); compiled once and cached beside this file.
"""

from __future__ import annotations

import numpy as np
from numba import njit

INF_ROW = np.int64(1) << 62
#: the de Bruijn table that turns a 64-bit word's lowest set bit into its index (the rows reached in a window are
#: bits of a bitmap, walked in row order)
_DEBRUIJN = np.zeros(64, np.int64)
for _bit in range(64):
    _DEBRUIJN[((1 << _bit) * 0x03F79D71B4CB0A89 & 0xFFFFFFFFFFFFFFFF) >> 58] = _bit
_DEBRUIJN_MUL = np.uint64(0x03F79D71B4CB0A89)
#: postings of the rarest query terms scored in full to seed the k-th best score (:func:`_seed_floor`)
SEED_BUDGET = 800


@njit(cache=True, nogil=True)
def _next_geq(docs, lo, hi, target):
    """The first position in ``[lo, hi)`` whose row is ``>= target`` (``hi`` if none): galloping, then bisection."""
    if lo >= hi or docs[lo] >= target:
        return lo
    prev = lo
    step = 1
    p = lo + 1
    while p < hi and docs[p] < target:
        prev = p
        step *= 2
        p = prev + step
    if p > hi:
        p = hi
    a = prev + 1
    b = p
    while a < b:
        mid = (a + b) >> 1
        if docs[mid] < target:
            a = mid + 1
        else:
            b = mid
    return a


@njit(cache=True, nogil=True, inline="always")  # inlined (Numba IR): a call per step would cost time
def _swap(hs, hd, a, b):
    """Exchange heap entries ``a`` and ``b``."""
    hs[a], hs[b] = hs[b], hs[a]
    hd[a], hd[b] = hd[b], hd[a]


@njit(cache=True, nogil=True)
def _heap_push(hs, hd, n, s, d):
    """Insert ``(s, d)`` into the min-heap ``hs``/``hd`` of ``n - 1`` entries (it then holds ``n``)."""
    i = n - 1
    hs[i] = s
    hd[i] = d
    while i > 0:
        p = (i - 1) >> 1
        if hs[p] < hs[i] or (hs[p] == hs[i] and hd[p] > hd[i]):
            break
        _swap(hs, hd, p, i)
        i = p


@njit(cache=True, nogil=True)
def _heap_replace_top(hs, hd, n, s, d):
    """Replace the heap's smallest entry by ``(s, d)`` (ties: the larger row is the smaller entry)."""
    hs[0] = s
    hd[0] = d
    i = 0
    while True:
        left = 2 * i + 1
        if left >= n:
            break
        m = left
        right = left + 1
        if right < n and (hs[right] < hs[left] or (hs[right] == hs[left] and hd[right] > hd[left])):
            m = right
        if hs[i] < hs[m] or (hs[i] == hs[m] and hd[i] > hd[m]):
            break
        _swap(hs, hd, m, i)
        i = m


@njit(cache=True, nogil=True)
def _seed_floor(docs, impacts, starts, ends, weights, k, budget):
    """A lower bound of the k-th best score: the k-th best full score among the rows of the rarest terms (their
    postings up to ``budget`` of them; 0 when they hold fewer than ``k`` rows)."""
    n = len(starts)
    df = ends - starts
    rare = np.argsort(df)
    total = 0
    m = 0
    while m < n and total < 2 * k:
        total += df[rare[m]]
        m += 1
    if total > budget or total < k:
        return 0.0
    rows = np.empty(total, np.int64)
    j = 0
    for t in range(m):
        i = rare[t]
        for p in range(starts[i], ends[i]):
            rows[j] = docs[p]
            j += 1
    rows = np.unique(rows)
    if len(rows) < k:
        return 0.0
    scores = np.zeros(len(rows), np.float64)
    for i in range(n):  # rows ascending: each term's cursor only moves forward
        p = starts[i]
        w = weights[i]
        for r in range(len(rows)):
            p = _next_geq(docs, p, ends[i], rows[r])
            if p >= ends[i]:
                break
            if docs[p] == rows[r]:
                scores[r] += w * impacts[p]
    scores.sort()
    return scores[len(scores) - k]


@njit(cache=True, nogil=True)
def _pruned(x, size, k, theta, floor):
    """Whether a row bounded by ``x`` cannot enter the top k: not above the full heap's ``theta`` (an equal score
    loses to the earlier row), or below the seeded ``floor`` (k rows are known to score at least that)."""
    return (size == k and x <= theta) or x < floor


@njit(cache=True, nogil=True)
def top_k(docs, impacts, block_max, block, starts, ends, bstarts, weights, k, window, out_rows, out_scores):
    """One query's exact top ``k`` (module doc): its terms' posting ranges ``[starts, ends)``, their first block's
    index in ``block_max`` (``bstarts``) and their weights. Writes rows and scores (best first; ties by row) into
    ``out_rows``/``out_scores`` and returns how many there are (rows scoring 0 are never listed), or -1 when a term's
    rows do not ascend (a damaged index: the caller refuses it)."""
    n = len(starts)
    pos = starts.copy()
    hs = np.empty(k, np.float64)
    hd = np.empty(k, np.int64)
    size = 0
    theta = 0.0
    floor = _seed_floor(docs, impacts, starts, ends, weights, k, SEED_BUDGET) if k > 0 else 0.0
    acc = np.zeros(window, np.float64)
    reached = np.zeros(window // 64 + 1, np.uint64)  # bit o: row ws + o has an essential posting
    bound = np.empty(n, np.float64)
    order = np.empty(n, np.int64)
    cum = np.empty(n + 1, np.float64)
    while k > 0:
        ws = INF_ROW
        for i in range(n):
            if pos[i] < ends[i] and docs[pos[i]] < ws:
                ws = docs[pos[i]]
        if ws == INF_ROW:
            break
        we = ws + window
        total = 0.0
        for i in range(n):  # the window bound of each term: its blocks that overlap the window
            m = 0.0
            if pos[i] < ends[i] and docs[pos[i]] < we:
                bi = (pos[i] - starts[i]) // block
                while True:
                    first = starts[i] + bi * block
                    if first >= ends[i] or docs[first] >= we:
                        break
                    if block_max[bstarts[i] + bi] > m:
                        m = block_max[bstarts[i] + bi]
                    bi += 1
            bound[i] = m * weights[i]
            total += bound[i]
        if _pruned(total, size, k, theta, floor):  # nothing in the window can enter the top k
            for i in range(n):
                pos[i] = _next_geq(docs, pos[i], ends[i], we)
            continue
        for i in range(n):  # terms by window bound, ascending (insertion sort: queries have few terms)
            x = i
            j = i - 1
            order[i] = x
            while j >= 0 and bound[order[j]] > bound[x]:
                order[j + 1] = order[j]
                j -= 1
            order[j + 1] = x
        cum[0] = 0.0
        for i in range(n):
            cum[i + 1] = cum[i] + bound[order[i]]
        ne = 0
        while ne < n and _pruned(cum[ne + 1], size, k, theta, floor):
            ne += 1
        for jj in range(ne, n):  # essential terms: their postings in the window, added up
            i = order[jj]
            p = pos[i]
            e = ends[i]
            w = weights[i]
            while p < e:
                d = docs[p]
                if d >= we:
                    break
                if d < ws:  # rows not ascending within the term: a damaged index (never write outside acc)
                    return -1
                o = d - ws
                reached[o >> 6] |= np.uint64(1) << np.uint64(o & 63)
                acc[o] += w * impacts[p]
                p += 1
            pos[i] = p
        for word in range(len(reached)):  # each row reached, in row order
            bits = reached[word]
            if bits == 0:
                continue
            reached[word] = np.uint64(0)
            while bits != 0:
                low = bits & (~bits + np.uint64(1))
                bits ^= low
                o = word * 64 + _DEBRUIJN[(low * _DEBRUIJN_MUL) >> np.uint64(58)]
                s = acc[o]
                acc[o] = 0.0
                d = ws + o
                if _pruned(s + cum[ne], size, k, theta, floor):
                    continue
                jj = ne - 1
                while jj >= 0:  # completed from the non-essential terms while it can still win
                    if _pruned(s + cum[jj + 1], size, k, theta, floor):
                        break
                    i = order[jj]
                    p = _next_geq(docs, pos[i], ends[i], d)
                    pos[i] = p
                    if p < ends[i] and docs[p] == d:
                        s += weights[i] * impacts[p]
                    jj -= 1
                if s <= 0.0 or _pruned(s, size, k, theta, floor):
                    continue
                if size < k:
                    size += 1
                    _heap_push(hs, hd, size, s, d)
                    if size == k:
                        theta = hs[0]
                else:  # s > theta; rows come in ascending order: an equal score loses to the earlier (lower) row
                    _heap_replace_top(hs, hd, k, s, d)
                    theta = hs[0]
        for jj in range(ne):  # non-essential cursors: past the window
            i = order[jj]
            pos[i] = _next_geq(docs, pos[i], ends[i], we)
    for j in range(size - 1, -1, -1):  # drain the heap: worst first into the back
        out_scores[j] = hs[0]
        out_rows[j] = hd[0]
        if j > 0:
            _heap_replace_top(hs, hd, j, hs[j], hd[j])
    return size


@njit(cache=True, nogil=True)
def top_k_batch(docs, impacts, block_max, block, qptr, starts, ends, bstarts, weights, k, window, out_rows,
                out_scores, out_counts):
    """:func:`top_k` for queries ``q`` whose terms are ``[qptr[q], qptr[q + 1])`` of the flat term arrays."""
    for q in range(len(qptr) - 1):
        a = qptr[q]
        b = qptr[q + 1]
        out_counts[q] = top_k(docs, impacts, block_max, block, starts[a:b], ends[a:b], bstarts[a:b], weights[a:b],
                              k, window, out_rows[q], out_scores[q])


@njit(cache=True, nogil=True)
def block_maxima(indptr, impacts, block):
    """``(bptr, block_max)``: term ``t``'s blocks are ``block_max[bptr[t]:bptr[t+1]]``, each the largest impact of
    ``block`` consecutive postings of ``t``."""
    nterms = len(indptr) - 1
    bptr = np.zeros(nterms + 1, np.int64)
    for t in range(nterms):
        bptr[t + 1] = bptr[t] + (indptr[t + 1] - indptr[t] + block - 1) // block
    out = np.zeros(bptr[nterms], np.float32)
    for t in range(nterms):
        b = bptr[t]
        p = indptr[t]
        while p < indptr[t + 1]:
            q = min(p + block, indptr[t + 1])
            m = np.float32(0.0)
            for j in range(p, q):
                if impacts[j] > m:
                    m = impacts[j]
            out[b] = m
            b += 1
            p = q
    return bptr, out
