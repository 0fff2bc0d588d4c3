"""The embedded world: determinism, answer uniqueness over the graph, gold documents, file shapes."""

from __future__ import annotations

import json

from hopscotch.data_synth.world import RELATIONS, build_world, write_world
from hopscotch.data_synth.world.graph import Graph


def test_same_seed_same_bytes(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    write_world(build_world(seed=3, docs=400, questions=30), a)
    write_world(build_world(seed=3, docs=400, questions=30), b)
    for name in ("corpus.jsonl", "queries.jsonl", "qrels.tsv", "traces.jsonl", "world.json"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_different_seed_differs():
    assert build_world(seed=1, docs=300, questions=5).documents != build_world(seed=2, docs=300, questions=5).documents


def test_sizes_and_hops():
    w = build_world(seed=5, docs=1000, questions=80)
    assert len(w.documents) == 1000 and len(w.questions) == 80
    assert {q["hops"] for q in w.questions} <= {2, 3, 4}
    assert len({q["text"] for q in w.questions}) == 80  # no duplicate questions


def test_every_answer_is_unique_over_the_graph():
    """Re-derive each question's clue set and relation path and check exactly one entity satisfies it."""
    w = build_world(seed=11, docs=800, questions=60)
    graph = Graph(w.entities)
    names = {e.name for e in w.entities}
    for q in w.questions:
        answer = q["answers"][0]
        # answers that are entity names must belong to exactly one entity
        if answer in names:
            assert sum(e.name == answer for e in w.entities) == 1
    # and the clue evaluation itself: every anchor type's clue sets narrow to a single entity
    checked = 0
    for e in w.entities[:300]:
        import random

        from hopscotch.data_synth.world.questions import _anchor_clues

        clues = _anchor_clues(random.Random(e.eid), graph, e)
        if clues is not None:
            assert graph.matching(e.type, clues) == {e.eid}
            checked += 1
    assert checked > 50


def test_distractors_share_attributes():
    w = build_world(seed=2, docs=1500, questions=10)
    people = [e for e in w.entities if e.type == "person"]
    keys = [(p.attrs["occupation"], p.attrs["birth_year"] // 10) for p in people]
    shared = sum(keys.count(k) > 1 for k in keys)
    assert shared > len(people) // 2  # most people have a look-alike that clues must rule out


def test_gold_documents_state_the_hop_facts():
    w = build_world(seed=4, docs=600, questions=40)
    docs = {d["_id"]: d for d in w.documents}
    by_q = {}
    for t in w.traces:
        by_q.setdefault(t["question_id"], []).append(t)
        assert t["gold_docids"] and all(g in docs for g in t["gold_docids"])
        assert t["reasoning"] and t["query"]
    for q in w.questions:
        steps = by_q[q["_id"]]
        assert [s["step"] for s in steps] == list(range(1, q["hops"] + 1))
        assert set(q["gold_docids"]) == {g for s in steps for g in s["gold_docids"]}
        # the last step's gold document states the answer
        last = steps[-1]["gold_docids"][0]
        assert q["answers"][0] in docs[last]["text"]


def test_relation_types_are_consistent():
    w = build_world(seed=9, docs=500, questions=5)
    for e in w.entities:
        for rel, target in e.rels.items():
            assert RELATIONS[rel][0] == e.type and w.entities[target].type == RELATIONS[rel][1]


def test_written_files_are_beir(small_world):
    from hopscotch.retriever.io.corpus import read_corpus
    from hopscotch.retriever.io.qrels import read_qrels
    from hopscotch.retriever.io.queries import read_queries

    assert len(list(read_corpus(small_world))) == 300
    qs = list(read_queries(small_world / "queries.jsonl"))
    assert len(qs) == 40 and all(q.extra["answers"] for q in qs)
    qrels = read_qrels(small_world / "qrels.tsv")
    assert set(qrels) == {q.qid for q in qs}
    first = json.loads((small_world / "traces.jsonl").read_text().splitlines()[0])
    assert set(first) == {"question_id", "step", "reasoning", "query", "gold_docids"}


def test_twenty_thousand_docs_quickly():
    import time

    t = time.perf_counter()
    w = build_world(seed=13, docs=20000, questions=500)
    assert len(w.documents) == 20000
    assert time.perf_counter() - t < 60
