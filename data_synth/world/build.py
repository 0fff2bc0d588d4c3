"""The embedded world as a whole: the :class:`World` record, :func:`build_world` (graph, documents,
questions and traces from one seed) and :func:`write_world` (a BEIR folder plus ``traces.jsonl``)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from hopscotch.data_synth.trace_readers import write_trace_file
from hopscotch.data_synth.world.documents import make_documents
from hopscotch.data_synth.world.graph import Entity, Graph, make_entities
from hopscotch.data_synth.world.questions import make_question
from hopscotch.retriever.io.common import write_json, write_jsonl
from hopscotch.retriever.io.qrels import write_qrels


@dataclass
class World:
    seed: int
    entities: list[Entity]
    documents: list[dict]            # {_id, title, text}
    fact_doc: dict                   # (eid, fact) -> docid
    questions: list[dict]            # {_id, text, answers, hops}
    traces: list[dict]               # {question_id, step, reasoning, query, gold_docids}
    plans: dict = field(default_factory=dict, repr=False)  # qid -> how the question was made (not written)
    extra_stats: dict = field(default_factory=dict)       # merged into world.json (long mode's lengths)


def build_world(seed: int = 13, docs: int = 2000, questions: int = 200) -> World:
    """Build the world deterministically from ``seed``: about ``docs`` documents and ``questions`` questions.
    Its long-reasoning version is :func:`hopscotch.data_synth.world.long.build_long_world` (made from this one
    with a separate random sequence, so the default world is the same either way)."""
    rng = random.Random(seed)
    scale = 1.3
    while True:  # grow the graph until it renders at least `docs` documents, then cut to size
        entities = make_entities(rng, max(40, int(docs / scale)))
        documents, fact_doc = make_documents(rng, entities)
        if len(documents) >= docs:
            break
        scale *= 0.95
    documents = documents[:docs] if len(documents) > docs else documents
    kept = {d["_id"] for d in documents}
    fact_doc = {k: v for k, v in fact_doc.items() if v in kept}
    graph = Graph(entities)
    qs, traces, seen, plans = [], [], set(), {}
    attempts = 0
    while len(qs) < questions:
        attempts += 1
        if attempts > 50 * questions + 1000:
            raise RuntimeError(f"could only make {len(qs)} unique questions from a world of {len(documents)} docs")
        made = make_question(rng, graph, fact_doc, f"wq{len(qs):05d}")
        if made is None or made[0]["text"] in seen:
            continue
        if any(d not in kept for t in made[1] for d in t["gold_docids"]):  # a fact cut with the corpus
            continue
        seen.add(made[0]["text"])
        qs.append(made[0])
        traces.extend(made[1])
        plans[made[0]["_id"]] = made[2]
    return World(seed, entities, documents, fact_doc, qs, traces, plans)


def write_world(world: World, out: str | Path) -> dict:
    """Write ``corpus.jsonl``, ``queries.jsonl``, ``qrels.tsv``, ``traces.jsonl`` and ``world.json``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(out / "corpus.jsonl", world.documents)
    write_jsonl(out / "queries.jsonl", ({k: v for k, v in q.items() if k != "gold_docids"} for q in world.questions))
    write_qrels(out / "qrels.tsv", {q["_id"]: {d: 1 for d in q["gold_docids"]} for q in world.questions})
    write_trace_file(out / "traces.jsonl", world.traces)
    stats = {"seed": world.seed, "entities": len(world.entities), "documents": len(world.documents),
             "questions": len(world.questions), "trace_steps": len(world.traces),
             "hops": {str(h): sum(q["hops"] == h for q in world.questions) for h in (2, 3, 4)}, **world.extra_stats}
    write_json(out / "world.json", stats)
    return stats
