"""``hopscotch eval-agent`` (``hopscotch`` protocol): evidence recall over shown documents, calls, accuracy; run reading.

Since issue 11 an incomplete run counts as wrong in the accuracy (it used to be left out), so the fixture's
accuracy is 1 correct of 3 runs (q1 correct, q2 wrong, q3 incomplete), not 1 of 2.
"""

from __future__ import annotations

import json

import pytest

from hopscotch.retriever.errors import FormatError, UsageError
from hopscotch.retriever.evaluation.agent_runs import (
    evaluate_agent_runs,
    iter_run_records,
    parse_nested,
    search_calls,
    shown_docids,
)


def search_output(docids):
    return "A search found results:\n" + "\n".join(f"{i + 1}. <docid: {d}> [snippet]" for i, d in enumerate(docids))


@pytest.fixture
def runs_dir(tmp_path):
    folder = tmp_path / "runs"
    folder.mkdir()
    q1 = {  # BrowseComp-Plus layout, real JSON objects; judged correct
        "query_id": "q1", "status": "completed", "tool_call_counts": {"search": 2, "get_document": 1},
        "retrieved_docids": ["d1", "d2", "d3"],
        "result": [
            {"type": "reasoning", "tool_name": None, "arguments": None, "output": "think"},
            {"type": "tool_call", "tool_name": "search", "arguments": '{"query": "a"}',
             "output": json.dumps([{"docid": "d1", "score": 1.0, "snippet": "x"}])},
            {"type": "tool_call", "tool_name": "search", "arguments": '{"query": "b"}',
             "output": search_output(["d2", "d3"])},
            {"type": "tool_call", "tool_name": "get_document", "arguments": '{"docid": "d9"}', "output": "text"},
            {"type": "output_text", "tool_name": None, "arguments": None, "output": "Answer: X"}],
        "judge_result": {"correct": True, "confidence": 90}}
    q2 = {  # nested fields as Python-repr strings, no retrieved_docids, judged incorrect
        "query_id": 2, "status": "completed", "tool_call_counts": "{'search': 3}",
        "result": repr([
            {"type": "tool_call", "tool_name": "functions.search", "arguments": "{'query': 'c'}",
             "output": search_output(["e1", "e5"])},
            {"type": "tool_call", "tool_name": "search", "arguments": "{'query': 'd'}",
             "output": "Error: Tool call is not a valid JSON."},
            {"type": "tool_call", "tool_name": "search", "arguments": "{'query': 'e'}",
             "output": search_output(["e2"])}]),
        "correct": "no"}
    (folder / "run_q1.json").write_text(json.dumps(q1))
    (folder / "run_q2.json").write_text(json.dumps(q2))
    # q3: a JSONL file of runs without judgements; retrieved_docids as {call: [docids]} items
    q3 = {"query_id": "q3", "status": "incomplete", "retrieved_docids": [{'{"query": ["x"]}': ["f1", "f2"]}],
          "result": [{"type": "tool_call", "tool_name": "search", "arguments": "{}", "output": "none"}]}
    (folder / "more.jsonl").write_text(json.dumps(q3) + "\n")
    return folder


QRELS = {"q1": {"d1": 1, "d9": 1, "d7": 1, "d2": 0}, "2": {"e1": 2, "e2": 1, "e3": 1, "e4": 1},
         "q3": {"f2": 1}, "q4": {"g1": 1}}


def test_report(runs_dir):
    report = evaluate_agent_runs(runs_dir, QRELS)
    per = {r["query_id"]: r for r in report["per_run"]}
    assert per["q1"]["evidence_recall"] == pytest.approx(2 / 3)      # d1 and the fetched d9 of {d1, d9, d7}
    assert per["2"]["evidence_recall"] == pytest.approx(2 / 4)       # e1, e2; e5 is not relevant
    assert per["q3"]["evidence_recall"] == 1.0
    assert [per[q]["search_calls"] for q in ("q1", "2", "q3")] == [2, 3, 1]
    assert report["evidence_recall"] == pytest.approx((2 / 3 + 1 / 2 + 1) / 3)
    assert report["search_calls_per_question"] == pytest.approx(2)
    assert report["judged"] == 2 and report["accuracy_over"] == 3 and report["accuracy"] == pytest.approx(1 / 3)
    assert per["q3"]["incomplete"] and per["q3"]["correct"] is False
    assert report["completed"] == 2 and report["qrels_without_run"] == ["q4"]


def test_shown_documents_come_from_every_source(runs_dir):
    records = dict(iter_run_records(runs_dir))
    q1 = next(r for w, r in records.items() if w.endswith("run_q1.json"))
    assert shown_docids(q1) == {"d1", "d2", "d3", "d9"}
    q2 = next(r for w, r in records.items() if w.endswith("run_q2.json"))
    assert shown_docids(q2) == {"e1", "e5", "e2"} and search_calls(q2) == 3


def test_parse_nested_reads_json_and_python_repr():
    assert parse_nested('{"a": [1, 2]}') == {"a": [1, 2]}
    assert parse_nested("{'a': None, 'b': True}") == {"a": None, "b": True}
    assert parse_nested("plain text") == "plain text"
    assert parse_nested("{not valid") == "{not valid"


def test_real_tongyi_runs(shared_data):
    """The 20 published Tongyi-DeepResearch runs: calls counted as the harness counted them."""
    path = shared_data / "qampari_tongyi" / "runs" / "infly.jsonl"
    records = [r for _, r in iter_run_records(path)]
    assert len(records) == 20
    for r in records:
        listed = {d for item in r["retrieved_docids"] for ids in item.values() for d in ids}
        shown = shown_docids(r)
        assert listed <= shown
        assert search_calls(r) == r["tool_call_counts"]["search"]
    qrels = {str(r["query_id"]): {min(shown_docids(r)): 1, "never-shown": 1} for r in records}
    report = evaluate_agent_runs(path, qrels)
    assert report["evidence_recall"] == pytest.approx(0.5) and report["accuracy"] is None


def test_cli(cli, runs_dir, tmp_path):
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("".join(f"{q} Q0 {d} {g}\n" for q, docs in QRELS.items() for d, g in docs.items()))
    code, out, err = cli("eval-agent", "--runs", runs_dir, "--qrels", qrels, "--json", tmp_path / "r.json")
    assert code == 0, err
    assert "evidence recall: 72.22% over 3 runs with qrels" in out
    assert "accuracy: 33.33% over 3 runs (2 judged completed; 1 incomplete counted wrong)" in out
    written = json.loads((tmp_path / "r.json").read_text())
    assert written["num_runs"] == 3
    manifest = written["manifest"]
    assert manifest["command"] == "eval-agent" and manifest["protocol"] == "hopscotch" and manifest["judge"] == "run"
    assert manifest["queries_expected"] == 4 and manifest["queries_evaluated"] == 3
    assert manifest["snippet_chars"] is None and manifest["qrels"]["path"] == str(qrels)


def test_bad_inputs(tmp_path):
    with pytest.raises(UsageError, match="no such run"):
        list(iter_run_records(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="no \\*.json"):
        list(iter_run_records(tmp_path / "empty"))
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "run_1.json").write_text('{"query_id": "1",\n "status": }')
    with pytest.raises(FormatError, match="run_1.json:2"):
        list(iter_run_records(bad))
    (bad / "run_1.json").write_text('{"status": "completed"}')
    with pytest.raises(FormatError, match="query_id"):
        evaluate_agent_runs(bad, {})
