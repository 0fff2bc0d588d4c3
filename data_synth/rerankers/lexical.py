"""The ``lexical`` oracle (offline default): BM25 of the step query and of question + answers.

The step-query BM25 score comes with each candidate from retrieval (inserted gold documents are scored
too); the question + answers BM25 is computed once per question over the whole corpus and looked up.
"""

from __future__ import annotations

import numpy as np

from hopscotch.data_synth.rerankers.base import (
    FeatureOracle,
    OracleInput,
    OracleWeights,
    question_text,
)
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
        self._row = {d: i for i, d in enumerate(index.docids)}
        self._cached_question: tuple[str, np.ndarray] | None = None

    def _question_scores(self, item: OracleInput) -> np.ndarray:
        text = question_text(item)
        if self._cached_question is None or self._cached_question[0] != text:
            tokens = [t for t in self.index.tokenize_queries([text])[0] if t in self.index.model.vocab_dict]
            scores = (np.asarray(self.index.model.get_scores(tokens), dtype=np.float64) if tokens
                      else np.zeros(len(self.index.docids)))
            self._cached_question = (text, scores)
        return self._cached_question[1]

    def relevance(self, item: OracleInput):
        rel_query = [c.bm25 for c in item.candidates]
        all_scores = self._question_scores(item)
        rel_question = [float(all_scores[self._row[c.docid]]) if c.docid in self._row else 0.0
                        for c in item.candidates]
        return rel_query, rel_question
