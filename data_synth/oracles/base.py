"""The oracle interface shared by ``lexical``, ``dense``, ``cross-encoder`` and ``llm``.

An oracle sees what a labeller sees: the step's query (and the reasoning before it), the whole
question, its answers, and which candidates are gold or contain an answer. It returns one score per
candidate, higher meaning "this is what the step should find".

Score-based oracles (:class:`FeatureOracle`) combine four features with :class:`OracleWeights`::

    score = gold * is_gold + answer * contains_answer
            + query * rel(step query, doc) + question * rel(question + answers, doc)

with each relevance min-max normalized over the candidate window. They differ only in ``rel``
(BM25, bi-encoder cosine, cross-encoder score). The ``llm`` oracle ranks listwise instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np


@dataclass(slots=True)
class Candidate:
    """A passage in a step's candidate window."""

    docid: str
    title: str
    text: str
    bm25: float = 0.0            # BM25 score of the step query
    gold: bool = False           # a gold document of this step (the question's, unless the trace says)
    has_answer: bool = False     # contains an (informative) answer string
    question_gold: bool = False  # a gold document of the question: never a negative


@dataclass(slots=True)
class OracleInput:
    """Everything the oracle may look at for one step."""

    query_id: str
    query: str
    reasoning: str
    question_id: str
    question: str
    answers: list[str]
    candidates: list[Candidate]


@dataclass
class OracleWeights:
    """Weights of the feature oracles (``lexical``, ``dense``, ``cross-encoder``)."""

    gold: float = 2.0
    answer: float = 0.3
    query: float = 1.0
    question: float = 0.05


class Oracle(Protocol):
    """What the labeller needs from an oracle: a score per candidate (higher is better)."""

    name: str

    def score(self, item: OracleInput) -> list[float]:
        ...


def minmax(values: Sequence[float]) -> np.ndarray:
    """Scale to [0, 1] over the window; a constant window maps to 0 (the feature says nothing)."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0:
        return arr
    lo, hi = float(arr.min()), float(arr.max())
    if hi - lo <= 1e-12:
        return np.zeros_like(arr)
    return (arr - lo) / (hi - lo)


def question_text(item: OracleInput) -> str:
    """The oracle's view of the question: the question plus its answers."""
    return " ".join([item.question, *item.answers]).strip()


class FeatureOracle:
    """Base of the score-based oracles; subclasses give the two relevance features."""

    name = "feature"

    def __init__(self, weights: OracleWeights | None = None):
        self.weights = weights or OracleWeights()

    def relevance(self, item: OracleInput) -> tuple[Sequence[float], Sequence[float]]:
        """``(rel(step query, doc), rel(question + answers, doc))`` for every candidate."""
        raise NotImplementedError

    def score(self, item: OracleInput) -> list[float]:
        if not item.candidates:
            return []
        rel_query, rel_question = self.relevance(item)
        w = self.weights
        gold = np.array([c.gold for c in item.candidates], dtype=np.float64)
        answer = np.array([c.has_answer for c in item.candidates], dtype=np.float64)
        total = (w.gold * gold + w.answer * answer + w.query * minmax(rel_query)
                 + w.question * minmax(rel_question))
        return [round(float(s), 9) for s in total]  # rounded: stable across BLAS / process layouts


@dataclass
class OracleSpec:
    """How to build an oracle in a worker process (oracles hold models, so they are built lazily)."""

    name: str = "lexical"
    weights: OracleWeights = field(default_factory=OracleWeights)
    encoder: str = "minilm"                 # dense
    cross_encoder: str | None = None        # cross-encoder folder
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key_env: str = "OPENAI_API_KEY"
    llm_cache: str | None = None
    llm_window: int = 20
    llm_stride: int = 10
    llm_timeout: float = 60.0
    llm_max_retries: int = 4
    batch_size: int = 64


ORACLES = ("lexical", "dense", "cross-encoder", "llm")
