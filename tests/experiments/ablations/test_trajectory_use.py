"""Trajectory-use labels against top-3 labels (:mod:`hopscotch_experiments.ablations.trajectory_use`): the verdict
on the tune questions, the paired tests, the docs section and its JSON, and which files each arm trains on."""

from __future__ import annotations

import json

from hopscotch.retriever.evaluation.metrics import evaluate
from hopscotch_experiments.ablations import trajectory_use as tu

SETS = ("tongyi_question", "hotpotqa")


def _result(hits: dict[str, int], n: int = 40):
    """An EvalResult over ``n`` queries of which ``hits[split]``-many rank their one relevant document first."""
    qrels = {f"q{i}": {"d": 1} for i in range(n)}
    run = {f"q{i}": ({"d": 2.0, "x": 1.0} if i < hits else {"x": 2.0, "d": 1.0}) for i in range(n)}
    return evaluate(run, qrels, ["ndcg@10"])


def _measured(use_tune: int, use_test: int = 30):
    """Base 20/40 first, top3 24/40, trajectory-use ``use_tune`` (tune) / ``use_test`` (test) on every set and row."""
    cells = {}
    for name in SETS:
        cells[name, "base", "query"] = {"tune": _result(20), "test": _result(20)}
        for kind in tu.KINDS:
            cells[name, "top3", kind] = {"tune": _result(24), "test": _result(24)}
            cells[name, "trajectory-use", kind] = {"tune": _result(use_tune), "test": _result(use_test)}
    return {"cells": cells, "sets": {n: {"tune": 40, "test": 40} for n in SETS}}


def test_better_on_tune_wins_and_test_only_reports():
    summary = tu.summarize(_measured(use_tune=30, use_test=10))
    assert summary["trajectory_use_wins"] and not summary["significantly_worse"]
    assert summary["tune_mean"]["trajectory-use"] > summary["tune_mean"]["top3"]
    test = summary["table"]["test", "trajectory-use", "query", "hotpotqa"]
    assert test["p"] < 0.05 and "p_base" in test  # the test cells carry their tests, but do not vote


def test_a_significantly_worse_tune_cell_vetoes():
    measured = _measured(use_tune=40)
    measured["cells"]["hotpotqa", "trajectory-use", "reasoning"]["tune"] = _result(4)
    summary = tu.summarize(measured)
    assert summary["significantly_worse"] == ["hotpotqa reasoning"] and not summary["trajectory_use_wins"]
    assert not tu.summarize(_measured(use_tune=24))["trajectory_use_wins"]  # a tie is no win


def test_render_and_json():
    summary = tu.summarize(_measured(use_tune=30))
    text = tu.render(summary, "python scripts/agent_trajectory_use.py --data D")
    assert "trajectory-use labels WIN on dev" in text and "| untrained MiniLM | query only |" in text
    assert "Tongyi, accumulated thinking, question-level labels (40)" in text and text.count("| trained, trajectory-use labels |") == 4
    data = json.loads(json.dumps(tu.to_json(summary)))
    assert data["table"]["tune|top3|reasoning|hotpotqa"]["mean"] == summary["table"]["tune", "top3", "reasoning",
                                                                                     "hotpotqa"]["mean"]


def test_each_arm_trains_on_its_tongyi_file(tmp_path, monkeypatch):
    data = tmp_path / "data"
    (data / "eval").mkdir(parents=True)
    (data / "eval" / "specs.txt").write_text("a=A::C\nb=B::C\n")
    calls = []
    monkeypatch.setattr(tu, "run_cli", lambda *argv: calls.append([str(a) for a in argv]))
    for arm in tu.ARMS:
        tu.train_arm(data, arm, tmp_path / arm, "r.yaml", ["train.max_steps=2"])
    (top3, use) = calls
    assert top3[-2].endswith("clean/tongyi_tuples.jsonl," + str(data / "clean" / "world_tuples.jsonl") + "]")
    assert "clean/tongyi_use_tuples.jsonl" in use[-2] and "clean/tongyi_tuples.jsonl" not in use[-2]
    assert top3[-1] == use[-1] == "train.max_steps=2" and top3.count("--eval-sets") == 2 and "--resume" not in top3
