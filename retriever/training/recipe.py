"""Recipes: a typed :class:`Recipe` read from a YAML experiment file plus ``key=value`` overrides.

A recipe has five sections, one dataclass each: ``model`` (:class:`ModelRecipe`, with ``model.lora``:
:class:`LoraRecipe`), ``loss`` (:class:`LossRecipe`), ``data`` (:class:`DataRecipe`), ``train``
(:class:`TrainRecipe`) and ``eval`` (:class:`EvalRecipe`). Every key has a default; a recipe sets some,
the command line overrides any::

    train.py --recipe recipes/minilm_hotpot.yaml --output out train.lr=3e-5 data.train=tuples.jsonl

    recipe = load_recipe("recipes/minilm_hotpot.yaml", ["train.lr=3e-5"])
    recipe.train.lr, recipe.model.pooling, recipe.encoder_config()

Values on the command line are parsed as YAML (``3e-5`` a float, ``[a.jsonl, b.jsonl]`` a list, ``null`` None).
An unknown key (with the closest known names), a value of the wrong type, one out of range (``command line:
recipe key train.lr must be > 0, got -1``) or not finite is an error naming the key, raised before anything
is loaded; so are contradicting keys (``train.warmup_steps`` over ``train.max_steps``, an unknown
``eval.metric``). The encoder's own settings (pooling, lengths, instruction, temperature, ...) are not
spelled here: the ``model`` and ``loss`` sections take those fields, with their types and defaults, from
:class:`~hopscotch.retriever.model.config.EncoderConfig`, and :meth:`Recipe.encoder_config` maps them back.
``dataclasses.asdict(recipe)`` is the resolved recipe as the nested dict that ``train_summary.json`` stores.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import operator
import os
import types
import typing
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Literal, Union

import yaml

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.common import decoded_lines
from hopscotch.retriever.model.config import EncoderConfig
from hopscotch.retriever.training.recipe_kinds import DistillKeys, ModelKindKeys, check_loss_kind

SCHEDULERS = ("linear", "cosine", "constant")
_MISSING = dataclasses.MISSING


def knob(default, *, hint: str | None = None, ceiling: tuple[float, str] | None = None, **limits):
    """A recipe field: its default, the range (``gt``, ``ge``, ``le``, ``lt``; None always passes) and ``ceiling``
    ``(limit, why)`` (the most that means anything) :func:`load_recipe` enforces; ``hint``: what sentinels mean."""
    return field(default=default, metadata={"bounds": limits, "hint": hint, "ceiling": ceiling})


# Where a recipe keeps each EncoderConfig field: in ``model`` unless listed here. The temperature and the Matryoshka
# prefixes shape the loss: recipes set them under ``loss``; ``lora`` (a dict in EncoderConfig) is ``model.lora``.
_ENCODER_FIELD_SECTION = {"temperature": "loss", "learn_temperature": "loss", "matryoshka_dims": "loss",
                          "matryoshka_weights": "loss", "lora": "model.lora"}
# The ranges of EncoderConfig's numeric fields (EncoderConfig checks them too, without saying where they were set).
_ENCODER_BOUNDS = {"temperature": {"gt": 0}, "query_max_len": {"ge": 1}, "passage_max_len": {"ge": 1},
                  "passage_windows": {"ge": 1}, "window_stride": {"ge": 1}}


def _encoder_fields(section: str) -> list[tuple]:
    """The EncoderConfig fields a section carries, with their types and defaults, for ``make_dataclass``."""
    hints = typing.get_type_hints(EncoderConfig)
    return [(f.name, hints[f.name], field(default=f.default, default_factory=f.default_factory,
                                          metadata={"bounds": _ENCODER_BOUNDS.get(f.name, {})}))
            for f in fields(EncoderConfig) if _ENCODER_FIELD_SECTION.get(f.name, "model") == section]


def _encoder_base(name: str, section: str) -> type:
    return dataclasses.make_dataclass(name, _encoder_fields(section), namespace={"__module__": __name__})


@dataclass
class LoraRecipe:
    """``model.lora``: peft LoRA adapters on the backbone; merged into the weights when the model is saved."""

    enabled: bool = False
    r: int = knob(16, ge=1)                         # adapter rank
    alpha: int = knob(32, ge=1)                     # scaling numerator (scale = alpha / r)
    dropout: float = knob(0.1, ge=0, lt=1)
    target_modules: list[str] | str | None = None   # module names or a regex; None: peft's default for the model


@dataclass
class ModelRecipe(_encoder_base("_EncoderModelFields", "model"), ModelKindKeys):
    """``model``: the backbone and how it is loaded; every :class:`EncoderConfig` field but the temperature's
    (``pooling``, ``normalize``, ``query_max_len``, ``instruction``, ``query_input``, ``padding_side``, ...) with
    EncoderConfig's types, defaults and meaning (``query_input``: ``query``, ``prior_queries``, ``reasoning``,
    ``current_reasoning``, ``reasoning_tail:N``, ``reasoning_focus:N``, ``with_documents``; unset, ``reasoning_aware``
    picks ``reasoning`` or ``query``); ``kind`` and the multi-vector keys (:class:`~.recipe_kinds.ModelKindKeys`)."""

    name: str = "minilm"                   # 'minilm' (bundled), or a local HF / sentence-transformers folder
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"   # of the weights
    attn_implementation: str | None = None  # e.g. sdpa, flash_attention_2; None: transformers' default
    gradient_checkpointing: bool = False    # recompute activations in backward: less memory, more time
    lora: LoraRecipe = field(default_factory=LoraRecipe)


@dataclass
class LossRecipe(DistillKeys, _encoder_base("_EncoderLossFields", "loss")):
    """``loss``: InfoNCE over in-batch, hard and cross-process negatives (over nested prefixes with ``matryoshka_dims``;
    ``temperature``, ``learn_temperature``, ``matryoshka_*``: EncoderConfig's); ``distill*``: :class:`DistillKeys`."""

    backend: str = "auto"  # auto (fused on CUDA, reference elsewhere) | fused | reference (check_loss_kind)
    exclude_positive_duplicates: bool = True  # a copy of a query's positive is not one of its negatives
    cross_process_negatives: bool = True      # score against every process's passages


@dataclass
class DataRecipe:
    """``data``: the training tuples and how they are grouped into batches."""

    train: str | list[str] | None = None     # required: a tuple file, a folder, org/name[:split], or a list
    corpus: str | None = None  # where Tevatron's newer-format rows (positive_document_ids, ...) find their texts
    group_size: int = knob(8, ge=1)           # passages per query: 1 positive + group_size-1 hard negatives
    length_grouping: bool = True              # batches of similar lengths (sorted within mega-batches)
    pad_to_multiple_of: int | None = knob(8, ge=1, hint="null: no rounding")   # round padded lengths up
    max_tuples: int | None = knob(None, ge=1)        # read only the first N tuples
    # the training mixture of query input variants: each tuple draws one per epoch (seeded by train.seed),
    # e.g. [query, current_reasoning, reasoning, empty_reasoning]; empty_reasoning = the reasoning template
    # with its text dropped ('Reasoning: Empty'). None: every query in model.query_input
    query_inputs: list[str] | None = None
    query_input_weights: list[float] | None = None   # one per query_inputs entry (relative, >= 0); None: uniform


@dataclass
class TrainRecipe:
    """``train``: optimisation, schedule, precision, logging and checkpoints."""

    seed: int = knob(42, ge=0)                        # initial weights (LoRA, temperature), data order, dropout
    batch_size: int = knob(16, ge=1)                  # queries per process per step (per micro-step)
    grad_accum_steps: int = knob(1, ge=1)             # global batches per optimizer step
    gradcache_chunk_size: int | None = knob(None, ge=1, hint="null: no GradCache")  # GradCache mini-batch size
    encode_chunk_size: int | None = knob(None, ge=1)  # length-sorted sub-batches within one forward
    lr: float = knob(2e-5, gt=0, ceiling=(1, "a larger step diverges"))  # peak learning rate
    weight_decay: float = knob(0.01, ge=0)            # not on biases, norms and the temperature
    optimizer: Literal["adamw"] = "adamw"             # the only one so far
    scheduler: Literal[SCHEDULERS] = "linear"         # after warmup: linear or cosine decay, or constant
    warmup_ratio: float = knob(0.1, ge=0, le=1)       # of the total steps
    warmup_steps: int | None = knob(None, ge=0)       # overrides warmup_ratio
    epochs: int = knob(1, ge=1)                       # passes over the tuples
    max_steps: int | None = knob(None, ge=1, hint="null, the default: train.epochs decide")  # overrides epochs
    max_grad_norm: float | None = knob(1.0, ge=0, hint="0 or null: no clipping")
    mixed_precision: Literal["no", "bf16", "fp16"] = "no"   # accelerate's autocast; write "no" quoted in YAML
    threads: int | None = knob(None, ge=1, hint="null: $OMP_NUM_THREADS")  # torch.set_num_threads on CPU
    log_every: int = knob(10, ge=0, hint="0: never")  # optimizer steps between logged losses
    save_every: int = knob(500, ge=0, hint="0: only the final model")  # checkpoint every N optimizer steps
    save_total_limit: int | None = knob(2, ge=0, hint="0 or null: keep all")  # checkpoints kept
    wise_ft_alpha: float = knob(1.0, ge=0, le=1, hint="1: as fine-tuned")  # final/ mixed with the start (WiSE-FT)
    report_to: Literal["none", "wandb"] = "none"      # wandb: WANDB_MODE=offline|disabled from the environment
    run_name: str | None = None                       # the wandb run's name


@dataclass
class EvalRecipe:
    """``eval``: a dev set scored during training; the best model is kept in ``OUTPUT/best``."""

    queries: str | None = None     # dev queries (JSONL with optional 'reasoning'); None: no dev evaluation
    corpus: str | None = None      # required with queries
    qrels: str | None = None       # required with queries
    every: int = knob(0, ge=0, hint="0: only at the end")  # evaluate every N steps
    metric: str = "ndcg@10"        # the metric that picks the best model
    batch_size: int = knob(64, ge=1)  # texts per forward when embedding the dev set
    max_queries: int | None = knob(None, ge=1)  # score only the first N dev queries that have qrels


@dataclass
class Recipe:
    """A whole recipe; :func:`load_recipe` builds and checks one."""

    model: ModelRecipe = field(default_factory=ModelRecipe)
    loss: LossRecipe = field(default_factory=LossRecipe)
    data: DataRecipe = field(default_factory=DataRecipe)
    train: TrainRecipe = field(default_factory=TrainRecipe)
    eval: EvalRecipe = field(default_factory=EvalRecipe)

    def encoder_config(self) -> EncoderConfig:
        """The model's :class:`EncoderConfig`: each field read from the section that holds it."""
        sections = {"model": self.model, "loss": self.loss}
        values = {f.name: getattr(sections[_ENCODER_FIELD_SECTION.get(f.name, "model")], f.name)
                  for f in fields(EncoderConfig) if f.name != "lora"}
        return EncoderConfig(**values, lora=dataclasses.asdict(self.model.lora) if self.model.lora.enabled else {})


# -- checking values -------------------------------------------------------------------------------

_NONE = type(None)
_NAMES = {bool: "true/false", int: "a whole number", float: "a number", str: "a string", _NONE: "null"}
_LIMITS = {"gt": (">", operator.gt), "ge": (">=", operator.ge), "le": ("<=", operator.le), "lt": ("<", operator.lt)}


@functools.cache
def _schema(cls: type) -> dict[str, tuple[object, dict]]:
    """``{field: (type, {"bounds": ..., "hint": ...})}`` of a section."""
    hints = typing.get_type_hints(cls)
    return {f.name: (hints[f.name], f.metadata or {"bounds": {}}) for f in fields(cls)}


@functools.cache
def recipe_keys() -> tuple[str, ...]:
    """Every dotted recipe key (``model.lora.r``, ``train.lr``, ...)."""
    def walk(cls, prefix):
        for name, (tp, _) in _schema(cls).items():
            yield from walk(tp, f"{prefix}{name}.") if dataclasses.is_dataclass(tp) else [prefix + name]
    return tuple(walk(Recipe, ""))


def _describe(tp) -> str:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (Union, types.UnionType):
        return " or ".join(_describe(a) for a in args)
    if origin is Literal:
        return "one of " + ", ".join(map(repr, args))
    if origin is list:
        return "a list of strings" if args == (str,) else "a list"
    return _NAMES.get(tp, getattr(tp, "__name__", str(tp)))


def _number(value, kind: type):
    if isinstance(value, str):  # YAML 1.1 reads '3e-5' (no dot) as a string
        try:
            value = float(value)
        except ValueError:
            return _MISSING
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return _MISSING
    if kind is int:
        return int(value) if float(value) == int(value) else _MISSING
    return float(value)


def _coerce(value, tp):
    """``value`` as type ``tp`` (numbers also from YAML strings such as '3e-5'), or ``_MISSING``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (Union, types.UnionType):
        if value is None:
            return None if _NONE in args else _MISSING
        for alternative in (a for a in args if a is not _NONE):
            if (out := _coerce(value, alternative)) is not _MISSING:
                return out
        return _MISSING
    if origin is Literal:
        return value if isinstance(value, str) and value in args else _MISSING
    if origin is list:
        items = [_coerce(v, args[0]) for v in value] if isinstance(value, list) else [_MISSING]
        return _MISSING if any(item is _MISSING for item in items) else items
    if tp is bool:
        return value if isinstance(value, bool) else _MISSING
    if tp in (int, float):
        return _number(value, tp)
    if tp is str:
        return os.fspath(value) if isinstance(value, (str, os.PathLike)) else _MISSING
    raise TypeError(f"recipe fields of type {tp!r} are not supported")


def _checked(value, tp, meta: dict, key: str, where: str):
    out = _coerce(value, tp)
    if out is _MISSING:
        hint = " (YAML reads yes/no/on/off as true/false: quote the word)" if isinstance(value, bool) else ""
        raise UsageError(f"{where}: recipe key {key}: expected {_describe(tp)}, got {value!r}{hint}")
    shown = value if isinstance(value, (int, float)) else out  # -1 as written, '3e-5' as the number it means
    if isinstance(out, float) and not math.isfinite(out):
        raise UsageError(f"{where}: recipe key {key} must be a finite number, got {shown!r}")
    bounds, ceiling = meta["bounds"], meta.get("ceiling")
    if out is not None and not all(_LIMITS[op][1](out, limit) for op, limit in bounds.items()):
        limits = " and ".join(f"{_LIMITS[op][0]} {limit}" for op, limit in bounds.items())
        hint = f" ({meta['hint']})" if meta.get("hint") else ""
        raise UsageError(f"{where}: recipe key {key} must be {limits}, got {shown!r}{hint}")
    if out is not None and ceiling and out > ceiling[0]:
        raise UsageError(f"{where}: recipe key {key} must be <= {ceiling[0]} ({ceiling[1]}), got {shown!r}")
    return out


def _unknown(key: str, known: list[str], where: str) -> UsageError:
    close = difflib.get_close_matches(key, recipe_keys(), n=2, cutoff=0.75)
    guess = f", did you mean {' or '.join(map(repr, close))}?" if close else ""
    return UsageError(f"{where}: unknown recipe key {key!r}{guess} (known: {', '.join(known)})")


def _merge(cls: type, values: dict, update: dict, where: str, prefix: str = "") -> None:
    """Check ``update`` against section ``cls`` and write its values into ``values`` (a nested dict)."""
    schema = _schema(cls)
    for key, value in update.items():
        full = f"{prefix}{key}"
        if key not in schema:
            raise _unknown(full, sorted(prefix + k for k in schema), where)
        tp, meta = schema[key]
        if dataclasses.is_dataclass(tp):
            if not isinstance(value, dict):
                raise UsageError(f"{where}: recipe key {full!r} is a section; expected a mapping, got {value!r}")
            _merge(tp, values[key], value, where, full + ".")
        else:
            values[key] = _checked(value, tp, meta, full, where)


def _build(cls: type, values: dict):
    return cls(**{name: _build(tp, values[name]) if dataclasses.is_dataclass(tp) else values[name]
                  for name, (tp, _) in _schema(cls).items()})


# -- reading ---------------------------------------------------------------------------------------

def parse_override(item: str) -> dict:
    """``'train.lr=3e-5'`` -> ``{'train': {'lr': 3e-05}}``."""
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise UsageError(f"override {item!r}: expected key=value, e.g. train.lr=3e-5")
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError as exc:
        raise UsageError(f"override {item!r}: the value is not valid YAML ({exc.problem})") from None
    node = out = {}
    parts = key.strip().split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
    return out


def _read_yaml(recipe: str | os.PathLike) -> tuple[dict, str]:
    path = Path(recipe)
    if not path.is_file():
        raise UsageError(f"--recipe {recipe}: no such file")
    try:
        data = yaml.safe_load("".join(line for _, line in decoded_lines(path))) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        raise UsageError(f"{path}{line}: expected a YAML mapping of sections ({exc})") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a YAML mapping of sections, got {type(data).__name__}")
    return data, str(path)


def load_recipe(recipe: str | os.PathLike | dict | Recipe | None, overrides: list[str] | tuple = ()) -> Recipe:
    """Defaults, then the recipe (a YAML path, a nested dict or a :class:`Recipe`), then ``key=value``
    overrides; every value checked for its key's type and range."""
    values = dataclasses.asdict(Recipe())
    if isinstance(recipe, Recipe):
        _merge(Recipe, values, dataclasses.asdict(recipe), "recipe")
    elif isinstance(recipe, dict):
        _merge(Recipe, values, recipe, "recipe")
    elif recipe is not None:
        _merge(Recipe, values, *_read_yaml(recipe))
    for item in overrides:
        _merge(Recipe, values, parse_override(item), "command line")
    out = _build(Recipe, values)
    if not out.data.train:
        raise UsageError("recipe key data.train is required (a tuple file or a list of them)")
    if out.eval.queries and not (out.eval.corpus and out.eval.qrels):
        raise UsageError("recipe keys eval.corpus and eval.qrels are required with eval.queries")
    out.encoder_config()  # EncoderConfig checks pooling, lengths, padding side, temperature, Matryoshka keys
    check_loss_kind(out)
    _check_mixture(out.data)
    _check_together(out)
    return out


def _check_together(recipe: Recipe) -> None:
    """Keys in range alone but not together: warmup longer than the run, a dev metric nobody computes."""
    from hopscotch.retriever.evaluation.metrics import parse_metric

    tr = recipe.train
    if tr.warmup_steps is not None and tr.max_steps is not None and tr.warmup_steps > tr.max_steps:
        raise UsageError(f"recipe key train.warmup_steps must be <= train.max_steps ({tr.max_steps}), got {tr.warmup_steps}")
    try:
        parse_metric(recipe.eval.metric)
    except UsageError as exc:
        raise UsageError(f"recipe key eval.metric: {exc}") from None


def _check_mixture(data: DataRecipe) -> None:
    """``data.query_inputs`` names variants (or ``empty_reasoning``); its weights match it, >= 0, not all 0."""
    from hopscotch.retriever.training.batches import parse_variant

    variants, weights = data.query_inputs, data.query_input_weights
    if variants is not None:
        if not variants:
            raise UsageError("recipe key data.query_inputs: expected a non-empty list of variants or null")
        for v in variants:
            parse_variant(v, "recipe key data.query_inputs")
    if weights is not None and (variants is None or len(weights) != len(variants)):
        raise UsageError(f"recipe key data.query_input_weights: expected one weight per data.query_inputs entry "
                         f"({len(variants or [])}), got {len(weights)}")
    if weights is not None and (min(weights) < 0 or sum(weights) <= 0):
        raise UsageError(f"recipe key data.query_input_weights: expected weights >= 0, not all 0, got {weights}")


def query_input_mixture(data: DataRecipe) -> dict[str, float] | None:
    """``{variant: probability}`` of the recipe's training mixture (None: no mixture)."""
    if not data.query_inputs:
        return None
    weights = data.query_input_weights or [1.0] * len(data.query_inputs)
    out: dict[str, float] = {}
    for v, w in zip(data.query_inputs, weights):
        out[v.strip()] = out.get(v.strip(), 0.0) + w / float(sum(weights))
    return out
