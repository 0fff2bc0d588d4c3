"""The ``lexical`` oracle (offline default): BM25 of the step query and of question + answers.

The step-query BM25 score comes with each candidate from retrieval (inserted gold documents are scored
too); the question + answers BM25 is computed once per question over the whole corpus and looked up.
"""

from __future__ import annotations

import numpy as np

from hopscotch.data_synth.oracles.base import FeatureOracle, OracleInput, OracleWeights, question_text
from hopscotch.retriever.index.bm25 import BM25Index


class LexicalOracle(FeatureOracle):
    """Feature oracle whose relevances are BM25 scores.

    Example::

        oracle = LexicalOracle(bm25_index)
        scores = oracle.score(item)   # one float per item.candidates
    """

    name = "lexical"

    def __init__(self, index: BM25Index, weights: OracleWeights | None = None):
        super().__init__(weights)
        self.index = index
        self._cached_question: tuple[str, np.ndarray] | None = None

    def _question_scores(self, item: OracleInput) -> np.ndarray:
        text = question_text(item)
        if self._cached_question is None or self._cached_question[0] != text:
            scores = self.index.corpus_scores(text)
            scores = np.zeros(len(self.index.docids)) if scores is None else np.asarray(scores, dtype=np.float64)
            self._cached_question = (text, scores)
        return self._cached_question[1]

    def relevance(self, item: OracleInput):
        rel_query = [c.bm25 for c in item.candidates]
        all_scores = self._question_scores(item)
        rows = [self.index.row(c.docid) for c in item.candidates]
        rel_question = [0.0 if r is None else float(all_scores[r]) for r in rows]
        return rel_query, rel_question
