"""The cross-encoder as the trainer trains it: a ``torch.nn.Module`` over a
:class:`~hopscotch.retriever.model.cross_encoder.CrossEncoderModel` with the trainer's interface.

A cross-encoder scores pairs, not texts, so the collator asks it for pair features (:meth:`tokenize_groups`: each
query's side, formatted in its variant, paired with each passage of its group, in the batch's passage order) and
``forward(queries=pair_features, chunk_size=...)`` returns ``(None, scores, temperature)``: ``scores`` one logit per
passage of the batch (its pair with its own query), where a dual encoder returns passage embeddings. The listwise
loss (:class:`~hopscotch.retriever.training.listwise.ListwiseLoss`) reads each query's group from them. Scoring goes
through sentence-transformers' own modules (:meth:`CrossEncoderModel.logits`), so training scores exactly as
``CrossEncoder.predict`` does; ``chunk_size`` scores length-sorted sub-batches, each cut to its longest pair.

Example (not run)::

    model = TrainableCrossEncoder(build_cross_encoder_model("minilm"), EncoderConfig(temperature=1.0))
    features = model.tokenize_groups(["who directed Gummo"], ["It came out in 1997."], [[("Gummo", "..."), ("Kids", "...")]])
    _, scores, t = model(queries=features)     # scores: (2,)
    model.save("out/final")                    # sentence_transformers.CrossEncoder("out/final") loads it
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import torch
from torch import nn

from hopscotch.retriever.model.config import CROSS_ENCODER, EncoderConfig
from hopscotch.retriever.model.cross_encoder import CrossEncoderModel
from hopscotch.retriever.model.dual_encoder import length_chunks, prepare_trainable, trim_padding
from hopscotch.retriever.model.rng import restore_rng


class TrainableCrossEncoder(nn.Module):
    """A cross-encoder (``cross_encoder``, its ``st`` registered as the submodule) to train: see the module docstring.
    ``config`` is the run's :class:`EncoderConfig` (temperature, query input)."""

    kind = CROSS_ENCODER
    #: the collator pairs each query with its passages (:meth:`tokenize_groups`)
    scores_pairs = True
    dim = None

    def __init__(self, model: CrossEncoderModel, config: EncoderConfig, dtype: str | torch.dtype = "float32",
                 gradient_checkpointing: bool = False):
        super().__init__()
        self.cross_encoder = model
        self.st = model.st
        self.config = config
        prepare_trainable(self, model.st.model, config, dtype, gradient_checkpointing)

    @property
    def temperature(self) -> torch.Tensor:
        return self.log_temperature.exp()

    @property
    def tokenizer(self):
        return self.cross_encoder.tokenizer

    def tokenize_groups(self, queries: Sequence[str], reasonings: Sequence | None, groups: Sequence[Sequence],
                        query_inputs: Sequence | None = None) -> dict:
        """Pair features: query ``i``'s side (its variant: ``query_inputs[i]``, None the model's) with each passage of
        ``groups[i]`` (``(title, text)`` pairs or texts), group after group."""
        sides = self.cross_encoder.format_queries(queries, reasonings, query_inputs)
        docs = [self.cross_encoder.format_documents(group) for group in groups]
        return self.cross_encoder.features([s for s, d in zip(sides, docs) for _ in d], [t for d in docs for t in d])

    def score(self, features: dict, chunk_size: int | None = None) -> torch.Tensor:
        """``(n,)`` logits of tokenized pairs; ``chunk_size``: length-sorted sub-batches, each trimmed to its longest
        pair (right padding), in input order."""
        lengths = features["attention_mask"].sum(1)
        if not chunk_size or chunk_size >= lengths.shape[0]:
            return self.cross_encoder.logits(features)  # padded to its longest pair already
        chunks = length_chunks(lengths, chunk_size)
        parts = [self.cross_encoder.logits(trim_padding(features, rows, int(lengths[rows].max()), "right"))
                 for rows in chunks]
        return torch.cat(parts)[torch.argsort(torch.cat(chunks))]

    def forward(self, queries: dict | None = None, passages: dict | None = None, chunk_size: int | None = None,
                query_rng=None, passage_rng=None):
        """``(None, scores, temperature)``: the pair features come as ``queries`` (``passages`` is empty)."""
        if passages:
            raise ValueError("a cross-encoder scores pair features given as queries=; passages= must be empty")
        restore_rng(query_rng)
        scores = None if queries is None else self.score(queries, chunk_size)
        return None, scores, self.temperature

    def save(self, path: str | os.PathLike) -> str:
        """Write the folder with :meth:`CrossEncoderModel.save` (``CrossEncoder(path)`` loads it)."""
        return self.cross_encoder.save(path)
