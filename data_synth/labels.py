"""Cutting positives from the top of the oracle ranking and hard negatives from its lower part.

* **Positives**: walking down the ranking, the first ``positives`` candidates that are *supported* and
  not near-duplicates of one already taken. Supported means: gold or answer-bearing when the question
  has gold documents; answer-bearing when it has answers but no gold; any BM25 match when it has
  neither (a QA source without labels, e.g. QAMPARI/Tongyi: query relevance alone decides).
* **Hard negatives**: ``negatives`` drawn at random (seeded per step) from the ranks at and below
  ``negative_start``; if that part runs short, the ranks above it are used, lowest first. Never a gold
  document, never a passage containing an answer (false-negative guard), never a near-duplicate of a
  positive, of a gold document or of another negative (word 3-gram Jaccard >= ``near_duplicate``), and,
  given a corpus's duplicate groups (``synth --duplicate-groups``), never a document those groups list as an
  exact or near duplicate of a positive or gold document, whatever the candidate window holds.

Example::

    labeller = Labeller(LabelConfig(positives=1, negatives=7), seed=13)
    result = labeller.label("q1_turn2", candidates, scores, mode="gold")
    result.positives, result.negatives, result.drop_reason
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from hopscotch.data_synth.oracles.base import Candidate
from hopscotch.data_synth.passage_cache import PassageCache
from hopscotch.retriever.text.shingles import jaccard, shingles

SUPPORT_MODES = ("gold", "answer", "relevance")
#: the Jaccard of two passages without words (both shingle sets empty): 1.0, they are one passage and the guard
#: never takes both (:func:`~hopscotch.retriever.text.shingles.jaccard`'s ``both_empty``; the audits keep 0.0)
BOTH_EMPTY_JACCARD = 1.0


@dataclass
class LabelConfig:
    positives: int = 1
    negatives: int = 7
    negative_start: int = 10        # 0-based rank where the negative pool starts
    near_duplicate: float = 0.8     # word 3-gram Jaccard at or above which two passages are one

    def __post_init__(self):
        if self.positives < 1:
            raise ValueError("positives must be at least 1")
        if self.negatives < 0 or self.negative_start < 0:
            raise ValueError("negatives and negative_start must not be negative")
        if not 0.0 < self.near_duplicate <= 1.0:
            raise ValueError("near_duplicate must be in (0, 1]")


@dataclass
class LabelResult:
    positives: list[Candidate] = field(default_factory=list)
    negatives: list[Candidate] = field(default_factory=list)
    drop_reason: str | None = None
    excluded_duplicates: int = 0    # candidates refused only because the duplicate groups list them


def is_supported(c: Candidate, mode: str) -> bool:
    if mode == "gold":
        return c.gold or c.has_answer
    if mode == "answer":
        return c.has_answer
    return c.bm25 > 0


class Labeller:
    """Turns an oracle ranking of a candidate window into positives and hard negatives."""

    def __init__(self, config: LabelConfig | None = None, seed: int = 13, cache_size: int = 100_000,
                 same_documents=None):
        """``same_documents``: ``docid -> set of docids`` that count as it (a duplicate-group lookup,
        :meth:`hopscotch.retriever.io.qrels.DuplicateGroups.same_documents`), or None."""
        self.config = config or LabelConfig()
        self.seed = seed
        self.same_documents = same_documents
        self._shingles: PassageCache[frozenset] = PassageCache(shingles, cache_size)

    def _near_any(self, c: Candidate, others: list[Candidate]) -> bool:
        mine = self._shingles(c)
        return any(jaccard(mine, self._shingles(o), BOTH_EMPTY_JACCARD) >= self.config.near_duplicate for o in others)

    def label(self, query_id: str, candidates: list[Candidate], scores: list[float], mode: str) -> LabelResult:
        """Positives and negatives for one step, or a ``drop_reason``."""
        if mode not in SUPPORT_MODES:
            raise ValueError(f"unknown support mode {mode!r}")
        if not candidates:
            return LabelResult(drop_reason="no_candidates")
        cfg = self.config
        ranking = sorted(range(len(candidates)), key=lambda i: (-scores[i], i))
        ranked = [candidates[i] for i in ranking]
        positives: list[Candidate] = []
        for c in ranked:
            if len(positives) == cfg.positives:
                break
            if is_supported(c, mode) and not self._near_any(c, positives):
                positives.append(c)
        if not positives:
            return LabelResult(drop_reason="no_supported_positive")
        if cfg.negatives == 0:
            return LabelResult(positives, [])
        taken = {c.docid for c in positives}
        guard = positives + [c for c in ranked if c.gold or c.question_gold]
        grouped = set().union(*(self.same_documents(c.docid) for c in guard)) - taken if self.same_documents else set()

        def allowed(c: Candidate) -> bool:  # the cheap checks; near-duplicates are checked on the draw
            return (c.docid not in taken and c.docid not in grouped and not c.gold and not c.question_gold
                    and not c.has_answer)

        rng = random.Random(f"{self.seed}:{query_id}")
        lower = [c for c in ranked[cfg.negative_start:] if allowed(c)]
        rng.shuffle(lower)
        upper = [c for c in reversed(ranked[: cfg.negative_start]) if allowed(c)]
        negatives: list[Candidate] = []
        for c in lower + upper:
            if len(negatives) == cfg.negatives:
                break
            if not self._near_any(c, guard) and not self._near_any(c, negatives):
                negatives.append(c)
        excluded = sum(c.docid in grouped and not c.gold and not c.question_gold and not c.has_answer
                       for c in ranked) if grouped else 0
        if not negatives:
            return LabelResult(positives, [], drop_reason="no_negatives", excluded_duplicates=excluded)
        position = {c.docid: r for r, c in enumerate(ranked)}
        negatives.sort(key=lambda c: position[c.docid])
        return LabelResult(positives, negatives, excluded_duplicates=excluded)
