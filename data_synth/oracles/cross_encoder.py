"""The ``cross-encoder`` oracle: a sentence-transformers ``CrossEncoder`` folder scores
(step query, passage) and (question + answers, passage) pairs."""

from __future__ import annotations

import os

from hopscotch.data_synth.oracles.base import FeatureOracle, OracleInput, OracleWeights, question_text
from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.model.query_template import format_document


class CrossEncoderOracle(FeatureOracle):
    """Feature oracle whose relevances are cross-encoder scores.

    Example::

        oracle = CrossEncoderOracle("models/ms-marco-MiniLM-L6-v2")
        scores = oracle.score(item)
    """

    name = "cross-encoder"

    def __init__(self, model, weights: OracleWeights | None = None, batch_size: int = 64, max_length: int = 512):
        super().__init__(weights)
        if isinstance(model, (str, os.PathLike)):
            if not os.path.isdir(model):
                raise UsageError(f"--cross-encoder {model}: not a local CrossEncoder folder "
                                 "(models are never downloaded at run time)")
            from sentence_transformers import CrossEncoder

            model = CrossEncoder(str(model), device="cpu", max_length=max_length, local_files_only=True)
        self.model = model
        self.batch_size = batch_size

    def relevance(self, item: OracleInput):
        docs = [format_document(c.title, c.text) for c in item.candidates]
        qa = question_text(item)
        pairs = [(item.query, d) for d in docs] + [(qa, d) for d in docs]
        scores = self.model.predict(pairs, batch_size=self.batch_size, show_progress_bar=False,
                                    convert_to_numpy=True)
        scores = [float(s) for s in scores.reshape(len(pairs), -1)[:, -1]]
        n = len(docs)
        return scores[:n], scores[n:]
