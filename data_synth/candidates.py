"""Candidate windows: BM25 top-``depth`` for a step's query, with the question's gold documents put in.

The window keeps the top ``depth - g`` BM25 hits that are not gold and adds ``g`` gold documents
(``g = min(max_gold, gold documents present in the corpus)``; when there are more gold documents than
``max_gold``, the ones BM25 scores highest for this step's query), de-duplicated, so it stays ``depth``
long. The window is ordered by the step query's BM25 score (docid breaks ties), gold or not.

A short query (``"Animorphs"``) may match fewer than ``depth`` passages. Such a window is *backfilled*
from BM25 searches with the step's fallback queries (the pipeline passes reasoning + query, then the
question), in their order, after the step query's own hits; a backfilled passage keeps its step-query
BM25 score of 0.

Example::

    gen = CandidateGenerator(BM25Index.build(docs), depth=50, max_gold=5)
    [window] = gen.windows(["Shirley Temple government position"], [["ic00001", "ic00006"]])
    window[0]   # ('ic00001', 12.3, True)
"""

from __future__ import annotations

from collections.abc import Sequence

from hopscotch.retriever.index.bm25 import BM25Index

Window = list[tuple[str, float, bool]]  # (docid, BM25 score of the step query, is gold)


class CandidateGenerator:
    """BM25 retrieval plus gold insertion over one corpus."""

    def __init__(self, index: BM25Index, depth: int = 50, max_gold: int = 5):
        if depth < 1:
            raise ValueError("depth must be at least 1")
        if not 0 <= max_gold <= depth:
            raise ValueError("the number of gold documents to insert must be between 0 and depth")
        self.index, self.depth, self.max_gold = index, depth, max_gold
        self._known = set(index.docids)

    def known(self, docid: str) -> bool:
        return docid in self._known

    def windows(self, queries: Sequence[str], golds: Sequence[Sequence[str]],
                fallbacks: Sequence[Sequence[str]] | None = None) -> list[Window]:
        """One window per query; ``golds[i]`` are the gold docids of query ``i`` (best first) and
        ``fallbacks[i]`` the queries that backfill its window when it is short."""
        hits_per_query = self.index.search(list(queries), k=self.depth)
        out = [self._window(q, hits, gold) for q, hits, gold in zip(queries, hits_per_query, golds)]
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

    def _window(self, query: str, hits: list[tuple[str, float]], gold: Sequence[str]) -> Window:
        gold = [d for d in dict.fromkeys(gold) if d in self._known]
        all_gold = set(gold)
        hit_score = dict(hits)
        if gold and (len(gold) > self.max_gold or any(d not in hit_score for d in gold)):
            scored = self.index.score_documents(query, gold)
            gold_score = {d: hit_score.get(d, float(s)) for d, s in zip(gold, scored)}
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
