"""Recall@k of an approximate nearest-neighbour search against the exact one: one definition for the
ANN-fidelity audit (:mod:`hopscotch.retriever.audit.ann_fidelity`), ``scripts/bench_index.py`` and the GPU
check's FAISS section.

    recall@k of a query = |ANN top-k  ∩  true top-k| / |true top-k|

* ``-1`` (FAISS's padding when it finds fewer than ``k``) is never a hit, in either list;
* the denominator is the number of true neighbours (the true top-k less its ``-1`` padding), so a query
  whose exact search found only 3 neighbours has recall 1 when the ANN returns those 3;
* an id repeated in the ANN list counts once;
* with scores (``ann_scores``: the *exact* score of each ANN row; ``truth_scores``: the exact top-k's),
  a hit is instead a real ANN row whose exact score reaches the true k-th score less ``tie_eps``: ties
  at the cut count as hits, so an exact index scores 1 whatever order it breaks ties in (hits are
  capped at the denominator);
* a query with no true neighbour has no recall (``nan``); :func:`recall_at` averages over the others.
"""

from __future__ import annotations

import numpy as np

#: a score within this of the true k-th score is a tie at the cut (float32 inner products computed two ways)
TIE_EPS = 1e-5


def recall_per_query(ann_rows, truth_rows, k: int | None = None, *, ann_scores=None, truth_scores=None,
                     tie_eps: float = TIE_EPS) -> np.ndarray:
    """Per-query recall@k (module doc) of ``ann_rows`` ``[n, >= k]`` against ``truth_rows`` ``[n, >= k]``
    (ids or global rows, ``-1`` padded); ``k`` defaults to the width of ``truth_rows``. Give both
    ``ann_scores`` and ``truth_scores`` (same shapes as the rows) for the tie-aware rule."""
    ann = np.asarray(ann_rows)
    truth = np.asarray(truth_rows)
    if ann.ndim != 2 or truth.ndim != 2 or len(ann) != len(truth):
        raise ValueError(f"expected two [n, k] arrays with the same n, got {ann.shape} and {truth.shape}")
    if (ann_scores is None) != (truth_scores is None):
        raise ValueError("give both ann_scores and truth_scores, or neither")
    k = truth.shape[1] if k is None else int(k)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    ann, truth = ann[:, :k], truth[:, :k]
    real_truth = truth >= 0
    if truth_scores is not None:
        truth_scores = np.asarray(truth_scores)[:, :k]
        real_truth &= np.isfinite(truth_scores)
    found = real_truth.sum(1)
    if truth_scores is None:
        hits = np.array([len(np.intersect1d(a[a >= 0], t[ok])) for a, t, ok in zip(ann, truth, real_truth)],
                        dtype=np.int64)
    else:
        kth = truth_scores[:, k - 1:k] if truth_scores.shape[1] == k else np.full((len(truth), 1), -np.inf)
        real_ann = ann >= 0
        scores = np.where(real_ann, np.asarray(ann_scores)[:, :k], -np.inf)
        hits = (real_ann & (scores >= kth - tie_eps)).sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(found > 0, np.minimum(hits, found) / np.maximum(found, 1), np.nan)


def recall_at(ann_rows, truth_rows, k: int | None = None) -> float:
    """Mean recall@k over the queries that have a true neighbour (``nan`` when none has)."""
    values = recall_per_query(ann_rows, truth_rows, k)
    values = values[~np.isnan(values)]
    return float(values.mean()) if len(values) else float("nan")
