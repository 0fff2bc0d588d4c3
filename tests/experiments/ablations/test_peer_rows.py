"""Our recipe against the sentence-transformers peer on the same tuples
(:mod:`hopscotch_experiments.ablations.peer_rows`): the paired test of ours against the peer's same row, the verdict
on tune only, the docs section, its JSON, and the systems it measures."""

from __future__ import annotations

import json
import math

import pytest

from hopscotch_experiments.ablations import peer_rows as pr
from hopscotch_experiments.ablations import trajectory_use as tu

from .test_trajectory_use import SETS, _result


#: nDCG@10 gained by 6 of 40 queries moving their one relevant document from rank 2 to rank 1
GAIN = 6 / 40 * (1 - 1 / math.log2(3))


def _measured(ours_tune: int, ours_test: int = 30, peer: int = 24):
    cells = {}
    for name in SETS:
        cells[name, "base", "query"] = {"tune": _result(20), "test": _result(20)}
        for kind in tu.KINDS:
            cells[name, pr.PEER, kind] = {"tune": _result(peer), "test": _result(peer)}
            cells[name, pr.OURS, kind] = {"tune": _result(ours_tune), "test": _result(ours_test)}
    return {"cells": cells, "sets": {n: {"tune": 40, "test": 40} for n in SETS}}


def test_ours_above_the_peer_on_tune_holds_and_test_only_reports():
    summary = pr.summarize(_measured(ours_tune=30, ours_test=10))
    assert summary["ours_holds"] and summary["significantly_below"]["tune"] == []
    cell = summary["table"]["tune", pr.OURS, "query", "hotpotqa"]
    # 30 vs 24 of 40 queries rank their document first (the others second)
    assert cell["delta"] == pytest.approx(GAIN) and cell["p"] < 0.05
    assert summary["significantly_below"]["test"] == [f"{n} {k}" for n in SETS for k in tu.KINDS]


def test_a_significantly_lower_tune_cell_or_a_lower_mean_fails():
    measured = _measured(ours_tune=40)
    measured["cells"]["hotpotqa", pr.OURS, "reasoning"]["tune"] = _result(4)
    summary = pr.summarize(measured)
    assert summary["significantly_below"]["tune"] == ["hotpotqa reasoning"] and not summary["ours_holds"]
    assert pr.summarize(_measured(ours_tune=24))["ours_holds"]  # a tie holds (>=)
    assert not pr.summarize(_measured(ours_tune=23))["ours_holds"]


def test_render_and_json():
    summary = pr.summarize(_measured(ours_tune=30))
    text = pr.render(summary, "python scripts/agent_peer_rows.py --ours O --peer P")
    assert "Verdict on tune: **holds (>= the peer)**" in text and text.count("| sentence-transformers peer") == 4
    assert f"(+{GAIN:.3f}, p=" in text and "| untrained MiniLM | query only |" in text
    data = json.loads(json.dumps(pr.to_json(summary)))
    assert data["table"][f"tune|{pr.OURS}|query|hotpotqa"]["delta"] == pytest.approx(GAIN)


def test_the_three_systems_share_the_trajectory_use_cache(monkeypatch, tmp_path):
    seen = {}
    monkeypatch.setattr(pr, "measure", lambda models, work, names: seen.update(models=models, work=work)
                        or {"cells": {("hotpotqa", label, "query"): label for label in models}})
    pr.measure_peer_rows("/m/ours", "/m/peer", tmp_path, ["hotpotqa"])
    assert seen["models"] == {"base": "minilm", "trajectory-use": "/m/ours", "st-peer": "/m/peer"}


def test_another_model_of_ours_gets_runs_of_its_own_and_is_reported_as_ours(monkeypatch, tmp_path):
    seen = {}
    monkeypatch.setattr(pr, "measure", lambda models, work, names: seen.update(models=models)
                        or {"cells": {("hotpotqa", label, "query"): label for label in models}})
    measured = pr.measure_peer_rows("/m/v2", "/m/peer", tmp_path, ["hotpotqa"], label="sv-v2")
    assert seen["models"] == {"base": "minilm", "sv-v2": "/m/v2", "st-peer": "/m/peer"}
    assert measured["cells"][("hotpotqa", pr.OURS, "query")] == "sv-v2" and ("hotpotqa", "sv-v2", "query") not in \
        measured["cells"]
