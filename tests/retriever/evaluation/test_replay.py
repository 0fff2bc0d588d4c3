"""Replay scoring on hand-computed trajectories: evidence recall curves, first-found calls, redundancy,
per-call nDCG / recall, the discovery curve, paired comparisons and the discovery plot."""

from __future__ import annotations

import json
import math
import sys

import pytest

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.evaluation.discovery_plot import Curve, plot_discovery, png_text
from hopscotch.retriever.evaluation.replay import (
    ReplayCall,
    check_replays_comparable,
    compare_reports,
    discovery_curve,
    replay_report,
    score_trajectory,
    summary,
)

T975_DF2 = 4.302652729911275  # scipy.stats.t.ppf(0.975, 2)


def test_trajectory_curve_first_found_and_redundancy():
    s = score_trajectory("q", [["a", "b", "c"], ["b", "d"], ["e", "a", "f"]], evidence={"a", "d", "g"})
    assert s.calls == 3 and s.retrieved == 8 and s.unique_docs == 6
    assert s.redundant == 2 and s.redundancy == pytest.approx(2 / 8)   # b at call 2, a at call 3
    assert s.curve == pytest.approx([1 / 3, 2 / 3, 2 / 3])
    assert s.evidence == 3 and s.evidence_recall == pytest.approx(2 / 3)
    assert s.first_found == {"a": 1, "d": 2, "g": None}
    assert s.new_evidence == [["a"], ["d"], []]


def test_trajectory_without_evidence_and_without_calls():
    s = score_trajectory("q", [["a", "b"], ["a"]])
    assert s.evidence is None and s.curve is None and s.evidence_recall is None and s.first_found is None
    assert s.redundancy == pytest.approx(1 / 3)
    empty = score_trajectory("q", [], evidence={"a"})
    assert empty.curve == [] and empty.evidence_recall == 0.0 and empty.redundancy is None


def test_trajectory_canonicalises_climbmix_docids():
    s = score_trajectory("q", [["shard_00045_06622"], ["shard_00045_6622"]], evidence={"shard_00045_6622"})
    assert s.curve == [1.0, 1.0] and s.redundant == 1 and s.first_found == {"shard_00045_6622": 1}


def test_discovery_curve_carries_final_values_forward():
    a = score_trajectory("a", [["x"], ["y"]], evidence={"x", "y"})      # 0.5, 1.0
    b = score_trajectory("b", [["z"]], evidence={"w"})                  # 0.0
    c = score_trajectory("c", [], evidence={"v"})                       # no call: 0.0 throughout
    d = score_trajectory("d", [["x"], ["y"], ["z"]])                    # no evidence: not in the curve
    curve = discovery_curve([a, b, c, d])
    assert curve["call"] == [1, 2]
    assert curve["evidence_recall"] == pytest.approx([0.5 / 3, 1 / 3])
    assert curve["active"] == [2, 1]
    # t = 2: values (1, 0, 0): sd = sqrt(1/3), half-width = t(0.975, 2) * sd / sqrt(3)
    assert curve["ci95"][1] == pytest.approx(T975_DF2 * math.sqrt(1 / 3) / math.sqrt(3))
    assert discovery_curve([d]) is None


def test_summary():
    assert summary([1.0, 0.0, 0.0]) == {"mean": pytest.approx(1 / 3), "ci95": pytest.approx(T975_DF2 / 3), "n": 3}
    assert summary([0.4]) == {"mean": 0.4, "ci95": 0.0, "n": 1}
    assert summary([None]) == {"mean": None, "ci95": None, "n": 0}


def _calls():
    return [ReplayCall("q1", 1, "first"), ReplayCall("q1", 2, "second"), ReplayCall("q2", 1, "other")]


QRELS = {"q1": {"a": 1, "d": 1, "g": 1, "n": 0}, "q3": {"z": 1}}
RUN = {"q1#1": {"a": 3.0, "b": 2.0, "c": 1.0}, "q1#2": {"b": 2.0, "d": 1.0}, "q2#1": {"a": 1.0}}


def test_report_per_call_scores_are_hand_computed():
    report = replay_report(_calls(), RUN, QRELS, k=3, trajectories=["q1", "q2", "q4"])
    idcg = 1 + 1 / math.log2(3) + 1 / math.log2(4)             # three relevant documents
    c1, c2, c3 = (report["per_call"][i] for i in ("q1#1", "q1#2", "q2#1"))
    assert c1["ndcg@10"] == pytest.approx(1 / idcg) and c1["recall@3"] == pytest.approx(1 / 3)
    assert c2["ndcg@10"] == pytest.approx((1 / math.log2(3)) / idcg) and c2["recall@3"] == pytest.approx(1 / 3)
    assert c1["new_evidence"] == ["a"] and c2["new_evidence"] == ["d"] and c2["redundant"] == 1
    assert "ndcg@10" not in c3 and "new_evidence" not in c3    # q2 has no qrels: replayed, not scored
    m = report["metrics"]
    assert m["ndcg@10"]["n"] == 2 and m["ndcg@10"]["mean"] == pytest.approx((1 + 1 / math.log2(3)) / 2 / idcg)
    assert m["evidence_recall"] == {"mean": pytest.approx(2 / 3), "ci95": 0.0, "n": 1}
    # q4 has no call; redundancy is over trajectories that retrieved something (q1: 1/5, q2: 0)
    assert m["redundancy"]["n"] == 2 and m["redundancy"]["mean"] == pytest.approx((1 / 5 + 0) / 2)
    assert m["calls"]["mean"] == pytest.approx(1.0) and m["calls"]["n"] == 3
    assert report["calls"] == {"replayed": 3, "scored": 2, "trajectories": 3, "trajectories_with_evidence": 1}
    assert report["per_trajectory"]["q1"]["first_found"] == {"a": 1, "d": 2, "g": None}
    assert report["discovery_curve"]["evidence_recall"] == pytest.approx([1 / 3, 2 / 3])


def test_report_cuts_rankings_at_k():
    report = replay_report(_calls(), RUN, QRELS, k=1)
    assert report["per_call"]["q1#1"]["recall@1"] == pytest.approx(1 / 3)
    assert report["per_call"]["q1#2"]["recall@1"] == 0.0 and report["per_call"]["q1#2"]["retrieved"] == 1
    assert report["per_trajectory"]["q1"]["evidence_recall_curve"] == pytest.approx([1 / 3, 1 / 3])


def test_report_without_qrels_keeps_the_qrels_free_parts():
    report = replay_report(_calls(), RUN, None, k=10)
    assert set(report["metrics"]) == {"redundancy", "calls", "unique_docs"}
    assert report["discovery_curve"] is None and report["calls"]["scored"] == 0
    assert report["per_trajectory"]["q1"]["redundancy"] == pytest.approx(1 / 5)
    assert report["per_trajectory"]["q1"]["unique_docs"] == 4
    assert all("ndcg@10" not in row for row in report["per_call"].values())


def test_compare_reports_pairs_calls_and_trajectories():
    a = replay_report(_calls(), RUN, QRELS, k=3)
    better = dict(RUN, **{"q1#2": {"d": 2.0, "g": 1.0}})
    b = replay_report(_calls(), better, QRELS, k=3)
    tests = compare_reports(a, b, permutations=200)
    assert set(tests) == {"ndcg@10", "recall@3", "evidence_recall", "redundancy"}
    assert tests["recall@3"]["level"] == "call" and tests["recall@3"]["n"] == 2
    assert tests["recall@3"]["delta"] == pytest.approx((1 / 3) / 2)          # call 2 finds d and g
    assert tests["evidence_recall"]["level"] == "trajectory"
    assert tests["evidence_recall"]["delta"] == pytest.approx(1 - 2 / 3)
    assert tests["redundancy"]["delta"] == pytest.approx((0 + 0) / 2 - (1 / 5 + 0) / 2)
    other_calls = [ReplayCall("q1", 1, "first"), ReplayCall("q1", 2, "changed"), ReplayCall("q2", 1, "other")]
    with pytest.raises(UsageError, match="q1#2"):
        compare_reports(a, replay_report(other_calls, RUN, QRELS, k=3))


def test_replays_comparable_ignores_query_input_and_unknown_corpus():
    from hopscotch.retriever.evaluation.manifest import make_manifest

    def manifest(**kw):
        base = {"corpus": None, "qrels": QRELS, "qrels_path": "q.tsv", "k": 10, "query_input": "query",
                "protocol": "hopscotch", "queries_expected": 3, "queries_evaluated": 2}
        return make_manifest("replay", **{**base, **kw})

    check_replays_comparable(manifest(), manifest(query_input="reasoning", corpus="c.jsonl"))
    with pytest.raises(UsageError, match="'k'"):
        check_replays_comparable(manifest(), manifest(k=5))
    with pytest.raises(UsageError, match="'corpus'"):
        check_replays_comparable(manifest(corpus="a.jsonl"), manifest(corpus="b.jsonl"))
    with pytest.raises(UsageError, match="'qrels'"):
        check_replays_comparable(manifest(), manifest(qrels={"q1": {"a": 1}}))


def test_plot_draws_one_line_per_retriever(tmp_path):
    png = tmp_path / "discovery.png"
    curves = [Curve("bm25", [0.2, 0.5, 0.6], [0.1, 0.1, 0.05]), Curve("dense (reasoning)", [0.3, 0.7]),
              Curve("hybrid", [0.4])]
    assert plot_discovery(curves, png) == 3
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    meta = png_text(png)
    assert meta["hopscotch:lines"] == "3"
    assert json.loads(meta["hopscotch:labels"]) == ["bm25", "dense (reasoning)", "hybrid"]


def test_plot_without_matplotlib_is_a_usage_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.backends.backend_agg", None)
    with pytest.raises(UsageError, match="--no-plot"):
        plot_discovery([Curve("bm25", [0.5])], tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()
