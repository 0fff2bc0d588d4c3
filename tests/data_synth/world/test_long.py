"""The embedded world's long-reasoning mode: the default world untouched, long thinking, keyword queries,
multi-section pages, gold documents still exact from the graph, the CLI flag."""

from __future__ import annotations

import copy
import hashlib
import json
import statistics

import pytest

from hopscotch.data_synth.world import RELATIONS, build_world, write_world
from hopscotch.data_synth.world.long import build_long_world, lengthen_world
from hopscotch.data_synth.world.long_pages import words
from hopscotch.data_synth.world.long_traces import MAX_WORDS, MIN_WORDS

FILES = ("corpus.jsonl", "queries.jsonl", "qrels.tsv", "traces.jsonl", "world.json")
#: sha256 of write_world(build_world(seed=3, docs=300, questions=20)) from before long mode existed: the
#: default world feeds training, so long mode must not move its random sequence (update deliberately only)
DEFAULT_HASHES = {
    "corpus.jsonl": "d9113ec26fec96335bd49cb75dd969cf4bc279f9bb82659381cd3755a5d8c33c",
    "queries.jsonl": "378d374985bc3113c2f6ff5389bc32ddb7ab70cadb6461c57129b9c3a7152ac3",
    "qrels.tsv": "8c75065807b814cfda6fc28cfcff3edd1f7d98521438ffaae4676dfe50ee343f",
    "traces.jsonl": "92f27a739c1db879c9a8c314c8bd3d27cee56a0dfbea5127cc411cee9b80cef3",
    "world.json": "0dd4ef7a08b8df360de5eac4a87227e730677518b6f8ca5e78fd95085c8b5be3",
}


@pytest.fixture(scope="module")
def pair():
    """The same world, default and long."""
    default = build_world(seed=5, docs=800, questions=60)
    return default, lengthen_world(default)


def _by_question(traces):
    out = {}
    for t in traces:
        out.setdefault(t["question_id"], []).append(t)
    return out


def test_default_world_unchanged(tmp_path):
    write_world(build_world(seed=3, docs=300, questions=20), tmp_path / "a")
    write_world(build_world(seed=3, docs=300, questions=20), tmp_path / "b")
    for name in FILES:
        data = (tmp_path / "a" / name).read_bytes()
        assert data == (tmp_path / "b" / name).read_bytes(), name
        assert hashlib.sha256(data).hexdigest() == DEFAULT_HASHES[name], name


def test_lengthen_leaves_its_input_alone():
    w = build_world(seed=3, docs=300, questions=20)
    before = copy.deepcopy((w.documents, w.traces, w.questions))
    long = lengthen_world(w)
    assert (w.documents, w.traces, w.questions) == before and w.extra_stats == {}
    assert long.documents != w.documents and long.traces != w.traces


def test_long_mode_is_deterministic(tmp_path):
    write_world(build_long_world(seed=6, docs=400, questions=30), tmp_path / "a")
    write_world(build_long_world(seed=6, docs=400, questions=30), tmp_path / "b")
    for name in FILES:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    other = build_long_world(seed=7, docs=400, questions=30)
    assert [json.loads(x) for x in (tmp_path / "a" / "traces.jsonl").read_text().splitlines()] != other.traces


def test_same_questions_and_gold(pair):
    default, long = pair
    assert long.questions == default.questions
    assert [(t["question_id"], t["step"], t["gold_docids"]) for t in long.traces] == \
        [(t["question_id"], t["step"], t["gold_docids"]) for t in default.traces]
    assert [d["_id"] for d in long.documents] == [d["_id"] for d in default.documents]
    assert [d["title"] for d in long.documents] == [d["title"] for d in default.documents]


def test_reasoning_length_and_growth(pair):
    _, long = pair
    for steps in _by_question(long.traces).values():
        previous = ""
        for t in steps:
            n = words(t["reasoning"])
            assert MIN_WORDS <= n <= MAX_WORDS, (t["question_id"], t["step"], n)
            assert n > words(previous)
            assert t["reasoning"].startswith(previous)  # later steps carry everything before
            assert t["reasoning"].endswith(t["current_reasoning"])
            previous = t["reasoning"]
    assert statistics.median(words(t["reasoning"]) for t in long.traces) > 500


def test_gold_documents_hold_the_facts(pair):
    _, long = pair
    docs = {d["_id"]: d["text"] for d in long.documents}
    ents = long.entities
    for q in long.questions:
        plan, steps = long.plans[q["_id"]], _by_question(long.traces)[q["_id"]]
        anchor = ents[plan["anchor"]]
        for attr, _ in plan["clues"]:  # step 1: the anchor's clue facts
            base = attr.removesuffix("_decade")
            assert any(str(anchor.attrs[base]) in docs[g] for g in steps[0]["gold_docids"]), (q["_id"], attr)
        for (fact, src), t in zip(plan["hops"], steps[1:]):
            e = ents[src]
            value = ents[e.rels[fact]].name if fact in RELATIONS else str(e.attrs[fact])
            assert all(g in docs for g in t["gold_docids"])
            assert value in docs[t["gold_docids"][0]] and e.name in docs[t["gold_docids"][0]]
        assert q["answers"][0] in docs[steps[-1]["gold_docids"][0]]


def test_reasoning_names_look_alikes(pair):
    _, long = pair
    ents = long.entities
    for qid, steps in _by_question(long.traces).items():
        plan = long.plans[qid]
        anchor = ents[plan["anchor"]]
        path = {anchor.eid} | {src for _, src in plan["hops"]}
        text = steps[-1]["reasoning"]
        same_type = [e for e in ents if e.type == anchor.type and e.eid not in path and e.name in text]
        assert len(same_type) >= 2, qid  # look-alikes of the first entity, named as hypotheses
        others = [e for e in ents if e.eid not in path and e.name in text]
        assert len(others) >= 5, qid
        assert anchor.name not in steps[0]["reasoning"]  # the first search is what finds it
        assert anchor.name in steps[1]["reasoning"]


def test_queries_are_keyword_style_and_keep_the_implicit_share(pair):
    default, long = pair
    ents = long.entities
    for d, t in zip(default.traces, long.traces):
        q = t["query"]
        assert 2 <= len(q.split()) <= 14 and not q.endswith(("?", "."))
        if t["step"] == 1:
            continue
        plan = long.plans[t["question_id"]]
        name = ents[plan["hops"][t["step"] - 2][1]].name
        assert (name in q) == d["query"].startswith(name + " "), (d["query"], q)
        if name not in q:  # an implicit query: the reasoning's last paragraph carries the name
            assert name in t["current_reasoning"].rsplit("\n\n", 1)[-1]
    assert any(t["step"] > 1 and ents[long.plans[t["question_id"]]["hops"][t["step"] - 2][1]].name not in t["query"]
               for t in long.traces)


def test_pages_are_long_and_sectioned(pair):
    default, long = pair
    lengths = []
    for d, page in zip(default.documents, long.documents):
        text = page["text"]
        assert text.startswith(d["text"]) and len(text) > len(d["text"])  # the facts lead the page
        headers = [p.split("\n", 1)[0] for p in text.split("\n\n")[1:]]
        assert len(headers) >= 2 and "See also" in headers
        lengths.append(words(text))
    assert statistics.median(lengths) >= 300 and max(lengths) >= 800


def test_world_json_reports_lengths(tmp_path):
    stats = write_world(build_long_world(seed=8, docs=300, questions=20), tmp_path)
    saved = json.loads((tmp_path / "world.json").read_text())
    assert saved == json.loads(json.dumps(stats)) and saved["long_reasoning"] is True
    for key in ("reasoning_words", "page_words", "current_reasoning_words"):
        assert set(saved[key]) == {"median", "min", "max"}
    assert MIN_WORDS <= saved["reasoning_words"]["min"] <= saved["reasoning_words"]["max"] <= MAX_WORDS


def test_cli_flag_and_trace_reader(tmp_path):
    from hopscotch.data_synth.traces import read_traces
    from hopscotch.retriever.cli import main

    out = tmp_path / "w"
    assert main(["world", "--out", str(out), "--long-reasoning", "--docs", "300", "--questions", "20"]) == 0
    for name in FILES:
        assert (out / name).is_file(), name
    assert json.loads((out / "world.json").read_text())["long_reasoning"] is True
    rows = [json.loads(x) for x in (out / "traces.jsonl").read_text().splitlines()]
    assert set(rows[0]) == {"question_id", "step", "reasoning", "query", "gold_docids", "current_reasoning"}
    steps = list(read_traces([out / "traces.jsonl"], "world"))
    assert len(steps) == len(rows)
    for row, step in zip(rows, steps):
        assert step.current_reasoning == row["current_reasoning"].strip()
        assert step.gold_docids == tuple(row["gold_docids"])


def test_generation_is_fast():
    import time

    t = time.perf_counter()
    w = build_long_world(seed=29, docs=3000, questions=300)
    assert len(w.documents) == 3000 and len(w.questions) == 300
    assert time.perf_counter() - t < 30
