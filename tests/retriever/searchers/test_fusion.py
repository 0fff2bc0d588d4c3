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


def test_zscore_interpolation_standardises_each_list():
    fused = dict(interpolate(BM25, DENSE, alpha=0.5, normalization="zscore"))

    def z(x, xs):
        mean = sum(xs) / len(xs)
        sd = (sum((v - mean) ** 2 for v in xs) / len(xs)) ** 0.5
        return (x - mean) / sd

    s, d = [12.0, 9.0, 4.0], [0.9, 0.8, 0.5]
    assert fused["d1"] == pytest.approx(0.5 * z(12, s) + z(0.5, d))
    assert fused["d2"] == pytest.approx(0.5 * z(9, s) + z(0.5, d))     # missing from dense: its minimum
    assert fused["d4"] == pytest.approx(0.5 * z(4, s) + z(0.8, d))     # missing from BM25: its minimum
    # lists whose scores are all equal (or a single hit) standardise to 0, as min-max does
    assert interpolate([("a", 2.0)], [("a", 0.5), ("b", 0.5)], normalization="zscore") == [("a", 0.0), ("b", 0.0)]
    with pytest.raises(UsageError, match="unknown score normalisation 'l2'"):
        interpolate(BM25, DENSE, normalization="l2")


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


def test_weighted_rrf_with_equal_weights_is_plain_rrf():
    plain = reciprocal_rank_fusion([BM25, DENSE], rrf_k=60)
    assert reciprocal_rank_fusion([BM25, DENSE], rrf_k=60, weights=(1.0, 1.0)) == plain   # exact
    doubled = reciprocal_rank_fusion([BM25, DENSE], rrf_k=60, weights=(2.0, 2.0))
    assert [d for d, _ in doubled] == [d for d, _ in plain]
    assert [s for _, s in doubled] == pytest.approx([2 * s for _, s in plain])
    assert fuse("rrf", BM25, DENSE, k=4, weights=(1, 1)) == reciprocal_rank_fusion([BM25, DENSE], k=4)


def test_weighted_rrf_weights_each_list():
    fused = dict(reciprocal_rank_fusion([BM25, DENSE], rrf_k=60, weights=(2.0, 0.5)))
    assert fused["d1"] == pytest.approx(2 / 61 + 0.5 / 63)
    assert fused["d4"] == pytest.approx(0.5 / 62)
    with pytest.raises(UsageError, match="2 weights for 1"):
        reciprocal_rank_fusion([BM25], weights=(1.0, 1.0))


def test_fusion_settings_apply_and_json():
    from hopscotch.retriever.searchers.fusion import FusionSettings

    assert FusionSettings("rrf").apply(BM25, DENSE, k=3) == reciprocal_rank_fusion([BM25, DENSE], k=3)
    # normalised scores (a missing document takes the list minimum): bm25 range 4..12, dense 0.5..0.9
    sparse = {"d1": 0.5, "d2": 0.125, "d3": -0.5, "d4": -0.5}
    dense = {"d1": -0.5, "d2": -0.5, "d3": 0.5, "d4": 0.25}
    for w in (0.0, 0.3, 0.5, 0.8, 1.0):
        s = FusionSettings.convex(w)
        assert s.sparse_weight == pytest.approx(w) and FusionSettings.from_json(s.to_json()) == s
        assert FusionSettings.from_json({"method": "interp", "sparse_weight": w}) == s
        # Pyserini's alpha scales w * bm25 + (1 - w) * dense by a positive constant: the same ranking
        fused = dict(s.apply(BM25, DENSE))
        scale = 1 / (1 - w) if w <= 0.5 else 1 / w
        assert fused == pytest.approx({d: scale * (w * sparse[d] + (1 - w) * dense[d]) for d in fused})
    assert FusionSettings.convex(0.2).apply(BM25, DENSE) == interpolate(BM25, DENSE, alpha=0.25)
    z = FusionSettings.convex(0.4, "zscore")
    assert z.apply(BM25, DENSE) == interpolate(BM25, DENSE, alpha=0.4 / 0.6, normalization="zscore")
    assert FusionSettings.from_json(z.to_json()) == z and z.to_json()["normalization"] == "zscore"
    assert FusionSettings.from_json({"method": "interp", "sparse_weight": 0.4, "normalization": "zscore"}) == z
    # files written before z-scores say "normalization": true, which meant Pyserini's min-max
    assert FusionSettings.from_json({"method": "interp", "alpha": 1.0, "normalization": True}) == FusionSettings("interp")
    for bad in ("l2", 3):
        with pytest.raises(UsageError, match="unknown score normalisation"):
            FusionSettings.from_json({"method": "interp", "alpha": 1.0, "normalization": bad})
    with pytest.raises(UsageError, match="must be non-negative"):
        FusionSettings("rrf", rrf_k=-1)


def test_cli_fusion_defaults_are_the_learnt_ones():
    import argparse

    from hopscotch.retriever.errors import UsageError
    from hopscotch.retriever.searchers.adapter.build import fusion_from_args
    from hopscotch.retriever.searchers.fusion import DEFAULT_ADAPTIVE, DEFAULT_INTERP, DEFAULT_RRF, FusionSettings
    from hopscotch.retriever.searchers.hybrid import HybridSearcher

    parser = argparse.ArgumentParser()
    HybridSearcher.parse_args(parser)

    def settings(*argv):
        return fusion_from_args(parser.parse_args(list(argv)))

    # no fusion flag: the maximin default over reasoning-aware BM25 + dense (issue 33), min-max interpolation at
    # BM25 weight 0.3; --fusion adaptive keeps its own defaults
    assert settings() == DEFAULT_INTERP == FusionSettings.convex(0.3)
    assert settings("--fusion", "adaptive") == DEFAULT_ADAPTIVE == FusionSettings.adaptive(0.2, 1.0, 1.0)
    assert DEFAULT_INTERP.sparse_weight == pytest.approx(0.3)
    assert settings("--fusion", "interp") == DEFAULT_INTERP and DEFAULT_INTERP.normalization == "minmax"
    assert settings("--fusion", "interp", "--alpha", "1") == FusionSettings("interp", alpha=1.0)  # Pyserini's
    assert settings("--alpha", "1", "--normalization", "zscore") == FusionSettings("interp", alpha=1.0, normalization="zscore")
    assert settings("--normalization", "zscore") == FusionSettings.convex(0.3, "zscore")
    with pytest.raises(UsageError, match="--normalization minmax applies to --fusion interp only"):
        settings("--fusion", "rrf", "--normalization", "minmax")
    assert settings("--fusion", "rrf") == DEFAULT_RRF == FusionSettings("rrf", rrf_k=5.0, weights=(0.5, 1.0))
    assert settings("--rrf-k", "60") == FusionSettings("rrf", rrf_k=60.0, weights=(0.5, 1.0))  # rrf flags pick rrf
    assert settings("--fusion", "rrf", "--rrf-weights", "1,1") == FusionSettings("rrf", rrf_k=5.0)  # plain RRF
    assert settings("--rrf-weights", "1,0.25").weights == (1.0, 0.25)
    for bad in ("1", "a,b", "-1,1", "0,0", "nan,1"):
        with pytest.raises(UsageError, match="--rrf-weights"):
            settings(f"--rrf-weights={bad}")
