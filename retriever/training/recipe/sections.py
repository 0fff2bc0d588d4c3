"""What a recipe holds: five sections, one dataclass each, every key with its default, type, range and a comment.

``model`` (:class:`ModelRecipe`, with ``model.lora``: :class:`LoraRecipe`), ``loss`` (:class:`LossRecipe`), ``data``
(:class:`DataRecipe`), ``train`` (:class:`TrainRecipe`) and ``eval`` (:class:`EvalRecipe`), together a
:class:`Recipe`. The encoder's own settings (pooling, lengths, instruction, temperature, ...) are not spelled here:
the ``model`` and ``loss`` sections take those fields, with their types and defaults, from
:class:`~hopscotch.retriever.model.config.EncoderConfig`, and :meth:`Recipe.encoder_config` maps them back.

``model.kind`` (:class:`ModelKindKeys`): ``single_vector`` (the default: the dual encoder, one pooled vector per
text) or ``multi_vector`` (late interaction, ColBERT-style: one vector per token, scored by MaxSim; the model of
:mod:`hopscotch.retriever.model.multi_vector`, saved as a ``sentence_transformers.MultiVectorEncoder`` folder).
The multi-vector model's own keys::

    model.dim                 128     the size of every token vector (a bias-free projection of the backbone's)
    model.query_augmentation  32      pad shorter queries to this many tokens with [MASK] (scored, not attended
                                      to); null: no augmentation. At most model.query_max_len
    model.skiplist            true    drop punctuation tokens from documents (never from queries)
    model.query_marker        "[Q]"   put in front of every query ("" for none)
    model.document_marker     "[D]"   put in front of every document ("" for none)

A multi-vector recipe shares the lengths, ``instruction``, ``query_input`` (and ``reasoning_aware``),
``late_fusion``, ``dtype`` and ``gradient_checkpointing`` with the single-vector one; the single-vector-only
keys (pooling, normalize, padding side, passage prefix, separate towers, LoRA, windows, ...) and the
multi-vector-only keys above are refused, naming the key, when set away from their defaults for the other kind
(:func:`check_model_kind`). ``loss.temperature`` divides MaxSim scores (sums over query tokens, not cosines):
multi-vector recipes use about 1 (sentence-transformers' and PyLate's default scale).

``cross_encoder`` (a reranker: the query and a document read together, one logit; the model of
:mod:`hopscotch.retriever.model.cross_encoder`, saved as a ``sentence_transformers.CrossEncoder`` folder) takes the
shared keys but ``late_fusion``; its pair is ``query_max_len + passage_max_len`` tokens, the query side (the reasoning
cut from the left) at most ``query_max_len <= passage_max_len`` of them. Its loss is listwise cross-entropy over each
query's own group (:mod:`hopscotch.retriever.training.listwise`; ``loss.temperature`` 1: the logits themselves).

``loss.distill`` (:class:`DistillKeys`) adds a distillation term from the teacher scores the tuples carry.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field, fields
from typing import Literal

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.model.config import CROSS_ENCODER, MODEL_KINDS, MULTI_VECTOR, SINGLE_VECTOR, EncoderConfig
from hopscotch.retriever.model.multi_vector import DEFAULT_MARKERS
from hopscotch.retriever.training.loss import DISTILL_LOSSES
from hopscotch.retriever.training.recipe.knobs import knob

SCHEDULERS = ("linear", "cosine", "constant")

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


# single-vector-only keys a multi-vector recipe must leave at their defaults (EncoderConfig's; ModelRecipe's own)
_SINGLE_VECTOR_ONLY = ("pooling", "normalize", "passage_prefix", "shared_towers", "late_fusion_max_words",
                       "late_fusion_long", "passage_windows", "window_stride")


@dataclass
class ModelKindKeys:
    """``model.kind`` and the multi-vector keys; checked together with the rest of ``model`` on construction."""

    kind: Literal[MODEL_KINDS] = SINGLE_VECTOR      # single_vector | multi_vector | cross_encoder
    dim: int = knob(128, ge=1)                      # multi-vector: size of every token vector
    query_augmentation: int | None = knob(32, ge=1, hint="null: no [MASK] augmentation")  # multi-vector
    skiplist: bool = True                           # multi-vector: drop punctuation tokens from documents
    query_marker: str = DEFAULT_MARKERS[0]          # multi-vector: in front of every query ("" for none)
    document_marker: str = DEFAULT_MARKERS[1]       # multi-vector: in front of every document ("" for none)

    def __post_init__(self):
        check_model_kind(self)


def check_model_kind(model) -> None:
    """Refuse keys of another kind set away from their defaults, and settings of one kind that contradict;
    ``model`` is a :class:`ModelRecipe`."""
    if model.kind != MULTI_VECTOR:  # the multi-vector keys
        for key, f in ModelKindKeys.__dataclass_fields__.items():
            if key != "kind" and getattr(model, key) != f.default:
                raise UsageError(f"recipe key model.{key} applies to model.kind {MULTI_VECTOR} only, got "
                                 f"{getattr(model, key)!r} with model.kind {model.kind}")
    if model.kind == SINGLE_VECTOR:
        return
    defaults = EncoderConfig()
    for key in _SINGLE_VECTOR_ONLY:
        if getattr(model, key) != getattr(defaults, key):
            public = key.replace("late_fusion", "query_mix")  # the recipe key of that field
            raise UsageError(f"recipe key model.{public} applies to model.kind {SINGLE_VECTOR} only, got "
                             f"{getattr(model, key)!r} with model.kind {model.kind}")
    for key, wanted in (("padding_side", (None, "right")), ("attn_implementation", (None,))):
        if getattr(model, key) not in wanted:
            raise UsageError(f"recipe key model.{key}: a {model.kind} model takes {wanted[-1]!r} "
                             f"(sentence-transformers' own modules), got {getattr(model, key)!r}")
    if model.lora.enabled:
        raise UsageError(f"recipe key model.lora.enabled: LoRA trains {SINGLE_VECTOR} models only; a {model.kind} "
                         "model is fine-tuned in full")
    if model.kind == CROSS_ENCODER:
        _check_cross_encoder(model)
    elif model.query_augmentation is not None and model.query_augmentation > model.query_max_len:
        raise UsageError(f"recipe key model.query_augmentation must be <= model.query_max_len ({model.query_max_len})"
                         f", got {model.query_augmentation}")


def _check_cross_encoder(model) -> None:
    """A cross-encoder has no query mix, and its query side takes at most half of the pair
    (:class:`~hopscotch.retriever.model.cross_encoder.CrossEncoderConfig`)."""
    if model.late_fusion is not None:
        raise UsageError(f"recipe key model.query_mix applies to encoders (a query mix of two encodings), got "
                         f"{model.late_fusion!r} with model.kind {CROSS_ENCODER}")
    if model.query_max_len > model.passage_max_len:
        raise UsageError(f"recipe key model.query_max_len must be <= model.passage_max_len ({model.passage_max_len}) "
                         f"with model.kind {CROSS_ENCODER} (the query side takes at most half of the pair of "
                         f"query_max_len + passage_max_len tokens), got {model.query_max_len}")


@dataclass
class DistillKeys:
    """``loss.distill`` and its keys: a distillation term from the teacher scores the tuples carry (DR-Synth's oracle's,
    a ``score`` on every passage) beside InfoNCE, ``infonce_weight * InfoNCE + distill_weight * distill``
    (:mod:`hopscotch.retriever.training.loss` has the formulas). ``none`` (the default) is the plain InfoNCE loss."""

    distill: Literal[DISTILL_LOSSES] = "none"       # none | kl | margin_mse
    distill_weight: float = knob(1.0, gt=0)         # the distillation term's weight
    infonce_weight: float = knob(1.0, ge=0, hint="0: the distillation term alone")  # InfoNCE's weight
    teacher_temperature: float = knob(1.0, gt=0)    # divides the teacher's scores
    student_temperature: float | None = knob(None, gt=0, hint="null: loss.temperature, learnt or not")  # the student's


@dataclass
class ModelRecipe(_encoder_base("_EncoderModelFields", "model"), ModelKindKeys):
    """``model``: the backbone and how it is loaded; every :class:`EncoderConfig` field but the temperature's
    (``pooling``, ``normalize``, ``query_max_len``, ``instruction``, ``query_input``, ``padding_side``, ...) with
    EncoderConfig's types, defaults and meaning (``query_input``: ``query``, ``prior_queries``, ``reasoning``,
    ``current_reasoning``, ``reasoning_tail:N``, ``reasoning_focus:N``, ``with_documents``; unset, ``reasoning_aware``
    picks ``reasoning`` or ``query``); ``kind`` and the multi-vector keys (:class:`ModelKindKeys`)."""

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


def query_input_mixture(data: DataRecipe) -> dict[str, float] | None:
    """``{variant: probability}`` of the recipe's training mixture (None: no mixture)."""
    if not data.query_inputs:
        return None
    weights = data.query_input_weights or [1.0] * len(data.query_inputs)
    out: dict[str, float] = {}
    for v, w in zip(data.query_inputs, weights):
        out[v.strip()] = out.get(v.strip(), 0.0) + w / float(sum(weights))
    return out
