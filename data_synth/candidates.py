"""Candidate windows: the first stage's top-``depth`` for a step, with the question's gold documents put in.

The first stage (:mod:`~hopscotch.data_synth.first_stage`, ``--candidates``) is reasoning-aware BM25 by default
(the step's query expanded with its reasoning), plain BM25 of the query, or the reasoning-aware hybrid; below,
"score" is its score.

The window keeps the top ``depth - g`` hits that are not gold and adds ``g`` gold documents
(``g = min(max_gold, gold documents present in the corpus)``; when there are more gold documents than
``max_gold``, the ones the first stage scores highest for this step), de-duplicated, so it stays ``depth``
long. The window is ordered by the step's first-stage score (docid breaks ties), gold or not.

A short query (``"Animorphs"``) may match fewer than ``depth`` passages. Such a window is *backfilled*
from plain BM25 searches with the step's fallback queries (the pipeline passes reasoning + query, then the
question), in their order, after the step's own hits; a backfilled passage keeps a score of 0.

Example::

    gen = CandidateGenerator(BM25Index.build(docs), depth=50, max_gold=5)
    [window] = gen.windows(["Shirley Temple government position"], [["ic00001", "ic00006"]])
    window[0]   # ('ic00001', 12.3, True)
"""

from __future__ import annotations

from collections.abc import Sequence

from hopscotch.data_synth.first_stage import FirstStage
from hopscotch.retriever.index.bm25 import BM25Index

Window = list[tuple[str, float, bool]]  # (docid, first-stage score of the step, is gold)


class CandidateGenerator:
    """First-stage retrieval plus gold insertion over one corpus (``stage``: plain BM25 of ``index`` when None)."""

    def __init__(self, index: BM25Index, depth: int = 50, max_gold: int = 5, stage: FirstStage | None = None):
        if depth < 1:
            raise ValueError("depth must be at least 1")
        if not 0 <= max_gold <= depth:
            raise ValueError("the number of gold documents to insert must be between 0 and depth")
        self.index, self.depth, self.max_gold = index, depth, max_gold
        self.stage = FirstStage(index) if stage is None else stage
        self._known = set(index.docids)

    def known(self, docid: str) -> bool:
        return docid in self._known

    def windows(self, queries: Sequence[str], golds: Sequence[Sequence[str]],
                fallbacks: Sequence[Sequence[str]] | None = None, contexts: Sequence | None = None) -> list[Window]:
        """One window per query; ``golds[i]`` are the gold docids of query ``i`` (best first), ``fallbacks[i]``
        the queries that backfill its window when it is short and ``contexts[i]`` its reasoning (a string or a
        record with the context fields; None: none) for a first stage that reads it."""
        contexts = [None] * len(queries) if contexts is None else list(contexts)
        hits_per_query = self.stage.search(list(queries), contexts, self.depth)
        out = [self._window(q, c, hits, gold) for q, c, hits, gold in zip(queries, contexts, hits_per_query, golds)]
        if fallbacks is None:
            return out
        short = [i for i, w in enumerate(out) if len(w) < self.depth and fallbacks[i]]
        jobs = [(i, f) for i in short for f in fallbacks[i] if f.strip()]
        fallback_hits = self.index.search([f for _, f in jobs], k=self.depth) if jobs else []
        for (i, _), hits in zip(jobs, fallback_hits):
            window = out[i]
            have = {d for d, _, _ in window}
            for docid, _ in hits:
                if len(window) >= self.depth:
                    break
                if docid not in have:
                    have.add(docid)
                    window.append((docid, 0.0, False))
        return out

    def _window(self, query: str, context, hits: list[tuple[str, float]], gold: Sequence[str]) -> Window:
        gold = [d for d in dict.fromkeys(gold) if d in self._known]
        all_gold = set(gold)
        hit_score = dict(hits)
        if gold and (len(gold) > self.max_gold or any(d not in hit_score for d in gold)):
            gold_score = dict(zip(gold, self.stage.score_documents(query, context, gold, hit_score)))
        else:
            gold_score = {d: hit_score[d] for d in gold}
        if len(gold) > self.max_gold:
            order = {d: i for i, d in enumerate(gold)}
            gold = sorted(gold, key=lambda d: (-gold_score[d], order[d]))[: self.max_gold]
        inserted = set(gold)
        others = [(d, s) for d, s in hits if d not in inserted][: self.depth - len(gold)]
        # a gold document beyond max_gold that BM25 retrieved anyway stays in, still flagged gold
        window = [(d, float(s), d in all_gold) for d, s in others] + [(d, float(gold_score[d]), True) for d in gold]
        window.sort(key=lambda row: (-row[1], row[0]))
        return window
