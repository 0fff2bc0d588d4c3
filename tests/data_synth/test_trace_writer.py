"""The generic trace format's one writer (data_synth/trace_readers.py): key order, omitted fields, atomic file,
and a round trip through the generic reader."""

from __future__ import annotations

import json

from hopscotch.data_synth.trace_readers import TRACE_KEYS, trace_line, write_trace_file
from hopscotch.data_synth.traces import read_traces

STEPS = [
    {"question_id": "q1", "step": 1, "reasoning": "Who wrote Ü?", "query": "author of Ü",
     "current_reasoning": "Who wrote Ü?", "prior_queries": [], "prior_results": None, "gold_docids": ["d1"]},
    {"question_id": "q1", "step": 2, "reasoning": "Who wrote Ü?\nÜ by Ann. Answer: Ann.", "query": "Ann birthplace",
     "current_reasoning": "Ü by Ann. Answer: Ann.", "prior_queries": ("author of Ü",),
     "prior_results": ({"title": "Ü", "snippet": "Ü is a novel by Ann."},), "gold_docids": ("d2", "d3")},
]


def test_line_has_the_format_key_order_and_keeps_non_ascii():
    line = trace_line(**STEPS[1])
    assert line.endswith("\n") and "\n" not in line[:-1] and "Ü" in line
    obj = json.loads(line)
    assert tuple(obj) == TRACE_KEYS
    assert obj["prior_queries"] == ["author of Ü"] and obj["gold_docids"] == ["d2", "d3"]
    assert json.loads(trace_line(**STEPS[0]))["prior_results"] is None  # a given None is written as null


def test_fields_left_out_are_not_written():
    """The embedded world writes only question_id, step, reasoning, query, gold_docids."""
    line = trace_line(question_id="wq1", step=1, reasoning="r", query="q", gold_docids=["w1"])
    assert line == '{"question_id": "wq1", "step": 1, "reasoning": "r", "query": "q", "gold_docids": ["w1"]}\n'


def test_file_round_trips_through_the_generic_reader(tmp_path):
    path = tmp_path / "traces.jsonl"
    assert write_trace_file(path, STEPS) == 2
    assert path.read_text(encoding="utf-8") == "".join(trace_line(**s) for s in STEPS)
    assert not [p for p in tmp_path.iterdir() if p != path]  # no temporary file left behind
    steps = list(read_traces([path], "generic"))
    assert [(s.question_id, s.step, s.query, s.gold_docids) for s in steps] == [
        ("q1", 1, "author of Ü", ("d1",)), ("q1", 2, "Ann birthplace", ("d2", "d3"))]
    assert steps[1].reasoning == STEPS[1]["reasoning"] and steps[1].current_reasoning == STEPS[1]["current_reasoning"]
    assert steps[1].prior_queries == ("author of Ü",) and steps[0].prior_results is None
    assert [dict(r) for r in steps[1].prior_results] == [{"title": "Ü", "snippet": "Ü is a novel by Ann."}]
