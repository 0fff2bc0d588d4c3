"""``eval-agent --protocol bcp|cmass|hopscotch``: each harness's own numbers on hand-made runs in its layout.

Every expected number is worked out by hand in the comments next to it.
"""

from __future__ import annotations

import json
import math

import pytest

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.evaluation.agent_runs import evaluate_agent_runs
from hopscotch.retriever.evaluation.bcp_protocol import calibration_error, cited_docids, evaluate_bcp
from hopscotch.retriever.evaluation.cmass_protocol import document_views, evaluate_cmass
from hopscotch.retriever.io.agent_runs import read_judgements

TOL = 1e-9


def call(tool, arguments, output, details=None):
    step = {"type": "tool_call", "tool_name": tool, "arguments": arguments, "output": output}
    return step if details is None else {**step, "details": details}


def answer(text):
    return {"type": "output_text", "tool_name": None, "arguments": None, "output": text}


def write(path, obj):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))
    return path


def trec(path, qrels):
    path.write_text("".join(f"{q} 0 {d} {g}\n" for q, docs in qrels.items() for d, g in docs.items()))
    return path


# --- BrowseComp-Plus ------------------------------------------------------------------------------------
BCP_QRELS = {"1": {"11": 1, "13": 1}, "2": {"21": 1, "22": 1}, "3": {"31": 1}}


@pytest.fixture
def bcp_runs(tmp_path):
    """Two runs as search_agent/openai_client.py writes them: run_a correct, run_b incomplete (no answer)."""
    folder = tmp_path / "bcp"
    write(folder / "run_a.json", {
        "metadata": {"model": "m"}, "query_id": "1", "status": "completed",
        "tool_call_counts": {"search": 1, "get_document": 1}, "retrieved_docids": ["11", "12"],
        "result": [call("search", '{"query": "x"}', json.dumps([{"docid": "11", "snippet": "s"},
                                                                {"docid": "12", "snippet": "s"}])),
                   call("get_document", '{"docid": "13"}', json.dumps({"docid": "13", "text": "t"})),
                   answer("Explanation: see [11] and [12, 99]\nExact Answer: X\nConfidence: 80%")],
        "judge_result": {"correct": True, "confidence": 80, "parse_error": False}})
    write(folder / "run_b.json", {
        "query_id": "2", "status": "incomplete", "tool_call_counts": {"search": 3}, "retrieved_docids": ["21"],
        "result": [call("search", '{"query": "y"}', json.dumps([{"docid": "21"}]))]})
    write(folder / "notes.json", {"query_id": "3", "status": "completed"})  # not run_*.json: never read
    return folder


def test_bcp_recall_over_retrieved_docids_and_incomplete_counted_wrong(bcp_runs):
    report = evaluate_bcp(bcp_runs, BCP_QRELS)
    per = {r["query_id"]: r for r in report["per_run"]}
    # run_a: retrieved {11, 12} & positives {11, 13} = {11}: 1/2 (the fetched 13 is not in retrieved_docids)
    assert per["1"]["recall"] == pytest.approx(0.5, abs=TOL)
    # run_b: {21} & {21, 22}: 1/2; macro over both runs: 0.5
    assert report["recall"] == pytest.approx(0.5, abs=TOL) and report["summary"]["Recall (%)"] == 50.0
    # run_a judged correct, run_b incomplete: wrong; 1 / 2 runs
    assert report["accuracy"] == pytest.approx(0.5, abs=TOL) and report["summary"]["Accuracy (%)"] == 50.0
    assert report["num_runs"] == 2 and report["queries_without_run"] == ["3"]  # notes.json was not read
    # avg_tool_stats: search (1 + 3) / 2 = 2.0, get_document 1 / 2 = 0.5
    assert report["avg_tool_stats"] == {"search": 2.0, "get_document": 0.5} and report["search_calls"] == 2.0
    # one confidence only: not computed, reported as 0.0 as the script does
    assert report["calibration_error_computed"] is False and report["calibration_error"] == 0.0
    # run_a cites 11, 12, 99: precision 1/3 ({11} relevant), recall 1/2; 1 of 2 responses cites
    c = report["citations"]
    assert c["precision"] == pytest.approx(1 / 3, abs=TOL) and c["recall"] == pytest.approx(0.5, abs=TOL)
    assert c["coverage"] == pytest.approx(0.5, abs=TOL) and c["avg_citations_per_response"] == 3.0
    assert report["judge"] == "run" and report["queries_expected"] == 3 and report["queries_evaluated"] == 2


def test_hopscotch_protocol_on_the_same_runs(bcp_runs):
    report = evaluate_agent_runs(bcp_runs, BCP_QRELS)
    per = {r["query_id"]: r for r in report["per_run"]}
    # shown to run_a: 11, 12 (search) and 13 (get_document): {11, 13} all found, recall 1.0 (bcp: 0.5)
    assert per["1"]["evidence_recall"] == pytest.approx(1.0, abs=TOL)
    # hopscotch reads every *.json, notes.json too (question 3, nothing shown): (1.0 + 0.5 + 0) / 3
    assert report["evidence_recall"] == pytest.approx(1.5 / 3, abs=TOL)
    # one correct + one incomplete: 50%, no longer 100% (notes.json: completed, unjudged, left out)
    assert report["accuracy"] == pytest.approx(0.5, abs=TOL) and report["accuracy_over"] == 2


def test_bcp_judgements_from_judge_files(bcp_runs, tmp_path):
    evals = tmp_path / "evals"  # evaluate_run.py writes <run stem>_eval.json; this judge says run_a is wrong
    write(evals / "run_a_eval.json", {"json_path": str(bcp_runs / "run_a.json"), "query_id": "1",
                                      "judge_result": {"correct": False, "confidence": 40, "parse_error": False}})
    write(evals / "run_b_eval.json", {"json_path": str(bcp_runs / "run_b.json"), "query_id": "2",
                                      "judge_result": {"parse_error": True, "error": "Response incomplete"}})
    report = evaluate_bcp(bcp_runs, BCP_QRELS, evals)
    assert report["accuracy"] == 0.0 and report["judge"] == str(evals)
    csv_path = tmp_path / "detailed_judge_results.csv"
    csv_path.write_text("query_id,predicted_answer,correct_answer,judge_correct,confidence,is_completed,parse_error,"
                        f"json_path,num_citations,precision_positives,recall_positives\n"
                        f"1,X,X,True,95,True,False,{bcp_runs / 'run_a.json'},3,0.33,0.5\n")
    [j] = read_judgements(csv_path)
    assert (j.query_id, j.correct, j.confidence, j.parse_error, j.run_stem) == ("1", True, 95.0, False, "run_a")
    assert evaluate_bcp(bcp_runs, BCP_QRELS, csv_path)["accuracy"] == pytest.approx(0.5, abs=TOL)


def test_calibration_error_hand_example():
    # sorted by confidence: 10 (wrong), 20 (right) | 50, 60 (right, right) | 80 (wrong), 90 (right)
    # bins of 2; upstream skips the last bin. bin 1: |0.15 - 0.5| = 0.35; bin 2: |0.55 - 1.0| = 0.45
    # sqrt(2/6 * 0.35^2 + 2/6 * 0.45^2) = sqrt(0.325 / 3)
    value = calibration_error([80, 10, 60, 20, 90, 50], [False, False, True, True, True, True], beta=2)
    assert value == pytest.approx(math.sqrt(0.325 / 3), abs=TOL)
    with pytest.raises(ValueError):
        calibration_error([50], [True], beta=2)


def test_bcp_calibration_over_runs(tmp_path):
    # 100 runs at 20% confidence with 30 correct, 100 at 90% all correct. Bins of 100; the last is skipped:
    # sqrt(100/200 * (0.2 - 0.3)^2) = sqrt(0.005)
    rows = []
    for i in range(200):
        conf, ok = (20, i < 30) if i < 100 else (90, True)
        rows.append({"query_id": f"c{i}", "status": "completed", "retrieved_docids": [f"d{i}"],
                     "result": [answer("Exact Answer: x")], "judge_result": {"correct": ok, "confidence": conf}})
    qrels = {f"c{i}": {f"d{i}": 1} for i in range(200)}
    path = tmp_path / "runs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = evaluate_bcp(path, qrels)
    assert report["calibration_error_computed"] and report["calibration_error"] == pytest.approx(math.sqrt(0.005),
                                                                                                 abs=TOL)
    assert report["summary"]["Calibration Error (%)"] == 7.07
    assert report["accuracy"] == pytest.approx(130 / 200, abs=TOL) and report["recall"] == 1.0
    path.write_text("".join(json.dumps(r) + "\n" for r in rows[:150]))  # one bin of 150, skipped: 0.0
    report = evaluate_bcp(path, qrels)
    assert report["calibration_error_computed"] and report["calibration_error"] == 0.0


def test_bcp_citations_are_digits_in_brackets():
    assert cited_docids("see [12], [3, 45] and 【7】 but not [abc]") == ["12", "3", "45", "7"]


# --- cmass ----------------------------------------------------------------------------------------------
A, B, C, H, F = "shard_00459_61697", "shard_00071_31411", "shard_00001_7", "shard_00003_3", "shard_00099_1"
D, E, CITED = "shard_00010_1", "shard_00010_2", "shard_00002_5"
CMASS_QRELS = {"25": {A: 1, "shard_00500_1": 1, "shard_00500_2": 1, "shard_00500_3": 1},
               "26": {B: 1, C: 1, H: 1, F: 1, CITED: 1}, "27": {D: 1, E: 1}, "28": {"shard_00600_1": 1}}


def search_text(docids):
    hits = "\n\n".join(f"{i + 1}. docid={d} score=1.0\n   Excerpt: ..." for i, d in enumerate(docids))
    return f"Returned {len(docids)} hits from the Pyserini REST ranking.\n\n{hits}\n\nUse read_document(docid)"


@pytest.fixture
def cmass_artefact(tmp_path):
    """``<run-id>/{run_config.json, runs/<qid>.json, evals/per-query/<qid>_eval.json}`` as REPRODUCING.md shows."""
    art = tmp_path / "artifacts" / "example"
    write(art / "run_config.json", {"schema_version": "cmass-run-config-v1", "query_count": 4})
    write(art / "runs" / "25.json", {  # the canonical shape: every document set written out
        "query_id": "25", "status": "completed", "tool_call_counts": {"search": 1, "read_document": 1},
        "surfaced_docids": [A, B], "previewed_docids": [A, B], "agent_docids": [A], "opened_docids": [A],
        "cited_docids": [A],
        "result": [call("search", {"query": "q", "hits": 2}, search_text([A, B]), {"retrievedDocids": [A, B]}),
                   call("read_document", {"docid": A}, f"[docid={A} lines 1-42 of 42]\n\ntext", {"docid": A}),
                   answer(f"Answer:\nExplanation: ... [{A}]\nExact Answer: x\nConfidence: 88%")]})
    write(art / "runs" / "26.json", {  # no document sets, no counts: derived from result
        "query_id": "26", "status": "completed",
        "result": [call("search", {"query": "r"}, search_text([B, "shard_00001_00007"]),  # padded C
                        {"retrievedDocids": [B, C, H]}),  # H retrieved but hidden from the model
                   call("search", {"query": "s"}, "Error: HTTP 503", {"httpStatus": 503, "retrievedDocids": [F]}),
                   call("read_document", {"docid": B}, f"[docid={B} full document]\n\ntext"),
                   answer(f"Explanation: [{B}, {CITED}]\nExact Answer: y\nConfidence: 50%")]})
    write(art / "runs" / "27.json", {  # timed out: contributes zero to accuracy whatever its judgement
        "query_id": "27", "status": "timeout", "tool_call_counts": {"search": 4},
        "surfaced_docids": [D], "previewed_docids": [D], "result": [call("search", {"query": "t"}, search_text([D]))]})
    per_query = art / "evals" / "per-query"
    write(per_query / "25_eval.json", {"json_path": "runs/example/25.json", "query_id": "25",
                                       "judge_result": {"correct": True, "confidence": 100, "parse_error": False}})
    write(per_query / "26_eval.json", {"query_id": "26", "judge_result": {"correct": False, "parse_error": False}})
    write(per_query / "27_eval.json", {"query_id": "27", "judge_result": {"correct": True}})
    write(art / "evals" / "evaluation_summary.json", {"Accuracy (%)": 0.0, "per_query_metrics": []})
    return art


def test_cmass_document_views_from_fields_and_from_result(cmass_artefact):
    views = document_views(json.loads((cmass_artefact / "runs" / "26.json").read_text()))
    assert views == {"previewed": [B, C], "surfaced": [B, C, H], "opened": [B], "cited": [B, CITED],
                     "agent": [B, CITED]}  # the failed call's F appears nowhere


def test_cmass_metrics(cmass_artefact):
    report = evaluate_cmass(cmass_artefact, CMASS_QRELS, cmass_artefact / "evals" / "per-query")
    per = {r["query_id"]: r for r in report["per_run"]}
    # previewed recall: 25: {A}/4 = 0.25; 26: {B, C}/5 = 0.4; 27: {D}/2 = 0.5; 28 (no run): 0 -> 1.15 / 4
    assert [per[q]["previewed_recall"] for q in ("25", "26", "27")] == pytest.approx([0.25, 0.4, 0.5], abs=TOL)
    assert report["previewed_recall"] == pytest.approx(1.15 / 4, abs=TOL)
    assert report["summary"]["Agent Previewed Recall Macro (%)"] == 28.75
    # surfaced: 0.25 + 3/5 (B, C, H) + 0.5 -> 1.35 / 4; opened: 0.25 + 1/5 -> 0.45 / 4; cited: 0.25 + 2/5
    m = report["macro_recall"]
    assert m["surfaced"] == pytest.approx(1.35 / 4, abs=TOL) and m["opened"] == pytest.approx(0.45 / 4, abs=TOL)
    assert m["cited"] == pytest.approx(0.65 / 4, abs=TOL) and m["agent"] == pytest.approx(0.65 / 4, abs=TOL)
    # micro previewed: hits 1 + 2 + 1 over 4 + 5 + 2 + 1 = 12 relevant
    assert report["micro_recall"]["previewed"] == pytest.approx(4 / 12, abs=TOL)
    # calls: 25: search 1 + read_document 1 = 2; 26 (counted from result, the failed call too): 2 + 1 = 3;
    # 27: 4; 28: 0 -> 9 / 4
    assert [per[q]["tool_calls"] for q in ("25", "26", "27")] == [2, 3, 4]
    assert report["tool_calls"] == pytest.approx(9 / 4, abs=TOL) and report["summary"]["Tool Calls"] == 2.25
    assert report["avg_tool_stats"] == pytest.approx({"search": 7 / 4, "read_document": 2 / 4}, abs=TOL)
    # accuracy: only 25 is completed and correct (27 timed out) -> 1 / 4; completed-only 1 / 2
    assert report["accuracy"] == pytest.approx(0.25, abs=TOL)
    assert report["completed_only_accuracy"] == pytest.approx(0.5, abs=TOL)
    s = report["summary"]
    assert (s["Completed Correct"], s["Completed Wrong"], s["Timeout/Incomplete Queries"]) == (1, 1, 1)
    assert report["queries_expected"] == 4 and report["queries_evaluated"] == 3
    assert report["queries_without_run"] == ["28"]


def test_cmass_without_judgements_and_duplicates(cmass_artefact, tmp_path):
    report = evaluate_cmass(cmass_artefact / "runs", CMASS_QRELS)
    assert report["accuracy"] == 0.0 and report["judge"] is None
    twice = tmp_path / "twice.jsonl"
    twice.write_text(json.dumps({"query_id": "25", "status": "completed"}) + "\n" +
                     json.dumps({"query_id": "25", "status": "completed"}) + "\n")
    with pytest.raises(UsageError, match="second run for question 25"):
        evaluate_cmass(twice, CMASS_QRELS)


def test_hopscotch_protocol_reads_cmass_artefacts(cmass_artefact):
    report = evaluate_agent_runs(cmass_artefact, CMASS_QRELS)  # evals/ and run_config.json are not runs
    per = {r["query_id"]: r for r in report["per_run"]}
    assert report["num_runs"] == 3
    # 25: shown {A, B}: 1/4, 1 search + 1 read_document; 26: {B, C, H} (failed call adds nothing): 3/5
    assert per["25"]["evidence_recall"] == pytest.approx(0.25, abs=TOL)
    assert (per["25"]["search_calls"], per["25"]["document_calls"], per["25"]["shown_docs"]) == (1, 1, 2)
    assert per["26"]["evidence_recall"] == pytest.approx(0.6, abs=TOL) and per["26"]["search_calls"] == 2


@pytest.mark.parametrize("protocol", ["bcp", "cmass", "hopscotch"])
def test_padded_and_unpadded_docids_score_the_same(tmp_path, protocol):
    evaluate = {"bcp": evaluate_bcp, "cmass": evaluate_cmass, "hopscotch": evaluate_agent_runs}[protocol]
    qrels = {"7": {"shard_00045_6622": 1, "shard_00046_00001": 1}}  # the qrels mix both spellings too
    reports = []
    for name, ids in (("padded", ["shard_00045_06622", "shard_00046_00001"]),
                      ("unpadded", ["shard_00045_6622", "shard_00046_1"])):
        write(tmp_path / name / "run_7.json", {"query_id": "7", "status": "completed", "retrieved_docids": ids,
                                               "previewed_docids": ids, "result": [answer("x")]})
        report = evaluate(tmp_path / name, qrels)
        reports.append(report["per_run"][0])
    recall = {"bcp": "recall", "cmass": "previewed_recall", "hopscotch": "evidence_recall"}[protocol]
    assert reports[0][recall] == reports[1][recall] == pytest.approx(1.0, abs=TOL)


def test_cli_protocols(cli, cmass_artefact, bcp_runs, tmp_path):
    qrels = trec(tmp_path / "qrels.txt", CMASS_QRELS)
    judged = cmass_artefact / "evals" / "per-query"
    code, out, err = cli("eval-agent", "--runs", cmass_artefact, "--qrels", qrels, "--protocol", "cmass",
                         "--judgements", judged, "--json", tmp_path / "cmass.json")
    assert code == 0, err
    assert "Previewed recall (macro): 28.75%" in out and "per question: 2.25" in out and "Accuracy: 25.00%" in out
    written = json.loads((tmp_path / "cmass.json").read_text())
    manifest = written["manifest"]
    assert (manifest["protocol"], manifest["judge"], manifest["queries_expected"], manifest["queries_evaluated"]) \
        == ("cmass", str(judged), 4, 3)
    assert written["previewed_recall"] == pytest.approx(0.2875, abs=TOL)
    code, out, err = cli("eval-agent", "--runs", bcp_runs, "--qrels", trec(tmp_path / "b.txt", BCP_QRELS),
                         "--protocol", "bcp")
    assert code == 0, err
    assert "Accuracy: 50.00%" in out and "Recall: 50.00%" in out
    code, out, err = cli("eval-agent", "--runs", tmp_path / "artifacts", "--qrels", qrels, "--protocol", "bcp")
    assert code == 2 and "run_*.json" in err


def test_bcp_on_real_tongyi_runs(shared_data):
    """The 20 published Tongyi-DeepResearch runs ({call: [docids]} retrieved_docids items, no judgements)."""
    path = shared_data / "qampari_tongyi" / "runs" / "infly.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    listed = {str(r["query_id"]): sorted({d for item in r["retrieved_docids"] for ids in item.values() for d in ids})
              for r in records}
    qrels = {qid: {docs[0]: 1, "never-retrieved": 1} for qid, docs in listed.items()}
    report = evaluate_bcp(path, qrels)
    assert report["num_runs"] == 20 and report["recall"] == pytest.approx(0.5, abs=TOL)
    assert report["accuracy"] == 0.0 and report["missing_judgements"] == 20 and report["judge"] is None
    mean_search = sum(r["tool_call_counts"]["search"] for r in records) / 20
    assert report["avg_tool_stats"]["search"] == pytest.approx(mean_search, abs=TOL)


def test_hopscotch_protocol_failed_fetch_and_judge_file(bcp_runs, tmp_path):
    from hopscotch.retriever.evaluation.agent_runs import shown_docids

    missing = json.dumps({"error": "Document with docid '14' not found"})  # BrowseComp-Plus's get_document miss
    record = {"result": [call("get_document", '{"docid": "14"}', missing),
                         call("get_document", '{"docid": "13"}', json.dumps({"docid": "13", "text": "t"}))]}
    assert shown_docids(record) == {"13"}
    evals = tmp_path / "judged.jsonl"  # a JSONL of judge results overrides the records' own judgements
    evals.write_text(json.dumps({"query_id": "1", "judge_result": {"correct": False}}) + "\n")
    report = evaluate_agent_runs(bcp_runs, BCP_QRELS, evals)
    assert report["accuracy"] == 0.0 and report["judge"] == str(evals)
