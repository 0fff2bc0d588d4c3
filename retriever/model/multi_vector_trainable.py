"""The multi-vector model as the trainer trains it: a ``torch.nn.Module`` over a
:class:`~hopscotch.retriever.model.multi_vector.MultiVectorModel` with the dual encoder's training interface.

:class:`TrainableMultiVector` offers what :class:`~hopscotch.retriever.model.dual_encoder.DualEncoder` offers the
trainer -- ``tokenize_queries`` / ``tokenize_passages`` (what the collator calls), ``forward(queries=...,
passages=..., chunk_size=..., query_rng=..., passage_rng=...)`` returning ``(q, p, temperature)``, a (learnable)
``temperature``, ``config`` (the recipe's :class:`~hopscotch.retriever.model.config.EncoderConfig`) and
``save`` -- but ``q`` and ``p`` are :class:`TokenEmbeddings`: the padded ``(n, L, dim)`` token vectors and the
``(n, L)`` mask of the tokens that score (queries: the real tokens and the ``[MASK]`` augmentation; documents:
the real tokens less the skiplist), straight from sentence-transformers' own module stack
(``MultiVectorEncoder(features, task=...)``), so training encodes exactly as ``encode_query`` /
``encode_document`` do. Query texts come from :meth:`MultiVectorModel.format_queries` (the query input variants,
one per query for a training mixture), document texts from :meth:`MultiVectorModel.format_documents`.

Example (not run: it builds and saves a model)::

    model = TrainableMultiVector(build_multi_vector_model("minilm"), EncoderConfig(temperature=1.0))
    q, p, t = model(queries=model.tokenize_queries(["who directed Gummo"], ["It came out in 1997."]),
                    passages=model.tokenize_passages([("Gummo", "Gummo is a 1997 film by Harmony Korine.")]))
    q.embeddings.shape, q.mask.shape            # (1, Lq, 128), (1, Lq)
    model.save("out/final")                     # sentence_transformers.MultiVectorEncoder("out/final") loads it
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import nn

from hopscotch.retriever.model.config import MULTI_VECTOR, EncoderConfig
from hopscotch.retriever.model.dual_encoder import length_chunks, prepare_trainable, trim_padding, unused_head
from hopscotch.retriever.model.multi_vector import MultiVectorModel
from hopscotch.retriever.model.rng import encode_sides

#: sentence-transformers' mask of the query augmentation ([MASK]) positions: not attended to, but scored
EXPANSION = "query_expansion_positions"
_FEATURES = ("input_ids", "attention_mask", "token_type_ids", EXPANSION)
_TASKS = {"query": "query", "passage": "document", "document": "document"}


class TokenEmbeddings(NamedTuple):
    """Token vectors ``(n, L, dim)`` and the bool mask ``(n, L)`` of those that score; ``shape`` and ``device``
    are the vectors', so code that counts rows (``x.shape[0]``) takes either this or a single-vector tensor."""

    embeddings: torch.Tensor
    mask: torch.Tensor

    @property
    def shape(self) -> torch.Size:
        return self.embeddings.shape

    @property
    def device(self) -> torch.device:
        return self.embeddings.device


def scored_lengths(features: dict) -> torch.Tensor:
    """Per row, the columns that matter (right padding): ``attention_mask.sum(1)``, the query augmentation
    positions counted too when the features carry them (they are not attended to but are scored)."""
    extra = features.get(EXPANSION)
    if extra is None:
        return features["attention_mask"].sum(1)
    return (features["attention_mask"].bool() | extra.bool()).sum(1)


class TrainableMultiVector(nn.Module):
    """A multi-vector model (``multi_vector``, its ``st`` registered as the submodule) to train: see the module
    docstring. ``config`` is the run's :class:`EncoderConfig` (temperature, query input, padding side right)."""

    kind = MULTI_VECTOR

    def __init__(self, model: MultiVectorModel, config: EncoderConfig, dtype: str | torch.dtype = "float32",
                 gradient_checkpointing: bool = False):
        super().__init__()
        self.multi_vector = model
        self.st = model.st
        self.config = config
        backbone = self.st[0].auto_model
        for param in unused_head(backbone).parameters():
            param.requires_grad_(False)  # BERT's pooler never feeds a token vector: DDP would wait for its gradient
        prepare_trainable(self, backbone, config, dtype, gradient_checkpointing)

    @property
    def temperature(self) -> torch.Tensor:
        return self.log_temperature.exp()

    @property
    def tokenizer(self):
        return self.multi_vector.tokenizer

    @property
    def dim(self) -> int:
        return self.multi_vector.dim

    # -- text to features (the collator's interface; padding as sentence-transformers pads) -----------
    def tokenize_queries(self, queries: Sequence[str], reasonings: Sequence | None = None,
                         pad_to_multiple_of: int | None = None, query_inputs: Sequence | None = None) -> dict:
        """Query features: the texts of :meth:`MultiVectorModel.format_queries` (``query_inputs``: one variant
        per query, None entries the model's) with the query prompt, padded to the augmentation length.
        ``pad_to_multiple_of`` is not applied (sentence-transformers pads queries itself)."""
        return self._features(self.multi_vector.format_queries(queries, reasonings, query_inputs), "query")

    def tokenize_passages(self, passages: Sequence, pad_to_multiple_of: int | None = None) -> dict:
        """Document features of ``(title, text)`` pairs (or strings, or records), the document prompt in front."""
        return self._features(self.multi_vector.format_documents(list(passages)), "document")

    def _features(self, texts: list[str], task: str) -> dict:
        features = self.st.preprocess(texts, prompt=self.st.prompts.get(task) or None, task=task)
        return {k: v for k, v in features.items() if k in _FEATURES and torch.is_tensor(v)}

    # -- encoding --------------------------------------------------------------------------------
    def encode(self, features: dict, kind: str = "query", chunk_size: int | None = None) -> TokenEmbeddings:
        """Token embeddings of tokenized queries (``kind`` query) or documents (``passage``); ``chunk_size``
        encodes length-sorted sub-batches, each trimmed to its longest row, padded back and in input order."""
        task = _TASKS[kind]
        lengths = scored_lengths(features)
        if not chunk_size or chunk_size >= lengths.shape[0]:
            return self._embed(features, task)
        chunks = length_chunks(lengths, chunk_size)
        width = int(lengths.max())
        vectors, masks = [], []
        for rows in chunks:
            part = self._embed(trim_padding(features, rows, int(lengths[rows].max()), "right"), task)
            pad = width - part.embeddings.shape[1]
            vectors.append(nn.functional.pad(part.embeddings, (0, 0, 0, pad)))
            masks.append(nn.functional.pad(part.mask, (0, pad)))
        inverse = torch.argsort(torch.cat(chunks))
        return TokenEmbeddings(torch.cat(vectors)[inverse], torch.cat(masks)[inverse])

    def _embed(self, features: dict, task: str) -> TokenEmbeddings:
        out = self.st({k: v for k, v in features.items() if k in _FEATURES}, task=task)
        return TokenEmbeddings(out["token_embeddings"], out["attention_mask"].bool())

    def forward(self, queries: dict | None = None, passages: dict | None = None, chunk_size: int | None = None,
                query_rng=None, passage_rng=None):
        """Encode either or both sides; ``*_rng`` restore a CPU RNG state first (GradCache replay)."""
        q, p = encode_sides(self.encode, queries, passages, chunk_size, query_rng, passage_rng)
        return q, p, self.temperature

    def save(self, path: str | os.PathLike) -> str:
        """Write the folder with :meth:`MultiVectorModel.save` (``MultiVectorEncoder(path)`` loads it)."""
        return self.multi_vector.save(path)
