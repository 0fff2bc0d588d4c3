"""The reranker's first-stage weight (:mod:`hopscotch_experiments.ablations.rerank_weight`): the rule on tune (the
best mean, ties to the smaller W, no tune cell significantly below the first stage), the paired tests, the docs
section and its JSON."""

from __future__ import annotations

import json

from hopscotch_experiments.ablations import rerank_weight as rw

from .test_trajectory_use import SETS, _result


def _measured(per_w: dict, bm25: int = 24):
    """The first stage puts ``bm25`` of 40 queries' documents first; weight w puts ``per_w[w]``."""
    cells = {}
    for name in SETS:
        cells[name, "bm25"] = {"tune": _result(bm25), "test": _result(bm25)}
        for w, hits in per_w.items():
            cells[name, w] = {"tune": _result(hits), "test": _result(hits)}
    return {"cells": cells, "sets": {n: {"tune": 40, "test": 40} for n in SETS}, "weights": list(per_w)}


def test_the_best_tune_mean_is_chosen_and_ties_go_to_the_smaller_weight():
    summary = rw.summarize(_measured({0.0: 20, 0.25: 30, 0.5: 30, 0.75: 26}))
    assert summary["chosen"] == 0.25 and summary["chosen_below_bm25"] == []
    cell = summary["table"]["tune", 0.25, "hotpotqa"]
    assert cell["p_bm25"] < 0.05 and cell["p_w0"] < 0.05
    assert "p_w0" not in summary["table"]["tune", 0.0, "hotpotqa"]


def test_a_weight_significantly_below_the_first_stage_is_passed_over():
    measured = _measured({0.0: 18, 0.5: 40, 0.75: 20})
    measured["cells"]["hotpotqa", 0.5]["tune"] = _result(4)  # the best mean (40 and 4 of 40) but one set far below
    summary = rw.summarize(measured)
    assert summary["tune_mean"][0.5] > summary["tune_mean"][0.75] and summary["chosen"] == 0.75


def test_render_and_json():
    summary = rw.summarize(_measured({0.0: 20, 0.5: 30}))
    text = rw.render(summary, "python scripts/agent_rerank_weight.py --model M")
    assert "Chosen: **W = 0.5**" in text and "`--reasoning --rerank-first-weight 0.5` (chosen)" in text
    assert "| reasoning-aware BM25, top 100 (the first stage) |" in text
    data = json.loads(json.dumps(rw.to_json(summary)))
    assert data["tune_mean"]["0.5"] == summary["tune_mean"][0.5] and "tune|bm25|hotpotqa" in data["table"]


def test_a_cross_encoders_selection_is_named_so_and_has_its_own_section():
    measured = _measured({0.0: 20, 0.25: 30})
    measured["kind"] = "cross_encoder"
    summary = rw.summarize(measured)
    text = rw.render(summary, "python scripts/agent_rerank_weight.py --model M --label ce")
    assert "| cross-encoder rerank, `--reasoning --rerank-first-weight 0.25` (chosen) |" in text
    assert "the pure cross-encoder reorder (W = 0)" in text and "MaxSim" not in text
    assert rw.markers("cross_encoder") == (rw.CE_START, rw.CE_END) and rw.markers("multi_vector") == (rw.START, rw.END)
