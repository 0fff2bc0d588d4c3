"""Ours against the multi-vector peer (:mod:`hopscotch_experiments.ablations.mv_peer_rows`): the paired tests, the
verdict on tune (mean at the default weight, no tune cell significantly below), the docs section and its JSON."""

from __future__ import annotations

import json
import math

import pytest

from hopscotch_experiments.ablations import mv_peer_rows as mp

from .test_trajectory_use import SETS, _result

DEFAULT = 0.25


def _ndcg(hits: int) -> float:
    """nDCG@10 of :func:`_result`: ``hits`` queries with their document first, the rest second (1 / log2(3))."""
    return (hits + (40 - hits) / math.log2(3)) / 40


def _measured(ours: int, peer: int = 24, bm25: int = 20, ours_w0: int | None = None):
    """Of 40 queries, the first stage puts ``bm25`` relevant documents first, the peer ``peer``, ours ``ours``
    (``ours_w0`` at W = 0, default ``ours``), on every set, row and split."""
    cells = {}
    for name in SETS:
        for kind in mp.KINDS:
            cells[name, "bm25", kind, None] = {"tune": _result(bm25), "test": _result(bm25)}
            for w in (0.0, DEFAULT):
                hits = ours if w or ours_w0 is None else ours_w0
                cells[name, mp.OURS, kind, w] = {"tune": _result(hits), "test": _result(hits)}
                cells[name, mp.PEER, kind, w] = {"tune": _result(peer), "test": _result(peer)}
    return {"cells": cells, "sets": {n: {"tune": 40, "test": 40} for n in SETS}, "weights": [0.0, DEFAULT],
            "default": DEFAULT}


def test_ours_holds_when_its_default_mean_is_at_least_the_peers_and_no_cell_is_significantly_below():
    summary = mp.summarize(_measured(ours=30))
    assert summary["holds"] and summary["significantly_below"] == {"tune": [], "test": []}
    assert summary["tune_mean"] == {mp.OURS: pytest.approx(_ndcg(30)), mp.PEER: pytest.approx(_ndcg(24))}
    assert summary["table"]["tune", mp.OURS, "query", DEFAULT, "hotpotqa"]["p"] < 0.05
    assert "p" not in summary["table"]["tune", mp.PEER, "query", DEFAULT, "hotpotqa"]


def test_a_significantly_worse_pure_maxsim_cell_fails_the_verdict():
    summary = mp.summarize(_measured(ours=30, ours_w0=8))
    assert summary["tune_mean"][mp.OURS] > summary["tune_mean"][mp.PEER] and not summary["holds"]
    assert "hotpotqa query W=0" in summary["significantly_below"]["tune"]


def test_render_and_json():
    summary = mp.summarize(_measured(ours=10))
    text = mp.render(summary, "python scripts/agent_mv_peer_rows.py")
    assert "Verdict on tune: **the peer wins**" in text
    assert "| BM25 top 100 (the first stage) | query only |" in text
    assert "`--reasoning`, W=0.25 (default)" in text and "query only, W=0 (MaxSim alone)" in text
    data = json.loads(json.dumps(mp.to_json(summary)))
    assert data["table"]["tune|bm25|query||hotpotqa"]["mean"] == pytest.approx(_ndcg(20))
    assert "tune|mv|reasoning|0.25|hotpotqa" in data["table"]


def test_run_names_match_the_rerank_weight_cache():
    assert mp.run_name("hotpotqa", "bm25", "reasoning") == "hotpotqa.bm25.reasoning.trec"
    assert mp.run_name("hotpotqa", "mv", "reasoning", 0.25) == "hotpotqa.mv.bm25rr.reasoning.w0.25.trec"


def test_another_model_of_ours_is_filed_as_ours_under_its_own_cache_label():
    measured = _measured(ours=30)
    measured["cells"] = {(n, "mvR" if s == mp.OURS else s, k, w): v for (n, s, k, w), v in measured["cells"].items()}
    relabelled = mp.as_ours(measured, "mvR")
    assert relabelled["cells"] == _measured(ours=30)["cells"] and relabelled["weights"] == measured["weights"]
    assert mp.summarize(relabelled)["holds"]
