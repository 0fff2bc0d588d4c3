"""Adaptive (per-query) fusion and the maximin rule: constructed runs where one list is useless, the fusion must
follow the other; a default chosen by maximin never loses on any set where the best-mean setting does."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.evaluation.metrics import evaluate
from hopscotch.retriever.searchers.adapter.build import fusion_from_args
from hopscotch.retriever.searchers.adaptive_fusion import adaptive_weight, agreement, standout
from hopscotch.retriever.searchers.fusion import FusionSettings, read_fusion_config
from hopscotch.retriever.searchers.fusion_tuning import (
    fuse_runs,
    fusion_grid,
    judged_qids,
    maximin,
    split_qids,
    tune_fusion,
)
from hopscotch.retriever.searchers.hybrid import HybridSearcher


def _peaked(ids, scale):
    """A list that is sure of its top document: an outlier (about 4 standard deviations above the list's
    mean), then a steady decline."""
    return [(d, scale * (1.5 if i == 0 else 1.0 - 0.02 * i)) for i, d in enumerate(ids)]


def _flat(rng, ids, lo, hi):
    """A useless list: the documents in random order with scores spread evenly, none standing out."""
    order = list(rng.permutation(ids))
    scores = np.sort(rng.uniform(lo, hi, len(ids)))[::-1]
    return [(d, float(s)) for d, s in zip(order, scores)]


def _one_useless_list(queries=60, docs=30, seed=0):
    """Runs where on even queries BM25 is right and dense is noise, on odd queries the reverse; the relevant
    document is the useful list's top one."""
    rng = np.random.default_rng(seed)
    sparse, dense, qrels = {}, {}, {}
    for q in range(queries):
        ids = [f"q{q}d{i}" for i in range(docs)]
        good = list(rng.permutation(ids))
        qid = f"q{q}"
        if q % 2 == 0:
            sparse[qid], dense[qid] = dict(_peaked(good, 7.0)), dict(_flat(rng, ids, 0.50, 0.60))
        else:
            sparse[qid], dense[qid] = dict(_flat(rng, ids, 5.0, 6.0)), dict(_peaked(good, 0.3))
        qrels[qid] = {good[0]: 1}
    return sparse, dense, qrels


def test_standout_and_agreement():
    assert standout([3.0, 1.0, 1.0, 1.0]) == pytest.approx((3 - 1.5) / np.std([3, 1, 1, 1]))
    assert standout([1.0, 1.0]) == 0.0 and standout([5.0]) == 0.0 and standout([]) == 0.0
    a, b = [("x", 1), ("y", 0.5)], [("y", 9), ("z", 1)]
    assert agreement(a, b, k=2) == 0.5 and agreement(a, [], k=2) == 0.0 and agreement(a, a, k=10) == 1.0


def test_adaptive_weight_follows_the_list_that_stands_out():
    rng = np.random.default_rng(1)
    ids = [f"d{i}" for i in range(30)]
    bm25_sure, dense_noise = _peaked(ids, 7.0), _flat(rng, ids, 0.5, 0.6)
    assert adaptive_weight(bm25_sure, dense_noise, 0.3, adapt=2.0) > 0.8
    bm25_noise, dense_sure = _flat(rng, ids, 5.0, 6.0), _peaked(ids[::-1], 0.3)
    assert adaptive_weight(bm25_noise, dense_sure, 0.3, adapt=2.0) < 0.05
    assert adaptive_weight(bm25_sure, dense_noise, 0.3, adapt=0.0) == 0.3       # adapt 0: the fixed weight
    assert adaptive_weight(bm25_sure, [], 0.3, adapt=1.0) == 1.0                # an empty list is not followed
    assert adaptive_weight([], dense_sure, 0.3, adapt=1.0) == 0.0
    # lists that agree on their top documents keep the base weight whatever their standouts
    assert adaptive_weight(bm25_sure, _peaked(ids, 0.3)[:1] + dense_noise[1:], 0.3, adapt=2.0,
                           agreement_k=1) == pytest.approx(0.3)


def test_adaptive_fusion_follows_the_useful_list_where_no_fixed_weight_can():
    sparse, dense, qrels = _one_useless_list()
    qids = sorted(qrels)
    ndcg = {}
    for settings in fusion_grid(adapts=(2.0,), shifts=(0.0,), rrf_ks=(60.0,)):
        run = fuse_runs(sparse, dense, settings, qids, k=10)
        ndcg[settings] = evaluate(run, qrels, ["ndcg@10"]).mean["ndcg@10"]
    adaptive = FusionSettings.adaptive(0.3, 2.0, 0.0)
    assert ndcg[adaptive] == pytest.approx(1.0)                                  # every query: the useful list's top first
    assert max(v for s, v in ndcg.items() if s.method != "adaptive") < 0.95
    fused = fuse_runs(sparse, dense, adaptive, qids, k=1)
    assert all(next(iter(fused[q])) in qrels[q] for q in qids)


def test_tune_fusion_learns_the_adaptive_setting():
    sparse, dense, qrels = _one_useless_list(queries=80, seed=3)
    dev, test = split_qids(judged_qids(qrels), 0.5, seed=1)
    result = tune_fusion(sparse, dense, qrels, dev, test, fusion_grid(adapts=(0.5, 2.0), shifts=(0.0,)))
    assert result.chosen.method == "adaptive" and result.guard is None
    assert result.test[result.chosen_label].mean["ndcg@10"] == pytest.approx(1.0)
    assert read_fusion_config_roundtrip(result.chosen) == result.chosen


def read_fusion_config_roundtrip(settings, tmp=None):
    import json
    import tempfile
    from pathlib import Path

    path = Path(tempfile.mkdtemp()) / "tuned.json"
    path.write_text(json.dumps(settings.to_json()))
    return read_fusion_config(path)


def test_maximin_prefers_the_setting_that_never_loses():
    deltas = {"best mean": {"a": 0.10, "b": 0.08, "c": -0.03},    # mean +0.050, loses on c
              "never loses": {"a": 0.04, "b": 0.03, "c": 0.00},   # mean +0.023
              "worse": {"a": 0.01, "b": -0.01, "c": 0.00}}
    assert maximin(deltas) == ("never loses", 0.0)
    assert maximin({"x": {"a": 0.0}, "y": {"a": 0.0}})[0] == "x"                  # ties: first given
    assert maximin({"x": {"a": 0.0, "b": 0.0}, "y": {"a": 0.0, "b": 0.2}})[0] == "y"   # ties: larger mean
    with pytest.raises(UsageError):
        maximin({})
    with pytest.raises(UsageError):
        maximin({"x": {"a": 0.1}, "y": {"a": 0.1, "b": 0.2}})


def test_fuse_dispatches_adaptive_to_the_default_adaptive_settings():
    from dataclasses import replace

    from hopscotch.retriever.searchers.fusion import DEFAULT_ADAPTIVE, fuse

    sparse, dense, _ = _one_useless_list(queries=2)
    s, d = sorted(sparse["q0"].items(), key=lambda kv: -kv[1]), sorted(dense["q0"].items(), key=lambda kv: -kv[1])
    want = replace(DEFAULT_ADAPTIVE, alpha=0.5, weight_on_dense=False).apply(s, d, k=5)
    assert fuse("adaptive", s, d, k=5, alpha=0.5) == want and DEFAULT_ADAPTIVE.adapt > 0


def test_adaptive_settings_json_cli_and_bad_values():
    s = FusionSettings.adaptive(0.4, 1.5, 0.5)
    assert s.method == "adaptive" and s.sparse_weight == pytest.approx(0.4) and s.normalization == "zscore"
    assert FusionSettings.from_json(s.to_json()) == s and "adaptive zscore w=0.40 a=1.5 s=0.5" == s.describe()
    for bad in ({"adapt": -1.0}, {"adapt": float("nan")}, {"shift": float("inf")}, {"agreement_k": 0}):
        with pytest.raises(UsageError):
            FusionSettings("adaptive", **bad)

    def settings(*argv):
        p = argparse.ArgumentParser()
        HybridSearcher.parse_args(p)
        return fusion_from_args(p.parse_args(list(argv)))

    got = settings("--fusion", "adaptive", "--adapt", "2", "--adapt-shift", "1")
    assert got.method == "adaptive" and got.adapt == 2.0 and got.shift == 1.0
    assert settings("--adapt", "0.5").method == "adaptive"                          # the flag implies the method
    for argv in (("--fusion", "interp", "--adapt", "1"), ("--fusion", "rrf", "--alpha", "0.5"),
                 ("--fusion", "interp", "--rrf-k", "5")):
        with pytest.raises(UsageError):
            settings(*argv)
