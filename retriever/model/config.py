"""A model folder's encoding settings: :class:`EncoderConfig` (saved as ``hopscotch_config.json``),
reading it back (:func:`read_saved_config`), and what search needs of it (:func:`model_settings`).

A folder saved by :func:`hopscotch.retriever.model.saving.save_model` carries ``hopscotch_config.json``: the passage
prefix and length, the query instruction and length, the query input variant (``query_input``, with its
alias ``reasoning_aware``; see :mod:`~hopscotch.retriever.model.query_input`), and a separate
``query_encoder/`` tower when the towers were not shared. A plain sentence-transformers folder (the
bundled ``minilm``) has none of these and gets the defaults.

A trained folder (``model_settings("runs/agentir/final")``) has what it was trained with; the bundled model
has the defaults:

>>> s = model_settings("minilm")
>>> s.passage_prefix, s.instruction, s.query_max_len, s.query_tower, s.trained
('', '', None, None, False)
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.model.loading import resolve_model_path
from hopscotch.retriever.model.matryoshka import check_matryoshka
from hopscotch.retriever.model.query_input import QueryInput, default_query_input

HOPSCOTCH_CONFIG = "hopscotch_config.json"
#: ``kind`` in ``hopscotch_config.json``: what the folder holds; a folder without one is ``single_vector``
SINGLE_VECTOR, MULTI_VECTOR, CROSS_ENCODER = "single_vector", "multi_vector", "cross_encoder"
MODEL_KINDS = (SINGLE_VECTOR, MULTI_VECTOR, CROSS_ENCODER)
#: the kinds that score (query, document) candidates rather than encode: ``--rerank-model`` takes their folders
RERANKER_KINDS = (MULTI_VECTOR, CROSS_ENCODER)
_ST_MODE_TO_POOLING = {"cls": "cls", "mean": "mean", "lasttoken": "last"}
POOLINGS = ("cls", "mean", "last")


def checked_weight(value, what: str) -> float | None:
    """None, or ``value`` as a weight in [0, 1]; else a UsageError naming ``what`` (a recipe key or a flag)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
        raise UsageError(f"{what}: expected a weight in [0, 1], got {value!r}")
    return float(value)


def checked_count(value, what: str) -> int | None:
    """None, or ``value`` as a whole number >= 1; else a UsageError naming ``what`` (a recipe key or a flag)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{what}: expected a whole number >= 1, got {value!r}")
    return value


@dataclass
class EncoderConfig:
    """What the model needs besides weights; saved as ``hopscotch_config.json`` next to them.

    These fields are also the knobs of a training recipe's ``model`` section (``temperature`` and
    ``learn_temperature`` sit in its ``loss`` section): the recipe derives them from this class, so each
    is defined here only.
    """

    pooling: str = "mean"            # cls | mean | last
    normalize: bool = True           # L2-normalise embeddings (scores are cosines)
    query_max_len: int = 128         # tokens; the reasoning is cut from the left to fit, the query survives
    passage_max_len: int = 256       # tokens; passages are cut from the right
    instruction: str = ""            # prefix of every query (AgentIR: 'Instruct: ...\nQuery: ')
    passage_prefix: str = ""         # prefix of every passage
    reasoning_aware: bool = True     # alias of query_input: true = 'reasoning', false = 'query'
    query_input: str | None = None   # query, prior_queries, reasoning, current_reasoning, reasoning_tail:N,
    #                                  reasoning_focus:N, with_documents; None: from reasoning_aware. Every
    #                                  variant but 'query' is 'Reasoning: {text}\n\nQuery: {query}' (see
    #                                  model/query_input.py)
    temperature: float = 0.05        # InfoNCE temperature (the starting value when learnt)
    learn_temperature: bool = False  # learn log(temperature) with the weights
    shared_towers: bool = True       # one backbone for queries and passages; False: a separate query tower
    padding_side: str | None = None  # left | right; None: left for 'last' pooling, right otherwise
    lora: dict = field(default_factory=dict)  # peft LoRA {r, alpha, dropout, target_modules}; {}: none
    # search-time defaults of `hopscotch search --reasoning` (the dense searcher's --query-mix and
    # --query-mix-max-words): score reasoning-aware queries by w * reasoning-aware + (1 - w) * query-only,
    # and search reasoning contexts longer than late_fusion_max_words words with weight late_fusion_long instead
    # (null: 0, the query alone)
    late_fusion: float | None = None
    late_fusion_max_words: int | None = None
    late_fusion_long: float | None = None
    # index-time default of `hopscotch index` (its --windows and --window-stride): a document longer than
    # passage_max_len is indexed as up to passage_windows windows, window_stride tokens apart (null: 80% of
    # passage_max_len), and scored by its best one (index/windows.py); 1 = its first window only
    passage_windows: int = 1
    window_stride: int | None = None
    # recipe keys loss.matryoshka_dims / loss.matryoshka_weights (model/matryoshka.py): the nested prefixes the
    # loss sums InfoNCE over (descending, e.g. [384, 256, 128, 64]) and their weights (null: 1 each); saved, they
    # record what the model was trained on (index/search --dim warn about others); null: off, the whole vector
    matryoshka_dims: list[int] | None = None
    matryoshka_weights: list[float] | None = None

    def __post_init__(self):
        if self.pooling not in POOLINGS:
            raise UsageError(f"model.pooling: expected one of {POOLINGS}, got {self.pooling!r}")
        if not self.temperature > 0:
            raise UsageError(f"loss.temperature: expected a number > 0, got {self.temperature}")
        for name in ("query_max_len", "passage_max_len"):
            if not getattr(self, name) >= 1:
                raise UsageError(f"model.{name}: expected a whole number >= 1, got {getattr(self, name)!r}")
        self._resolve_query_input()
        self.late_fusion = checked_weight(self.late_fusion, "model.query_mix")
        self.late_fusion_long = checked_weight(self.late_fusion_long, "model.query_mix_long")
        self.matryoshka_dims, self.matryoshka_weights = check_matryoshka(self.matryoshka_dims, self.matryoshka_weights)
        for name in ("late_fusion_max_words", "passage_windows", "window_stride"):
            public = name.replace("late_fusion", "query_mix")  # the recipe key (the field keeps its former name)
            setattr(self, name, checked_count(getattr(self, name), f"model.{public}"))
        if self.padding_side is None:
            self.padding_side = "left" if self.pooling == "last" else "right"
        if self.padding_side not in ("left", "right"):
            raise UsageError(f"model.padding_side: expected 'left' or 'right', got {self.padding_side!r}")


    def _resolve_query_input(self) -> None:
        """``query_input`` wins when set (``reasoning_aware`` follows it); unset, it follows ``reasoning_aware``."""
        if self.query_input is None:
            self.query_input = str(default_query_input(self.reasoning_aware))
            return
        variant = QueryInput.parse(self.query_input, "model.query_input")
        if variant.uses_reasoning and not self.reasoning_aware:
            raise UsageError(f"model.query_input={variant} contradicts model.reasoning_aware=false (its alias for "
                             "'query'): set only model.query_input")
        self.query_input, self.reasoning_aware = str(variant), variant.uses_reasoning

    def query_variant(self) -> QueryInput:
        """The parsed variant. ``reasoning_aware`` changed after construction keeps its old meaning: false is
        ``query``; true over a ``query`` variant is ``reasoning``."""
        if not self.reasoning_aware:
            return default_query_input(False)
        variant = QueryInput.parse(self.query_input or "reasoning", "model.query_input")
        return variant if variant.uses_reasoning else default_query_input(True)


def saved_hopscotch_config(path: str | os.PathLike) -> dict | None:
    """The raw ``hopscotch_config.json`` of a model folder, or None when it has none."""
    file = Path(path) / HOPSCOTCH_CONFIG
    return json.loads(file.read_text()) if file.is_file() else None


def saved_model_kind(path: str | os.PathLike) -> str:
    """``single_vector``, ``multi_vector`` or ``cross_encoder``: the ``kind`` a folder's ``hopscotch_config.json``
    records (folders without one, every single-vector folder among them, are ``single_vector``)."""
    kind = (saved_hopscotch_config(path) or {}).get("kind") or SINGLE_VECTOR
    if kind not in MODEL_KINDS:
        raise UsageError(f"{Path(path) / HOPSCOTCH_CONFIG}: unknown kind {kind!r} (expected one of {MODEL_KINDS})")
    return kind


def refuse_multi_vector(path: str | os.PathLike) -> None:
    """A one-line UsageError when ``path`` is a multi-vector (late-interaction) or a cross-encoder model folder:
    sentence-transformers would load it as a single-vector encoder (dropping a projection, or a classifier head), so
    every single-vector path checks first."""
    if not Path(path).is_dir():
        return
    if saved_model_kind(path) == CROSS_ENCODER:
        raise UsageError(_CROSS_ENCODER_NOT_ENCODER.format(path=path))
    if saved_model_kind(path) == MULTI_VECTOR:
        raise UsageError(f"{path}: a multi-vector (late-interaction) model, not a single-vector encoder: use it "
                         "to rerank (hopscotch search --rerank-model), index it as a multi-vector index (hopscotch "
                         "index --model), or load it with hopscotch.retriever.model.multi_vector.load_multi_vector_model")


_CROSS_ENCODER_NOT_ENCODER = ("{path}: a cross-encoder (reranker) model, not an encoder: use it to rerank (hopscotch "
                              "search --rerank-model), or load it with sentence_transformers.CrossEncoder")


def read_saved_config(path: str | os.PathLike):
    """The :class:`EncoderConfig` of a saved folder: ``hopscotch_config.json`` or, for a
    plain sentence-transformers folder, its pooling and normalisation; ``None`` for a bare HF folder.
    A multi-vector folder (``kind: multi_vector``) has no single-vector config: a one-line UsageError."""
    path = Path(path)
    if saved_model_kind(path) == CROSS_ENCODER:
        raise UsageError(_CROSS_ENCODER_NOT_ENCODER.format(path=path))
    if saved_model_kind(path) == MULTI_VECTOR:
        raise UsageError(f"{path}: a multi-vector (late-interaction) model, not a single-vector encoder: use it "
                         "to rerank (hopscotch search --rerank-model), or load it with "
                         "hopscotch.retriever.model.multi_vector.load_multi_vector_model")
    if (path / HOPSCOTCH_CONFIG).is_file():
        saved = json.loads((path / HOPSCOTCH_CONFIG).read_text())
        saved["lora"] = {}
        known = EncoderConfig.__dataclass_fields__
        return EncoderConfig(**{k: v for k, v in saved.items() if k in known})
    pool_file = path / "1_Pooling" / "config.json"
    if not pool_file.is_file():
        return None
    pool = json.loads(pool_file.read_text())
    mode = pool.get("pooling_mode")
    if mode is None:
        mode = next((m for m, flag in (("cls", "pooling_mode_cls_token"), ("lasttoken", "pooling_mode_lasttoken"))
                     if pool.get(flag)), "mean")
    modules = json.loads((path / "modules.json").read_text()) if (path / "modules.json").is_file() else []
    normalize = any("Normalize" in m.get("type", "") for m in modules)
    pooling = _ST_MODE_TO_POOLING.get(mode if isinstance(mode, str) else mode[0], "mean")
    return EncoderConfig(pooling=pooling, normalize=normalize)  # padding: left for last-token pooling


@dataclass
class ModelSettings:
    path: str
    passage_prefix: str = ""
    passage_max_len: int | None = None
    instruction: str = ""
    query_max_len: int | None = None
    reasoning_aware: bool = False
    query_input: str | None = None   # the saved model's variant; None: not a Hopscotch-trained folder
    query_tower: str | None = None   # folder of a separate query encoder
    trained: bool = False            # the folder came from Hopscotch training
    late_fusion: float | None = None          # the model's default --query-mix (EncoderConfig)
    late_fusion_max_words: int | None = None  # the model's default --query-mix-max-words (EncoderConfig)
    late_fusion_long: float | None = None     # the model's default --query-mix-long (EncoderConfig)
    passage_windows: int | None = None        # the model's default index --windows (EncoderConfig)
    window_stride: int | None = None          # the model's default index --window-stride (EncoderConfig)
    matryoshka_dims: list[int] | None = None  # the Matryoshka prefixes it was trained on (EncoderConfig)


def model_settings(model: str | os.PathLike) -> ModelSettings:
    path = resolve_model_path(model)
    if not (Path(path) / HOPSCOTCH_CONFIG).is_file():
        return ModelSettings(path)
    if saved_model_kind(path) == CROSS_ENCODER:
        raise UsageError(_CROSS_ENCODER_NOT_ENCODER.format(path=path))
    if saved_model_kind(path) == MULTI_VECTOR:  # the model adds its own [D] marker / prompt to documents
        saved = saved_hopscotch_config(path)
        variant = saved.get("query_input") or "query"
        return ModelSettings(path, passage_max_len=saved.get("passage_max_len"),
                             query_max_len=saved.get("query_max_len"), query_input=variant,
                             reasoning_aware=QueryInput.parse(variant).uses_reasoning, trained=True,
                             late_fusion=saved.get("late_fusion"))
    c = read_saved_config(path)
    tower = Path(path) / "query_encoder"
    return ModelSettings(path, passage_prefix=c.passage_prefix, passage_max_len=c.passage_max_len,
                         instruction=c.instruction, query_max_len=c.query_max_len,
                         reasoning_aware=c.reasoning_aware, query_input=str(c.query_variant()),
                         query_tower=str(tower) if not c.shared_towers and tower.is_dir() else None, trained=True,
                         late_fusion=c.late_fusion, late_fusion_max_words=c.late_fusion_max_words,
                         late_fusion_long=c.late_fusion_long, passage_windows=c.passage_windows, window_stride=c.window_stride,
                         matryoshka_dims=c.matryoshka_dims)
