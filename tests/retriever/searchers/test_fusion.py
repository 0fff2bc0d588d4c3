"""Fusion follows Pyserini: RRF (sum of 1/(k + rank), ties by docid) and HybridSearcher interpolation."""

from __future__ import annotations

import pytest

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.searchers.fusion import fuse, interpolate, reciprocal_rank_fusion

BM25 = [("d1", 12.0), ("d2", 9.0), ("d3", 4.0)]
DENSE = [("d3", 0.9), ("d4", 0.8), ("d1", 0.5)]


def test_rrf_scores_are_sums_of_reciprocal_ranks():
    fused = dict(reciprocal_rank_fusion([BM25, DENSE], rrf_k=60))
    assert fused["d1"] == pytest.approx(1 / 61 + 1 / 63)
    assert fused["d3"] == pytest.approx(1 / 63 + 1 / 61)
    assert fused["d2"] == pytest.approx(1 / 62)
    assert fused["d4"] == pytest.approx(1 / 62)


def test_rrf_orders_ties_by_docid_and_cuts_to_k():
    fused = reciprocal_rank_fusion([BM25, DENSE], rrf_k=60, k=3)
    # d1 and d3 tie (1/61 + 1/63), then d2 and d4 tie (1/62): Pyserini breaks ties by docid
    assert [d for d, _ in fused] == ["d1", "d3", "d2"]


def test_rrf_depth_limits_each_list():
    fused = dict(reciprocal_rank_fusion([BM25, DENSE], rrf_k=0, depth=1))
    assert fused == {"d1": 1.0, "d3": 1.0}


def test_rrf_rejects_negative_k():
    with pytest.raises(UsageError):
        reciprocal_rank_fusion([BM25], rrf_k=-1)


def test_interpolation_missing_document_takes_the_list_minimum():
    fused = dict(interpolate(BM25, DENSE, alpha=1.0, normalization=False))
    assert fused["d2"] == pytest.approx(9.0 + 0.5)    # missing from dense: dense minimum 0.5
    assert fused["d4"] == pytest.approx(4.0 + 0.8)    # missing from BM25: BM25 minimum 4.0
    assert fused["d1"] == pytest.approx(12.0 + 0.5)


def test_interpolation_normalises_like_pyserini():
    fused = dict(interpolate(BM25, DENSE, alpha=0.5, normalization=True))

    def norm(x, lo, hi):
        return (x - (lo + hi) / 2) / (hi - lo)

    assert fused["d1"] == pytest.approx(0.5 * norm(12, 4, 12) + norm(0.5, 0.5, 0.9))
    assert fused["d3"] == pytest.approx(0.5 * norm(4, 4, 12) + norm(0.9, 0.5, 0.9))
    assert fused["d4"] == pytest.approx(0.5 * norm(4, 4, 12) + norm(0.8, 0.5, 0.9))


def test_interpolation_weight_on_dense():
    fused = dict(interpolate(BM25, DENSE, alpha=2.0, normalization=False, weight_on_dense=True))
    assert fused["d3"] == pytest.approx(4.0 + 2.0 * 0.9)


def test_interpolation_handles_empty_and_single_lists():
    assert interpolate([], [], k=5) == []
    fused = interpolate([("a", 3.0)], [], alpha=1.0, normalization=True)
    # one BM25 hit: zero range normalises to 0 (no division by zero); the empty dense list takes
    # Pyserini's defaults min 0 / max 1, so the missing dense score is (0 - 0.5) / 1
    assert fused == [("a", pytest.approx(-0.5))]


def test_fuse_dispatch_and_unknown_method():
    assert fuse("rrf", BM25, DENSE, k=2) == reciprocal_rank_fusion([BM25, DENSE], k=2)
    assert fuse("interp", BM25, DENSE, k=2, alpha=0.3) == interpolate(BM25, DENSE, alpha=0.3, k=2)
    with pytest.raises(UsageError, match="unknown fusion"):
        fuse("max", BM25, DENSE, k=2)
