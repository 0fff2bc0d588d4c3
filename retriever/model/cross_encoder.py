"""Reasoning-aware cross-encoders (rerankers), built as a real ``sentence_transformers.CrossEncoder``.

A cross-encoder reads a query and a document together (``[CLS] query [SEP] document [SEP]``) and gives one logit,
the pair's score. The model is sentence-transformers' own module stack (a ``Transformer`` with the
``sequence-classification`` task: the backbone plus a new one-logit classification head, ``num_labels=1``), so a saved
folder loads unchanged with ``CrossEncoder(path)``; its activation is saved as ``torch.nn.Identity``, so
``CrossEncoder(path).predict(pairs)`` returns the very logits Hopscotch ranks by (sentence-transformers' default for
one label is a sigmoid, monotonic in them; pass ``activation_fn=torch.nn.Sigmoid()`` for probabilities).

The pair (recorded in ``hopscotch_config.json``, :class:`CrossEncoderConfig`): the query side is AgentIR's template
``{instruction}Reasoning: {text}\\n\\nQuery: {query}`` in the model's query input variant
(:func:`~hopscotch.retriever.model.query_template.format_queries`, the one formatter of every Hopscotch model), with
the reasoning cut *from the left* so that ``[CLS] query-side [SEP]`` fits ``query_max_len`` tokens: the query itself
and the reasoning's tail survive. The document (``title + " " + text``) takes the rest of the pair's
``query_max_len + passage_max_len`` tokens, cut from the right (its head is kept). Because ``query_max_len`` may not
exceed ``passage_max_len``, sentence-transformers' own ``longest_first`` truncation of such a pair cuts only the
document, exactly there: ``CrossEncoder(path).predict([(query_side, document)])`` gives Hopscotch's scores for any
document length, given the query side as :meth:`CrossEncoderModel.format_queries` writes it (a query side that fits
``query_max_len`` is the template itself).

Example (not run)::

    model = build_cross_encoder_model("minilm", query_max_len=256, passage_max_len=256, seed=0)
    [q] = model.format_queries(["who directed Gummo"], ["The film came out in 1997."])
    model.score([q, q], ["Gummo is a 1997 film by Harmony Korine.", "Kids is a 1995 film."])   # [logit, logit]
    model.save("out/reranker")          # sentence_transformers.CrossEncoder("out/reranker") loads it
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.atomic import atomic_folder
from hopscotch.retriever.io.common import write_json
from hopscotch.retriever.model.config import CROSS_ENCODER, HOPSCOTCH_CONFIG, checked_count, saved_hopscotch_config
from hopscotch.retriever.model.loading import quiet_loading_bars, resolve_model_path
from hopscotch.retriever.model.query_input import QueryInput
from hopscotch.retriever.model.query_template import format_documents, format_queries, model_variants

#: the pair's cut, recorded as ``truncation`` in ``hopscotch_config.json`` (the only one so far)
REASONING_LEFT_DOCUMENT_RIGHT = "reasoning_left_document_right"
#: sentence-transformers' ``activation_fn`` saved with the folder: the raw logit, Hopscotch's score
IDENTITY_ACTIVATION = "torch.nn.modules.linear.Identity"


@dataclass
class CrossEncoderConfig:
    """A cross-encoder's settings, recorded in its ``hopscotch_config.json`` (``kind: cross_encoder``).

    ``query_max_len``: tokens of ``[CLS] query-side [SEP]`` (the reasoning cut from the left to fit);
    ``passage_max_len``: the document's share of the pair, ``query_max_len + passage_max_len`` tokens in all (a
    shorter query side leaves the document more); at most ``passage_max_len`` itself, so that
    sentence-transformers' ``longest_first`` truncation never cuts the query side.
    """

    query_max_len: int = 256
    passage_max_len: int = 256
    instruction: str = ""                 # in front of the template ('Reasoning: ...'), as the encoders'
    query_input: str = "reasoning"        # the query input variant of reasoning-aware queries
    truncation: str = REASONING_LEFT_DOCUMENT_RIGHT
    kind: str = CROSS_ENCODER

    def __post_init__(self):
        for name in ("query_max_len", "passage_max_len"):
            checked_count(getattr(self, name), f"model.{name}")
        if self.query_max_len > self.passage_max_len:
            raise UsageError(f"model.query_max_len={self.query_max_len} exceeds model.passage_max_len="
                             f"{self.passage_max_len}: a cross-encoder's query side may take at most half of the pair "
                             "(sentence-transformers' longest_first truncation would cut it otherwise)")
        self.query_input = str(QueryInput.parse(self.query_input, "model.query_input"))
        if self.truncation != REASONING_LEFT_DOCUMENT_RIGHT:
            raise UsageError(f"truncation: expected {REASONING_LEFT_DOCUMENT_RIGHT!r}, got {self.truncation!r}")
        if self.kind != CROSS_ENCODER:
            raise UsageError(f"model.kind: a cross-encoder config has kind {CROSS_ENCODER!r}, got {self.kind!r}")

    @property
    def max_length(self) -> int:
        """Tokens of the whole pair, specials included."""
        return self.query_max_len + self.passage_max_len

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, saved: dict) -> CrossEncoderConfig:
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in saved.items() if k in known})


class CrossEncoderModel:
    """A ``sentence_transformers.CrossEncoder`` (:attr:`st`) with Hopscotch's pair formatting and scoring.

    :param st: the cross-encoder; :param config: its :class:`CrossEncoderConfig`; :param path: the folder it was
    loaded from or saved to (None when only in memory)."""

    def __init__(self, st, config: CrossEncoderConfig, path: str | os.PathLike | None = None):
        self.st, self.config = st, config
        self.path = None if path is None else str(path)

    @property
    def tokenizer(self):
        return self.st.tokenizer

    def format_queries(self, queries: Sequence[str], reasonings: Sequence | None = None, query_input=None,
                       reasoning_aware: bool | Sequence[bool] | None = None) -> list[str]:
        """The query side of each pair: the template in ``query_input`` (None: the model's; or one per query, None
        entries the model's: a training mixture), the reasoning cut from the left to ``query_max_len`` tokens;
        ``reasoning_aware``: one flag or one per query (None: whether the variant reads the reasoning)."""
        variant, aware = model_variants(query_input, self.config.query_input, reasoning_aware)
        return format_queries(self.tokenizer, self.config.query_max_len, queries, reasonings,
                              instruction=self.config.instruction, reasoning_aware=aware, query_input=variant)

    @staticmethod
    def format_documents(documents: Sequence) -> list[str]:
        """Document texts: strings as given, ``(title, text)`` pairs and records as ``title + " " + text``."""
        return format_documents(documents)

    def features(self, query_texts: Sequence[str], documents: Sequence[str]) -> dict:
        """Padded pair features, tokenized by sentence-transformers' own ``preprocess`` (``longest_first`` to the
        pair length: only the document is cut, see the module docstring); tensors only."""
        features = self.st.preprocess(list(zip(query_texts, documents)))
        return {k: v for k, v in features.items() if torch.is_tensor(v)}

    def pair_lengths(self, query_texts: Sequence[str], documents: Sequence[str]) -> list[int]:
        """Tokens of each pair as :meth:`features` cuts it (no padding)."""
        if not query_texts:
            return []
        ids = self.tokenizer(list(query_texts), list(documents), truncation="longest_first",
                             max_length=self.config.max_length)["input_ids"]
        return [len(row) for row in ids]

    def logits(self, features: dict) -> torch.Tensor:
        """The ``(n,)`` logits of tokenized pairs (with gradients when the caller has them on)."""
        out = self.st({**features, "modality": "text"})
        return out["scores"].reshape(-1)

    @torch.inference_mode()
    def score(self, query_texts: Sequence[str], documents: Sequence[str], batch_size: int = 32) -> list[float]:
        """One float logit per pair ``(query_texts[i], documents[i])`` (query sides as :meth:`format_queries` writes
        them, document texts as :meth:`format_documents`): pairs sorted by token length into batches, each padded
        to its own longest pair, so no batch pads a short pair to a long one's length."""
        n = len(query_texts)
        if n != len(documents):
            raise ValueError(f"{n} query sides but {len(documents)} documents")
        if not n:
            return []
        was_training = self.st.training
        self.st.eval()
        lengths = self.pair_lengths(query_texts, documents)
        order = sorted(range(n), key=lambda i: -lengths[i])
        out = [0.0] * n
        try:
            for start in range(0, n, batch_size):
                rows = order[start:start + batch_size]
                scores = self.logits(self.features([query_texts[i] for i in rows], [documents[i] for i in rows]))
                for i, s in zip(rows, scores.float().tolist()):
                    out[i] = s
        finally:
            self.st.train(was_training)
        return out

    def save(self, path: str | os.PathLike) -> str:
        """Write the folder (sentence-transformers' files + ``hopscotch_config.json``) atomically."""
        with atomic_folder(path) as build:
            self.st.save(str(build))
            write_json(Path(build) / HOPSCOTCH_CONFIG, self.config.to_json())
        self.path = str(path)
        return self.path


def _device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def build_cross_encoder_model(backbone: str | os.PathLike = "minilm", *, query_max_len: int = 256,
                              passage_max_len: int = 256, instruction: str = "", query_input: str = "reasoning",
                              seed: int = 0, device: str | None = None) -> CrossEncoderModel:
    """A new cross-encoder over ``backbone`` (``minilm``, an HF or sentence-transformers folder, a Hub id, as
    :func:`~hopscotch.retriever.model.loading.resolve_model_path` takes it): its encoder's weights and a new
    one-logit classification head initialised from ``seed``; a cross-encoder folder (``kind: cross_encoder``) is
    loaded as it is, with these lengths, instruction and variant."""
    from sentence_transformers import CrossEncoder
    from sentence_transformers.base.modules import Transformer
    from transformers.utils import logging as hf_logging

    config = CrossEncoderConfig(query_max_len=query_max_len, passage_max_len=passage_max_len,
                                instruction=instruction, query_input=query_input)
    quiet_loading_bars()
    path = resolve_model_path(backbone)
    if is_cross_encoder_folder(path):
        model = load_cross_encoder_model(path, device=device)
        model.st.max_seq_length = config.max_length
        model.config, model.path = config, None
        return model
    local = {"local_files_only": True}
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the new head's "newly initialized" report is expected
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            transformer = Transformer(path, transformer_task="sequence-classification", model_kwargs=dict(local),
                                      config_kwargs={**local, "num_labels": 1}, max_seq_length=config.max_length,
                                      processor_kwargs={**local, "model_max_length": config.max_length})
    finally:
        hf_logging.set_verbosity(verbosity)
    st = CrossEncoder(modules=[transformer], activation_fn=torch.nn.Identity(), device=device or _device())
    return CrossEncoderModel(st, config)


def is_cross_encoder_folder(path: str | os.PathLike) -> bool:
    """Whether ``path`` holds a cross-encoder: ``kind: cross_encoder`` in its ``hopscotch_config.json``, or a
    sentence-transformers ``CrossEncoder`` folder (``model_type`` in ``config_sentence_transformers.json``)."""
    path = Path(path)
    if (saved_hopscotch_config(path) or {}).get("kind") == CROSS_ENCODER:
        return True
    try:
        about = json.loads((path / "config_sentence_transformers.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(about, dict) and about.get("model_type") == "CrossEncoder"


def load_cross_encoder_model(name: str | os.PathLike, device: str | None = None) -> CrossEncoderModel:
    """A saved cross-encoder folder (Hopscotch's, or any sentence-transformers ``CrossEncoder`` folder) as a
    :class:`CrossEncoderModel`. Hopscotch's record gives the lengths, instruction and variant; a plain
    ``CrossEncoder`` folder reads queries alone (``query_input: query``), its pair length split in halves."""
    from sentence_transformers import CrossEncoder

    quiet_loading_bars()
    path = resolve_model_path(name)
    if not is_cross_encoder_folder(path):
        raise UsageError(f"model {str(name)!r}: not a cross-encoder (sentence_transformers CrossEncoder) folder; "
                         "train one with a model.kind: cross_encoder recipe")
    st = CrossEncoder(path, device=device or _device(), local_files_only=True)
    if st.num_labels != 1:
        raise UsageError(f"model {str(name)!r}: a cross-encoder with {st.num_labels} labels; reranking needs one "
                         "score per pair (num_labels 1)")
    saved = saved_hopscotch_config(path)
    if saved is None:
        half = int(st.max_seq_length or 512) // 2
        saved = {"query_max_len": half, "passage_max_len": half, "query_input": "query"}
    return CrossEncoderModel(st, CrossEncoderConfig.from_json(saved), path)
