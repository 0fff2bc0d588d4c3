"""Long-reasoning mode of the embedded world: long agent thinking, keyword queries, multi-section pages.

``lengthen_world(world)`` (what :func:`build_long_world` and ``hopscotch world --long-reasoning`` call) returns a
new :class:`~hopscotch.data_synth.world.build.World` built on the same graph, questions and gold documents, drawing
everything new from its own ``random.Random(f"{seed}-long")`` so the default world (and its random sequence) is
untouched:

* every document becomes a web-page-like text (:mod:`hopscotch.data_synth.world.long_pages`);
* each trace step's reasoning is the agent's thinking so far (300-3,000 words, growing within a question) and
  each query is keyword style (:mod:`hopscotch.data_synth.world.long_traces`).

The per-step gold documents stay exact from the graph.
"""

from __future__ import annotations

import random
import statistics
from dataclasses import replace

from hopscotch.data_synth.world.build import World, build_world
from hopscotch.data_synth.world.graph import Graph
from hopscotch.data_synth.world.long_pages import lengthen_documents, words
from hopscotch.data_synth.world.long_traces import TraceWriter


def _spread(values: list[int]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)} if values else {}


def lengthen_world(world: World, seed: int | None = None) -> World:
    """The long-reasoning version of ``world`` (made by ``build_world``); ``world`` itself is unchanged."""
    if not world.plans:
        raise ValueError("lengthen_world needs a world made by build_world (its question plans)")
    seed = world.seed if seed is None else seed
    rng = random.Random(f"{seed}-long")
    graph = Graph(world.entities)
    documents = lengthen_documents(rng, world, graph)
    writer = TraceWriter(rng, world, graph, {d["_id"]: d["text"] for d in world.documents},
                         {d["_id"]: d["text"] for d in documents}, {d["_id"]: d["title"] for d in world.documents})
    by_q: dict[str, list[dict]] = {}
    for t in world.traces:
        by_q.setdefault(t["question_id"], []).append(t)
    traces = []
    for q in world.questions:
        traces += writer.question(world.plans[q["_id"]], by_q[q["_id"]])
    stats = {"long_reasoning": True,
             "reasoning_words": _spread([words(t["reasoning"]) for t in traces]),
             "current_reasoning_words": _spread([words(t["current_reasoning"]) for t in traces]),
             "query_words": _spread([words(t["query"]) for t in traces]),
             "page_words": _spread([words(d["text"]) for d in documents])}
    return replace(world, documents=documents, traces=traces, extra_stats={**world.extra_stats, **stats})


def build_long_world(seed: int = 13, docs: int = 2000, questions: int = 200) -> World:
    """The long-reasoning world: :func:`hopscotch.data_synth.world.build.build_world` lengthened by
    :func:`lengthen_world` (what ``hopscotch world --long-reasoning`` builds)."""
    return lengthen_world(build_world(seed=seed, docs=docs, questions=questions))
