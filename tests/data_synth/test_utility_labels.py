"""Utility labels: a returned document is relevant when the agent's later text uses its distinctive content."""

from __future__ import annotations

import json

import pytest

from hopscotch.data_synth.traces import read_traces
from hopscotch.data_synth.utility_labels import UtilityThresholds, judge_calls, utility_qrels
from hopscotch.retriever.errors import FormatError, UsageError

SNIPPETS = {
    # trajectory 1, call 1
    "new": "[Velvet Lantern ...]\nVelvet Lantern is a 1994 drama directed by Jane Roe for Marlow Pictures.",
    "echo": "Jane Roe is a film director. Jane Roe films are often discussed by critics.",
    "early": "Quiet Harbor is a 1990 film by Jane Roe, shot on the coast.",
    # trajectory 1, call 2
    "final": "Kestrelmoor Atlas is a 2001 drama directed by Jane Roe.",
    "other": "Grey Meadow is a documentary about sheep farming.",
    # trajectory 2 (a parallel call)
    "zed": "Zed Corp was founded in 1950 by Olga Fenwick in Oslo.",
    "zc_77": "Zed Corp has its head office in a tall building.",
}
STEPS = [
    {"query_id": "1", "reasoning": "We need the films Jane Roe directed. I recall Quiet Harbor (1990).",
     "search_query": "Jane Roe films director", "retrieved_docids": ["new", "echo", "early"], "valid": True},
    {"query_id": "1", "reasoning": "The results show Velvet Lantern by Jane Roe, and Quiet Harbor again.",
     "search_query": ["Jane Roe later films"], "retrieved_docids": ["final", "other"], "valid": True},
    {"query_id": "1", "reasoning": "Enough; writing the answer.", "search_query": None, "retrieved_docids": [],
     "valid": False},
    {"query_id": "2", "reasoning": "Who founded Zed Corp?", "search_query": ["Zed Corp founder", "Zed Corp history"],
     "retrieved_docids": ["zed", "zc_77"], "valid": True},
    {"query_id": "2", "reasoning": "Zed Corp was founded by Olga Fenwick (see docid zc_77).",
     "search_query": "Olga Fenwick", "retrieved_docids": [], "valid": True},
]


def _run(qid: str, reasonings: list[str], answer: str, as_repr: bool) -> dict:
    items = []
    for text in reasonings:
        items += [{"type": "reasoning", "tool_name": None, "arguments": None, "output": text},
                  {"type": "tool_call", "tool_name": "search", "arguments": '{"query": "x"}', "output": "..."}]
    items.append({"type": "output_text", "tool_name": None, "arguments": None, "output": answer})
    return {"query_id": qid, "status": "completed", "result": [repr(i) if as_repr else i for i in items]}


def write_jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def agent_files(tmp_path):
    steps = write_jsonl(tmp_path / "agent_search_steps.jsonl", STEPS)
    snippets = write_jsonl(tmp_path / "doc_snippets.jsonl", [{"docid": d, "text": t} for d, t in SNIPPETS.items()])
    runs = write_jsonl(tmp_path / "runs.jsonl", [
        _run("1", [s["reasoning"] for s in STEPS[:3]],
             "Jane Roe directed Velvet Lantern (1994) and Kestrelmoor Atlas (2001).", as_repr=True),
        _run("2", [s["reasoning"] for s in STEPS[3:]], "Olga Fenwick founded Zed Corp.", as_repr=False)])
    return steps, snippets, runs


def test_labels_follow_later_use(agent_files):
    steps, snippets, runs = agent_files
    qrels, stats = utility_qrels(steps, snippets, runs)
    assert qrels == {
        "1_turn1": {"new": 1},       # its name is in the next reasoning; echo and early are not used
        "1_turn2": {"final": 1},     # named only in the final answer
        "2_turn1": {"zed": 1, "zc_77": 1},  # a parallel call: both query ids get the call's labels
        "2_turn2": {"zed": 1, "zc_77": 1},
    }
    assert stats["calls"] == 4 and stats["calls_labelled"] == 4 and stats["runs_attached"] == 2
    assert stats["pairs"] == 7 and stats["pairs_used"] == 4 and stats["share_used"] == round(4 / 7, 4)


def test_evidence_explains_each_verdict(agent_files):
    steps, snippets, runs = agent_files
    verdicts = {j.docid: j for j in judge_calls(steps, snippets, runs)}
    assert ("name", "velvet lantern", "+1") in verdicts["new"].evidence
    # only the query's words come back: not distinctive
    assert not verdicts["echo"].used and verdicts["echo"].evidence == ()
    # "Quiet Harbor" and 1990 were in the reasoning before the call; their later mention does not count
    assert not verdicts["early"].used and verdicts["early"].evidence == ()
    assert verdicts["final"].used and all(w == "final" for _, _, w in verdicts["final"].evidence)
    assert ("docid", "zc 77", "+1") in verdicts["zc_77"].evidence
    assert not verdicts["other"].used
    assert verdicts["new"].source.endswith("agent_search_steps.jsonl:1")


def test_final_answer_use_needs_the_run_record(agent_files):
    steps, snippets, _ = agent_files
    qrels, stats = utility_qrels(steps, snippets)
    assert "1_turn2" not in qrels  # no later row names Kestrelmoor Atlas; only the final answer did
    assert qrels["1_turn1"] == {"new": 1} and stats["runs_attached"] == 0
    qrels, _ = utility_qrels(steps, snippets, cite_docids=False)
    assert qrels["2_turn1"] == {"zed": 1}


def test_call_ids_are_read_traces_query_ids(agent_files):
    steps, snippets, runs = agent_files
    qrels, _ = utility_qrels(steps, snippets, runs)
    ids = {s.query_id: s for s in read_traces([steps], "tongyi")}
    assert set(qrels) <= set(ids)
    assert ids["2_turn2"].query == "Zed Corp history" and ids["1_turn2"].query == "Jane Roe later films"


def test_missing_files_raise_format_error_naming_them(agent_files, tmp_path):
    steps, snippets, runs = agent_files
    for args in ((tmp_path / "nope.jsonl", snippets, runs), (steps, tmp_path / "nope.jsonl", runs),
                 (steps, snippets, tmp_path / "nope.jsonl")):
        with pytest.raises(FormatError, match="nope.jsonl"):
            utility_qrels(*args)


@pytest.mark.parametrize("which, line, bad", [
    ("steps", 3, "{not json"),
    ("steps", 2, {"query_id": "1", "search_query": "q", "retrieved_docids": "new"}),
    ("snippets", 2, {"docid": "x", "text": 7}),
    ("runs", 2, "[1, 2"),
])
def test_malformed_lines_raise_format_error_naming_file_and_line(agent_files, which, line, bad):
    steps, snippets, runs = agent_files
    path = {"steps": steps, "snippets": snippets, "runs": runs}[which]
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[line - 1] = bad if isinstance(bad, str) else json.dumps(bad)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(FormatError) as err:
        utility_qrels(steps, snippets, runs)
    assert err.value.path == str(path) and err.value.line == line


def test_bad_thresholds_are_usage_errors(agent_files):
    steps, snippets, runs = agent_files
    with pytest.raises(UsageError, match="unknown utility thresholds"):
        utility_qrels(steps, snippets, runs, windw=2)
    with pytest.raises(UsageError):
        UtilityThresholds(max_df=0)


@pytest.mark.shared_data
def test_real_tongyi_counts_are_plausible(shared_data):
    src = shared_data / "qampari_tongyi"
    steps = src / "agent_search_steps.jsonl"
    qrels, stats = utility_qrels(steps, src / "doc_snippets.jsonl", src / "runs" / "infly.jsonl")
    # 1,429 valid calls with results, one of them with an empty query; 5 documents each
    assert stats["calls"] == 1428 and stats["pairs"] == 5 * 1428
    assert stats["runs_attached"] == 20 and stats["trajectories"] == 60 and stats["docs_without_snippet"] == 0
    assert 200 < stats["calls_labelled"] < 1000       # labels are sparse: most calls returned nothing used
    assert 0.03 < stats["share_used"] < 0.3
    assert 1 <= stats["docs_per_labelled_call"] < 3
    assert stats["used_by"]["final_only"] > 0 and stats["used_by"]["later_reasoning"] > 0
    ids = {s.query_id for s in read_traces([steps], "tongyi")}
    assert set(qrels) <= ids and all(set(v.values()) == {1} for v in qrels.values())
