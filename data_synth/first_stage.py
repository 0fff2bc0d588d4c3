"""Where DR-Synth's candidates come from: the first stage that mines each step's hard negatives.

``--candidates`` (:data:`CANDIDATE_SOURCES`):

* ``bm25-reasoning`` (the default): reasoning-aware BM25, the first stage an agent is served: a step with a
  reasoning is searched by its query expanded with it, exactly as ``hopscotch search --reasoning`` does
  (:class:`~hopscotch.retriever.searchers.bm25.BM25Searcher` with its default expansion,
  :data:`~hopscotch.retriever.searchers.bm25_expansion.DEFAULT_BM25_EXPANSION`); a step without one is plain BM25.
* ``bm25``: plain BM25 of the step's query alone (DR-Synth's candidates before reasoning-aware search).
* ``hybrid``: the reasoning-aware hybrid (that BM25 fused with a dense index's list, the hybrid searcher's default
  fusion), over ``--candidate-index DIR`` (``hopscotch index`` of the same corpus; its model encodes the step as
  ``hopscotch search --reasoning`` would).

Each source gives the step's top ``depth`` ``(docid, score)`` and, for the gold documents it did not return, a
score in the same scale (:meth:`FirstStage.score_documents`): BM25 exactly (the expanded query's weighted score for
reasoning-aware BM25); the hybrid cannot score a document outside its fused list, so such a gold document scores
below every hit. The oracle and the labels do not change with the source: the lexical oracle's query relevance stays
the step query's plain BM25 score.

Example (not run)::

    stage = first_stage("bm25-reasoning", bm25_index)
    [hits] = stage.search(["Gummo director"], [step], k=50)       # step: a TraceStep (its reasoning, context)
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.queries import Query
from hopscotch.retriever.model.query_input import as_context
from hopscotch.retriever.searchers import build_searcher
from hopscotch.retriever.searchers.bm25 import BM25Searcher
from hopscotch.retriever.searchers.bm25_expansion import DEFAULT_BM25_EXPANSION
from hopscotch.retriever.searchers.fusion import default_settings

CANDIDATE_SOURCES = ("bm25-reasoning", "bm25", "hybrid")
DEFAULT_CANDIDATES = "bm25-reasoning"


class FirstStage:
    """Plain BM25 of the step query (``bm25``): the base of the others."""

    name = "bm25"
    #: whether a step's reasoning may change its candidates
    reads_reasoning = False

    def __init__(self, index):
        self.index = index

    def search(self, queries: Sequence[str], contexts: Sequence, k: int) -> list[list[tuple[str, float]]]:
        """The top ``k`` ``(docid, score)`` of each step (``contexts[i]``: its reasoning, a string or a record with
        the context fields, such as a TraceStep)."""
        return self.index.search(list(queries), k=k)

    def score_documents(self, query: str, context, docids: Sequence[str], hits: dict[str, float]) -> list[float]:
        """Each of ``docids``' score for the step: its hit's (``hits``), else the source's own."""
        missing = [d for d in docids if d not in hits]
        scored = dict(zip(missing, self._score_missing(query, context, missing))) if missing else {}
        return [hits[d] if d in hits else float(scored[d]) for d in docids]

    def _score_missing(self, query: str, context, docids: list[str]) -> Sequence[float]:
        return self.index.score_documents(query, docids)


class ReasoningBM25(FirstStage):
    """Reasoning-aware BM25 (``bm25-reasoning``), through the BM25 searcher and its default expansion."""

    name = "bm25-reasoning"
    reads_reasoning = True

    def __init__(self, index):
        super().__init__(index)
        self.searcher = BM25Searcher(index)  # expansion None: DEFAULT_BM25_EXPANSION, as hopscotch search's default

    def search(self, queries, contexts, k):
        return self.searcher.search_batch(step_queries(queries, contexts), k)

    def _score_missing(self, query, context, docids):
        parts = self.searcher.expansion.text_parts(query, context)
        if parts is None:
            return self.index.score_documents(query, docids)
        scores = self.index.weighted_scores(self.index.term_weights(parts))
        rows = [self.index.row(d) for d in docids]
        return [0.0 if r is None else float(scores[r]) for r in rows]


class HybridStage(FirstStage):
    """The reasoning-aware hybrid (``hybrid``): BM25 as above fused with ``dense_index``'s list."""

    name = "hybrid"
    reads_reasoning = True

    def __init__(self, index, dense_index: str | os.PathLike):
        super().__init__(index)
        self.searcher = build_searcher("hybrid", bm25=index, index=str(dense_index))

    def search(self, queries, contexts, k):
        return self.searcher.search_batch(step_queries(queries, contexts), k)

    def score_documents(self, query, context, docids, hits):
        floor = min(hits.values(), default=0.0) - 1.0  # outside the fused list: below every hit
        return [hits.get(d, floor) for d in docids]


def step_queries(queries: Sequence[str], contexts: Sequence) -> list[Query]:
    """Each step's query with its context (a reasoning string, or a record with the context fields such as a
    TraceStep), searched reasoning-aware: the query a harness sends for that step."""
    out = []
    for text, context in zip(queries, contexts):
        c = as_context(context)
        out.append(Query(text, c.reasoning, current_reasoning=c.current_reasoning, prior_queries=c.prior_queries,
                         prior_results=c.prior_results, reasoning_aware=True))
    return out


def first_stage(name: str, index, dense_index: str | os.PathLike | None = None) -> FirstStage:
    """The candidate source ``name`` (:data:`CANDIDATE_SOURCES`) over a BM25 index (and, for ``hybrid``, a dense
    index folder)."""
    if name == "bm25":
        return FirstStage(index)
    if name == "bm25-reasoning":
        return ReasoningBM25(index)
    if name == "hybrid":
        if dense_index is None:
            raise UsageError("--candidates hybrid needs --candidate-index DIR (hopscotch index of the same corpus)")
        return HybridStage(index, dense_index)
    raise UsageError(f"--candidates: expected one of {', '.join(CANDIDATE_SOURCES)}, got {name!r}")


def describe_source(name: str) -> str:
    """The source ``name`` in words, with the defaults it searches with (the BM25 expansion, the hybrid's fusion):
    recorded in the stats and in the work files' manifest (a changed default is another run)."""
    if name == "bm25":
        return "bm25 (the query alone)"
    expansion = f"bm25 {DEFAULT_BM25_EXPANSION.describe()}"
    if name == "bm25-reasoning":
        return f"reasoning-aware {expansion}"

    return f"reasoning-aware hybrid ({expansion}; {default_settings().describe()})"


def plain_query_scores(index, query: str, docids: Sequence[str]) -> list[float]:
    """The step query's plain BM25 score of each document (the lexical oracle's query relevance)."""
    return [float(s) for s in np.asarray(index.score_documents(query, list(docids)), dtype=np.float64)]
