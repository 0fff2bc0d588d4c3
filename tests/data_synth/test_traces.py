"""Trace readers: IRCoT, Tongyi, BrowseComp-Plus runs, world / generic JSONL, detection and errors."""

from __future__ import annotations

import json

import pytest

from hopscotch.data_synth.trace_readers import detect_format, parse_nested
from hopscotch.data_synth.trace_step import TraceStep
from hopscotch.data_synth.traces import question_only_steps, read_traces
from hopscotch.retriever.errors import FormatError, UsageError


def write_jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_ircot_new_sentence_is_query_and_earlier_cot_is_reasoning(tmp_path):
    f = write_jsonl(tmp_path / "cot.jsonl", [
        {"qid": "q1", "question": "Q?", "step": 1, "cumulative_cot": "Shirley Temple played her.",
         "new_sentence": "Shirley Temple played her."},
        {"qid": "q1", "question": "Q?", "step": 2,
         "cumulative_cot": "Shirley Temple played her. She was Chief of Protocol.  ",
         "new_sentence": "She was Chief of Protocol."},
        {"qid": "q1", "question": "Q?", "step": 3, "cumulative_cot": "\"So the answer is X.\"",
         "new_sentence": ""},
    ])
    steps = list(read_traces([f]))
    assert [(s.step, s.query) for s in steps] == [(1, "Shirley Temple played her."),
                                                  (2, "She was Chief of Protocol."), (3, "")]
    assert steps[0].reasoning == ""
    assert steps[1].reasoning == "Shirley Temple played her."
    # an empty sentence is kept as a step (counted, then dropped by the pipeline); reasoning falls back
    assert steps[2].reasoning == "Shirley Temple played her. She was Chief of Protocol."
    assert steps[1].query_id == "q1_turn2" and steps[1].source.endswith("cot.jsonl:2")


def test_tongyi_parallel_queries_become_one_step_each_sharing_context(tmp_path):
    f = write_jsonl(tmp_path / "steps.jsonl", [
        {"query_id": "7", "reasoning": "Think A", "search_query": ["a one", "a two"], "valid": True},
        {"query_id": "7", "reasoning": "Think B", "search_query": None, "valid": False},
        {"query_id": "7", "reasoning": "Think C", "search_query": "\"quoted\" query", "valid": False},
        {"query_id": "8", "reasoning": "Think D", "search_query": "[bracketed query", "valid": True},
    ])
    steps = list(read_traces([f]))
    # a row's reasoning is the thinking since the last tool result: it is current_reasoning, and the
    # question's rows so far make the full reasoning
    assert [(s.query_id, s.current_reasoning, s.query, s.failed) for s in steps] == [
        ("7_turn1", "Think A", "a one", False), ("7_turn2", "Think A", "a two", False),
        ("7_turn3", "Think B", "", True), ("7_turn4", "Think C", "\"quoted\" query", True),
        ("8_turn1", "Think D", "[bracketed query", False)]
    assert [s.reasoning for s in steps] == ["Think A", "Think A", "Think A\n\nThink B",
                                            "Think A\n\nThink B\n\nThink C", "Think D"]
    assert [s.prior_queries for s in steps] == [(), (), ("a one", "a two"), ("a one", "a two"), ()]
    assert all(s.prior_results is None for s in steps)  # no doc_snippets.jsonl beside the file


def test_browsecomp_run_file_with_a_question_twice_is_refused(tmp_path):
    """A duplicated run record would be replayed (and synthesised) twice under new step numbers."""
    f = write_jsonl(tmp_path / "run.jsonl", [_run_record(False), _run_record(False)])
    with pytest.raises(FormatError, match=r"run\.jsonl:2: .*already read at line 1"):
        list(read_traces([f], "browsecomp"))


def test_tongyi_runs_of_one_question_by_other_retrievers_do_not_mix(tmp_path):
    """qampari_tongyi holds three runs of each question (one per retriever), interleaved by question: each
    run's reasoning, earlier queries and results are its own; step ids stay unique per question."""
    f = write_jsonl(tmp_path / "steps.jsonl", [
        {"query_id": "7", "retriever": "infly", "reasoning": "Infly thinks", "search_query": "q1", "valid": True},
        {"query_id": "7", "retriever": "infly", "reasoning": "Infly again", "search_query": "q2", "valid": True},
        {"query_id": "7", "retriever": "bm25", "reasoning": "Other run", "search_query": "r1", "valid": True},
        {"query_id": "7", "retriever": "bm25", "reasoning": "Other again", "search_query": "r2", "valid": True},
    ])
    steps = list(read_traces([f]))
    assert [s.query_id for s in steps] == ["7_turn1", "7_turn2", "7_turn3", "7_turn4"]
    assert [s.reasoning for s in steps] == ["Infly thinks", "Infly thinks\n\nInfly again", "Other run",
                                            "Other run\n\nOther again"]
    assert [s.prior_queries for s in steps] == [(), ("q1",), (), ("r1",)]


def _run_record(as_repr: bool) -> dict:
    items = [
        {"type": "reasoning", "tool_name": None, "arguments": None, "output": "First thought"},
        {"type": "reasoning", "tool_name": None, "arguments": None, "output": "Plan: search two things"},
        {"type": "tool_call", "tool_name": "search", "arguments": {"query": ["x one", "x two"]},
         "output": "A search for 'x one' found 5 results"},
        {"type": "tool_call", "tool_name": "visit", "arguments": {"url": ["http://e.org"]}, "output": "page"},
        {"type": "reasoning", "tool_name": None, "arguments": None, "output": ["Then", "look again"]},
        {"type": "tool_call", "tool_name": "search", "arguments": {"query": "y"},
         "output": "Error: Tool call is not a valid JSON."},
        {"type": "output_text", "tool_name": None, "arguments": None, "output": "The answer"},
    ]
    if as_repr:  # nested fields as Python-repr strings, as in qampari_tongyi/runs/infly.jsonl's sibling layouts
        for it in items:
            if isinstance(it["arguments"], dict):
                it["arguments"] = repr(it["arguments"])
        return {"query_id": "3", "status": "completed", "result": repr(items)}
    return {"query_id": "3", "status": "completed", "result": items}


@pytest.mark.parametrize("as_repr", [False, True])
def test_browsecomp_run_records_json_objects_or_python_repr(tmp_path, as_repr):
    f = write_jsonl(tmp_path / "run.jsonl", [_run_record(as_repr)])
    steps = list(read_traces([f]))
    plan = "First thought\n\nPlan: search two things"
    assert [(s.step, s.reasoning, s.current_reasoning, s.query, s.failed) for s in steps] == [
        (1, plan, plan, "x one", False), (2, plan, plan, "x two", False),
        (3, plan + "\n\nThen\nlook again", "Then\nlook again", "y", True)]
    assert [s.prior_queries for s in steps] == [(), (), ("x one", "x two")]
    # the last tool output before the call (the visit's page) is the previous results
    assert [s.prior_results for s in steps] == [(), (), ({"title": "", "snippet": "page"},)]


def test_browsecomp_run_folder_of_json_files(tmp_path):
    folder = tmp_path / "runs"
    folder.mkdir()
    for qid in ("b", "a"):
        rec = _run_record(False)
        rec["query_id"] = qid
        (folder / f"run_{qid}.json").write_text(json.dumps(rec))
    steps = list(read_traces([folder]))
    assert [s.query_id for s in steps] == ["a_turn1", "a_turn2", "a_turn3", "b_turn1", "b_turn2", "b_turn3"]


def test_world_and_generic_traces(tmp_path):
    world = write_jsonl(tmp_path / "traces.jsonl", [
        {"question_id": "wq1", "step": 1, "reasoning": "r1", "query": "q1", "gold_docids": ["w1", "w2"]},
        {"question_id": "wq1", "step": 2, "reasoning": "r2", "query": "q2", "gold_docids": ["w3"]}])
    steps = list(read_traces([world]))
    assert steps[0].gold_docids == ("w1", "w2") and steps[1].query_id == "wq1_turn2"
    generic = write_jsonl(tmp_path / "generic.jsonl", [
        {"question_id": "g", "reasoning": None, "query": " first "}, {"qid": "g", "query": "second"}])
    steps = list(read_traces([generic]))
    assert [(s.query_id, s.reasoning, s.query, s.gold_docids) for s in steps] == [
        ("g_turn1", "", "first", None), ("g_turn2", "", "second", None)]


def test_formats_mix_across_files_and_format_can_be_forced(tmp_path):
    a = write_jsonl(tmp_path / "a.jsonl", [{"question_id": "1", "reasoning": "", "query": "x"}])
    b = write_jsonl(tmp_path / "b.jsonl", [{"query_id": "2", "reasoning": "r", "search_query": ["y", "z"]}])
    assert [s.query_id for s in read_traces([a, b])] == ["1_turn1", "2_turn1", "2_turn2"]
    with pytest.raises(FormatError, match=r"a\.jsonl:1: expected a Tongyi search step"):
        list(read_traces([a], trace_format="tongyi"))
    with pytest.raises(UsageError, match="unknown trace format"):
        list(read_traces([a], trace_format="xml"))


def test_detect_format():
    assert detect_format({"qid": 1, "cumulative_cot": "", "new_sentence": ""}) == "ircot"
    assert detect_format({"query_id": 1, "search_query": "x", "reasoning": ""}) == "tongyi"
    assert detect_format({"query_id": 1, "result": []}) == "browsecomp"
    assert detect_format({"question_id": 1, "query": "x", "gold_docids": []}) == "world"
    assert detect_format({"question_id": 1, "query": "x"}) == "generic"
    assert detect_format({"text": "x"}) is None


@pytest.mark.parametrize("rows, message", [
    (['{"qid": "q1", "step": 1, "cumulative_cot": "a", "new_sentence": "a"}', '{"qid": '],
     r"bad\.jsonl:2: expected a JSON trace record"),
    ([{"text": "what"}], r"bad\.jsonl:1: expected a trace record of a known format"),
    ([{"question_id": "q", "query": "x"}, {"question_id": "q", "query": 5}],
     r"bad\.jsonl:2: expected a trace step .* string 'query'"),
    ([{"question_id": "q", "query": "x", "step": "two"}], r"bad\.jsonl:1: expected 'step' to be an integer"),
    ([{"query_id": "q", "result": "[{'type': 'reasoning', 'output': x}]"}],
     r"bad\.jsonl:1: expected 'result' as a JSON object or a Python literal"),
    ([{"query_id": "q", "result": 5}], r"bad\.jsonl:1: expected 'result' to be a list"),
    ([{"query_id": "q", "search_query": {"a": 1}}], r"bad\.jsonl:1: expected 'search_query' to be a string"),
])
def test_malformed_traces_name_file_and_line(tmp_path, rows, message):
    f = write_jsonl(tmp_path / "bad.jsonl", rows)
    with pytest.raises(FormatError, match=message):
        list(read_traces([f]))


def test_missing_trace_path_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        list(read_traces([tmp_path / "nope.jsonl"]))


def test_parse_nested_keeps_plain_strings():
    assert parse_nested("plain", "f", 1, "x") == "plain"
    assert parse_nested("{'a': [1, None]}", "f", 1, "x") == {"a": [1, None]}
    assert parse_nested('{"a": null}', "f", 1, "x") == {"a": None}
    assert parse_nested("[not python", "f", 1, "x", strict=False) == "[not python"


def test_question_only_steps():
    class Q:
        def __init__(self, qid, text):
            self.qid, self.text = qid, text

    steps = list(question_only_steps([Q("a", " Who? "), Q("b", "What?")]))
    assert steps == [TraceStep("a", 0, "", "Who?", source="question"), TraceStep("b", 0, "", "What?", source="question")]


# -- the shared real traces ----------------------------------------------------------------------------------

def test_every_tongyi_search_step_parses(shared_data):
    path = shared_data / "qampari_tongyi" / "agent_search_steps.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert len(records) == 1865
    expected = sum(len(r["search_query"]) if isinstance(r["search_query"], list) else 1 for r in records)
    steps = list(read_traces([path]))
    assert len(steps) == expected == 2232
    assert len({s.query_id for s in steps}) == len(steps)
    assert sum(not s.query for s in steps) == sum(r["search_query"] is None for r in records)
    assert {s.question_id for s in steps} == {r["query_id"] for r in records}
    assert sum(s.failed for s in steps) == sum(
        len(r["search_query"]) if isinstance(r["search_query"], list) else 1 for r in records if r["valid"] is False)


def test_every_raw_run_record_parses(shared_data):
    path = shared_data / "qampari_tongyi" / "runs" / "infly.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert len(records) == 20
    steps = list(read_traces([path]))
    assert {s.question_id for s in steps} == {r["query_id"] for r in records}
    calls = [it for r in records for it in r["result"]
             if it["type"] == "tool_call" and it["tool_name"] in ("search", "google_scholar")]
    n_queries = sum(len(q) if isinstance(q := json.loads(it["arguments"])["query"], list) else 1 for it in calls)
    assert len(calls) == 575 and len(steps) == n_queries  # 574 'search' calls + 1 'google_scholar' call
    assert all(s.query for s in steps) and all(s.reasoning for s in steps)


def test_ircot_cot_steps_parse(shared_data):
    steps = list(read_traces([shared_data / "hotpotqa_ircot" / "cot_steps.jsonl"]))
    assert len(steps) == 3128 and len({s.question_id for s in steps}) == 500
    first = [s for s in steps if s.step == 1]
    assert all(s.reasoning == "" for s in first)
    assert sum(not s.query for s in steps) == 58


# -- context fields and query input variants on every format ---------------------------------------------------

VARIANTS = ["query", "prior_queries", "reasoning", "current_reasoning", "reasoning_tail:6", "with_documents"]
LONG = " ".join(f"idea{i} leads on" for i in range(150))  # far beyond the 48-token limit below


def _ircot(tmp_path):
    cot2 = "Shirley Temple played Corliss. " + LONG + " She was an ambassador."
    return write_jsonl(tmp_path / "cot.jsonl", [
        {"qid": "q", "step": 1, "cumulative_cot": "Shirley Temple played Corliss.",
         "new_sentence": "Shirley Temple played Corliss.", "retrieved_titles_after_step": ["Kiss and Tell"]},
        {"qid": "q", "step": 2, "cumulative_cot": cot2, "new_sentence": "She was an ambassador.",
         "retrieved_titles_after_step": ["Kiss and Tell", "Shirley Temple"]}])


def _tongyi(tmp_path):
    write_jsonl(tmp_path / "doc_snippets.jsonl", [{"docid": "d1", "text": "[Kiss and Tell...]\nKiss and Tell is a film."},
                                                  {"docid": "d2", "text": "Shirley Temple was a diplomat."}])
    return write_jsonl(tmp_path / "agent_search_steps.jsonl", [
        {"query_id": "q", "reasoning": "", "search_query": ["corliss archer actress", "kiss and tell cast"],
         "retrieved_docids": ["d1", "d2", "d9"], "valid": True},
        {"query_id": "q", "reasoning": LONG, "search_query": "shirley temple government position",
         "retrieved_docids": [], "valid": True}])


def _browsecomp(tmp_path):
    output = ("A search for 'corliss archer actress' found 2 results:\n\n## Web Results\n"
              "1. <docid: d1> [Kiss and Tell...]\nKiss and Tell is a film.\n\n"
              "2. <docid: d2> [Shirley...]\nShirley Temple was a diplomat.\n")
    items = [{"type": "tool_call", "tool_name": "search",
              "arguments": {"query": ["corliss archer actress", "kiss and tell cast"]}, "output": output},
             {"type": "reasoning", "output": LONG},
             {"type": "tool_call", "tool_name": "search", "arguments": '{"query": "shirley temple government position"}',
              "output": "Error: bad call"}]
    return write_jsonl(tmp_path / "run.jsonl", [{"query_id": "q", "result": items}])


def _generic(tmp_path):
    return write_jsonl(tmp_path / "traces.jsonl", [
        {"question_id": "q", "reasoning": "", "query": "corliss archer actress", "gold_docids": ["d1"]},
        {"question_id": "q", "reasoning": LONG, "query": "shirley temple government position",
         "prior_results": [{"title": "Kiss and Tell", "snippet": "Kiss and Tell is a film."}]}])


FORMATS = {"ircot": _ircot, "tongyi": _tongyi, "browsecomp": _browsecomp, "world": _generic}


def test_context_fields_per_format(tmp_path):
    for sub in "itbg":
        (tmp_path / sub).mkdir()
    ir = list(read_traces([_ircot(tmp_path / "i")]))
    assert (ir[0].reasoning, ir[0].current_reasoning, ir[0].prior_queries, ir[0].prior_results) == \
        ("", "Shirley Temple played Corliss.", (), None)
    assert ir[1].current_reasoning == "She was an ambassador." and ir[1].prior_queries == ("Shirley Temple played Corliss.",)
    assert ir[1].prior_results == ({"title": "Kiss and Tell", "snippet": ""},)
    ty = list(read_traces([_tongyi(tmp_path / "t")]))  # the snippets file beside it is found
    assert [s.query for s in ty] == ["corliss archer actress", "kiss and tell cast", "shirley temple government position"]
    assert ty[0].prior_results == ty[1].prior_results == () and ty[0].prior_queries == ty[1].prior_queries == ()
    assert ty[2].prior_results == ({"title": "", "snippet": "Kiss and Tell is a film."},
                                   {"title": "", "snippet": "Shirley Temple was a diplomat."})
    assert ty[2].prior_queries == ("corliss archer actress", "kiss and tell cast")
    assert ty[2].reasoning == ty[2].current_reasoning == LONG
    assert len(list(read_traces([tmp_path / "t"]))) == 3  # a folder read skips doc_snippets.jsonl
    bc = list(read_traces([_browsecomp(tmp_path / "b")]))
    assert [(s.reasoning, s.current_reasoning, s.prior_results) for s in bc[:2]] == [("", "", ())] * 2
    assert bc[2].prior_results == ({"title": "", "snippet": "Kiss and Tell is a film."},
                                   {"title": "", "snippet": "Shirley Temple was a diplomat."})
    assert (bc[2].reasoning, bc[2].current_reasoning, bc[2].failed) == (LONG, LONG, True)
    ge = list(read_traces([_generic(tmp_path / "g")]))
    assert (ge[0].current_reasoning, ge[0].prior_queries, ge[0].prior_results) == ("", (), None)
    assert ge[1].prior_queries == ("corliss archer actress",) and ge[1].current_reasoning == LONG


def test_generic_derives_current_reasoning_from_cumulative_reasoning(tmp_path):
    f = write_jsonl(tmp_path / "traces.jsonl", [
        {"question_id": "w", "reasoning": "Need the director.", "query": "a", "gold_docids": []},
        {"question_id": "w", "reasoning": "Need the director. It is Korine. Next the year.", "query": "b",
         "gold_docids": []},
        {"question_id": "w", "reasoning": "Unrelated restart.", "query": "c", "gold_docids": [],
         "current_reasoning": "given", "prior_queries": ["z"]}])
    steps = list(read_traces([f]))
    assert [s.current_reasoning for s in steps] == ["Need the director.", "It is Korine. Next the year.", "given"]
    assert [s.prior_queries for s in steps] == [(), ("a",), ("z",)]
    with pytest.raises(FormatError, match=r"bad\.jsonl:1: expected 'prior_queries' as a list of strings"):
        list(read_traces([write_jsonl(tmp_path / "bad.jsonl", [{"question_id": "w", "query": "a",
                                                                 "prior_queries": "a"}])]))


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("variant", VARIANTS)
def test_every_variant_on_every_trace_format(tmp_path, tiny_bert_dir, fmt, variant):
    from transformers import AutoTokenizer

    from hopscotch.retriever.model.query_input import reasoning_text
    from hopscotch.retriever.model.query_template import format_queries

    tok = AutoTokenizer.from_pretrained(str(tiny_bert_dir))
    steps = list(read_traces([FORMATS[fmt](tmp_path)]))
    texts = format_queries(tok, 48, [s.query for s in steps], steps, query_input=variant)
    for step, text in zip(steps, texts):
        assert len(tok(text)["input_ids"]) <= 48  # reasoning longer than the limit is cut, never the query
        assert text == step.query if variant == "query" else text.endswith(f"\n\nQuery: {step.query}")
    if variant in ("prior_queries", "with_documents") or (variant != "query" and fmt != "ircot"):
        assert texts[0].startswith("Reasoning: Empty\n\n")  # the first step: empty reasoning, nothing before
    if fmt in ("tongyi", "browsecomp") and variant != "query":  # parallel queries share the context
        assert texts[0].rsplit("Query: ", 1)[0] == texts[1].rsplit("Query: ", 1)[0]
    last = texts[-1]
    if variant in ("reasoning", "reasoning_tail:6") or (variant == "current_reasoning" and fmt != "ircot"):
        assert "idea149 leads on" in last and "idea0 " not in last
    if variant == "reasoning_tail:6":
        assert len(tok(last.split("\n\nQuery:")[0][len("Reasoning: "):], add_special_tokens=False)["input_ids"]) <= 6
    if variant == "prior_queries" and fmt != "ircot":
        assert last.startswith("Reasoning: corliss archer actress")
    if variant == "current_reasoning" and fmt == "ircot":  # IRCoT writes one sentence after a retrieval
        assert last == "Reasoning: She was an ambassador.\n\nQuery: She was an ambassador."
    if variant == "with_documents":  # (cut from the left with the oldest text when the reasoning is long)
        assert "Results:\nKiss and Tell" in reasoning_text(variant, steps[-1])
