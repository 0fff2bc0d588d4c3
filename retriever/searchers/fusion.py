"""Fusing ranked lists with Pyserini's semantics: reciprocal rank fusion and score interpolation.

* :func:`reciprocal_rank_fusion` follows ``pyserini.fusion.reciprocal_rank_fusion``: each list is cut to
  ``depth``, a document scores ``sum(1 / (rrf_k + rank))`` over the lists it appears in (ranks from 1),
  and the fused list is ordered by (score desc, docid asc) and cut to ``k``.
* :func:`interpolate` follows ``pyserini.search.hybrid.HybridSearcher``: a document missing from one list
  takes that list's minimum score; with ``normalization`` each list's scores are centred on the midpoint
  of their range and divided by the range; the fused score is ``alpha * sparse + dense`` (or
  ``sparse + alpha * dense`` with ``weight_on_dense``).

A ranked list is a sequence of ``(docid, score)`` pairs, best first.

Example::

    fused = reciprocal_rank_fusion([bm25_hits, dense_hits], rrf_k=60, k=100)
    fused = interpolate(bm25_hits, dense_hits, alpha=1.0, k=100)     # [(docid, score), ...]
"""

from __future__ import annotations

from collections.abc import Sequence

from hopscotch.retriever.errors import UsageError

Hits = Sequence[tuple[str, float]]
FUSION_METHODS = ("rrf", "interp")


def _ordered(scores: dict[str, float], k: int | None) -> list[tuple[str, float]]:
    out = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
    return out if k is None else out[:k]


def reciprocal_rank_fusion(runs: Sequence[Hits], rrf_k: float = 60, depth: int | None = None,
                           k: int | None = None) -> list[tuple[str, float]]:
    """RRF over any number of ranked lists (Cormack et al., 2009; Pyserini's implementation)."""
    if rrf_k < 0:
        raise UsageError(f"--rrf-k must be non-negative, got {rrf_k}")
    fused: dict[str, float] = {}
    for hits in runs:
        for rank, (docid, _) in enumerate(list(hits)[:depth], start=1):
            fused[docid] = fused.get(docid, 0.0) + 1.0 / (rrf_k + rank)
    return _ordered(fused, k)


def _normalise(score: float, lo: float, hi: float) -> float:
    span = hi - lo
    return (score - (lo + hi) / 2) / span if span > 0 else 0.0


def interpolate(sparse: Hits, dense: Hits, alpha: float = 1.0, k: int | None = None, normalization: bool = True,
                weight_on_dense: bool = False, depth: int | None = None) -> list[tuple[str, float]]:
    """Pyserini's hybrid interpolation of a sparse (BM25) and a dense list."""
    sparse_hits = dict(list(sparse)[:depth])
    dense_hits = dict(list(dense)[:depth])
    lo_s, hi_s = (min(sparse_hits.values()), max(sparse_hits.values())) if sparse_hits else (0.0, 1.0)
    lo_d, hi_d = (min(dense_hits.values()), max(dense_hits.values())) if dense_hits else (0.0, 1.0)
    fused: dict[str, float] = {}
    for docid in set(sparse_hits) | set(dense_hits):
        s = sparse_hits.get(docid, lo_s)
        d = dense_hits.get(docid, lo_d)
        if normalization:
            s, d = _normalise(s, lo_s, hi_s), _normalise(d, lo_d, hi_d)
        fused[docid] = s + alpha * d if weight_on_dense else alpha * s + d
    return _ordered(fused, k)


def fuse(method: str, sparse: Hits, dense: Hits, k: int, alpha: float = 1.0, rrf_k: float = 60,
         depth: int | None = None) -> list[tuple[str, float]]:
    """Dispatch on ``method`` (``rrf`` or ``interp``) for one query's BM25 and dense lists."""
    if method == "rrf":
        return reciprocal_rank_fusion([sparse, dense], rrf_k=rrf_k, depth=depth, k=k)
    if method == "interp":
        return interpolate(sparse, dense, alpha=alpha, k=k, depth=depth)
    raise UsageError(f"unknown fusion {method!r}: use one of {', '.join(FUSION_METHODS)}")
