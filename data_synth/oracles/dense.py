"""The ``dense`` oracle: bi-encoder cosine of the step query and of question + answers to each passage.

Passage embeddings are cached by docid for the life of the worker (candidate windows of one corpus
overlap heavily), so each passage is encoded once.
"""

from __future__ import annotations

import numpy as np

from hopscotch.data_synth.oracles.base import FeatureOracle, OracleInput, OracleWeights, question_text
from hopscotch.retriever.model.loading import load_sentence_transformer
from hopscotch.retriever.model.query_template import format_document


class DenseOracle(FeatureOracle):
    """Feature oracle whose relevances are cosine similarities from a sentence-transformers encoder.

    Example::

        oracle = DenseOracle("minilm")
        scores = oracle.score(item)
    """

    name = "dense"

    def __init__(self, model="minilm", weights: OracleWeights | None = None, batch_size: int = 64,
                 max_cache: int = 200_000):
        super().__init__(weights)
        self.model = load_sentence_transformer(model, device="cpu") if isinstance(model, str) else model
        self.batch_size = batch_size
        self.max_cache = max_cache
        self._docs: dict[str, np.ndarray] = {}

    def _encode(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                            convert_to_numpy=True, show_progress_bar=False), dtype=np.float32)

    def _doc_vectors(self, item: OracleInput) -> np.ndarray:
        missing = [c for c in item.candidates if c.docid not in self._docs]
        if missing:
            if len(self._docs) + len(missing) > self.max_cache:
                self._docs.clear()
            vecs = self._encode([format_document(c.title, c.text) for c in missing])
            for c, v in zip(missing, vecs):
                self._docs[c.docid] = v
        return np.stack([self._docs[c.docid] for c in item.candidates])

    def relevance(self, item: OracleInput):
        docs = self._doc_vectors(item)
        queries = self._encode([item.query, question_text(item)])
        sims = docs @ queries.T
        return sims[:, 0].tolist(), sims[:, 1].tolist()
