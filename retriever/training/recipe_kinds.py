"""The ``model.kind`` keys of a recipe (part of :class:`~hopscotch.retriever.training.recipe.ModelRecipe`), and the
``loss.distill`` keys (part of :class:`~hopscotch.retriever.training.recipe.LossRecipe`, see :class:`DistillKeys`).

``model.kind``: ``single_vector`` (the default: the dual encoder, one pooled vector per text) or
``multi_vector`` (late interaction, ColBERT-style: one vector per token, scored by MaxSim; the model of
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
multi-vector-only keys above are refused, naming the key, when set away from their defaults for the other kind.
``loss.temperature`` divides MaxSim scores (sums over query tokens, not cosines): multi-vector recipes use
about 1 (sentence-transformers' and PyLate's default scale).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.model.config import MODEL_KINDS, MULTI_VECTOR, SINGLE_VECTOR, EncoderConfig
from hopscotch.retriever.model.multi_vector import DEFAULT_MARKERS
from hopscotch.retriever.training.loss import DISTILL_LOSSES, checked_backend

# single-vector-only keys a multi-vector recipe must leave at their defaults (EncoderConfig's; ModelRecipe's own)
_SINGLE_VECTOR_ONLY = ("pooling", "normalize", "passage_prefix", "shared_towers", "late_fusion_max_words",
                       "late_fusion_long",
                       "passage_windows", "window_stride")


def _knob(default, hint: str | None = None, **bounds):
    return field(default=default, metadata={"bounds": bounds, "hint": hint})


@dataclass
class ModelKindKeys:
    """``model.kind`` and the multi-vector keys; checked together with the rest of ``model`` on construction."""

    kind: Literal[MODEL_KINDS] = SINGLE_VECTOR      # single_vector | multi_vector
    dim: int = _knob(128, ge=1)                     # multi-vector: size of every token vector
    query_augmentation: int | None = _knob(32, ge=1, hint="null: no [MASK] augmentation")  # multi-vector
    skiplist: bool = True                           # multi-vector: drop punctuation tokens from documents
    query_marker: str = DEFAULT_MARKERS[0]          # multi-vector: in front of every query ("" for none)
    document_marker: str = DEFAULT_MARKERS[1]       # multi-vector: in front of every document ("" for none)

    def __post_init__(self):
        check_model_kind(self)


def check_model_kind(model) -> None:
    """Refuse keys of the other kind set away from their defaults, and multi-vector settings that contradict;
    ``model`` is a :class:`~hopscotch.retriever.training.recipe.ModelRecipe`."""
    if model.kind == SINGLE_VECTOR:
        for key, f in ModelKindKeys.__dataclass_fields__.items():
            if key != "kind" and getattr(model, key) != f.default:
                raise UsageError(f"recipe key model.{key} applies to model.kind {MULTI_VECTOR} only, got "
                                 f"{getattr(model, key)!r} with model.kind {SINGLE_VECTOR}")
        return
    defaults = EncoderConfig()
    for key in _SINGLE_VECTOR_ONLY:
        if getattr(model, key) != getattr(defaults, key):
            raise UsageError(f"recipe key model.{key} applies to model.kind {SINGLE_VECTOR} only, got "
                             f"{getattr(model, key)!r} with model.kind {MULTI_VECTOR}")
    for key, wanted in (("padding_side", (None, "right")), ("attn_implementation", (None,))):
        if getattr(model, key) not in wanted:
            raise UsageError(f"recipe key model.{key}: a {MULTI_VECTOR} model takes {wanted[-1]!r} "
                             f"(sentence-transformers' own modules), got {getattr(model, key)!r}")
    if model.lora.enabled:
        raise UsageError(f"recipe key model.lora.enabled: LoRA trains {SINGLE_VECTOR} models only; a {MULTI_VECTOR} "
                         "model is fine-tuned in full")
    if model.query_augmentation is not None and model.query_augmentation > model.query_max_len:
        raise UsageError(f"recipe key model.query_augmentation must be <= model.query_max_len ({model.query_max_len})"
                         f", got {model.query_augmentation}")


@dataclass
class DistillKeys:
    """``loss.distill`` and its keys: a distillation term from the teacher scores the tuples carry (DR-Synth's oracle's,
    a ``score`` on every passage) beside InfoNCE, ``infonce_weight * InfoNCE + distill_weight * distill``
    (:mod:`hopscotch.retriever.training.loss` has the formulas). ``none`` (the default) is the plain InfoNCE loss."""

    distill: Literal[DISTILL_LOSSES] = "none"       # none | kl | margin_mse
    distill_weight: float = _knob(1.0, gt=0)        # the distillation term's weight
    infonce_weight: float = _knob(1.0, ge=0, hint="0: the distillation term alone")  # InfoNCE's weight
    teacher_temperature: float = _knob(1.0, gt=0)   # divides the teacher's scores
    student_temperature: float | None = _knob(None, gt=0, hint="null: loss.temperature, learnt or not")  # the student's


_DISTILL_ONLY = ("distill_weight", "teacher_temperature", "student_temperature")


def check_loss_kind(recipe) -> None:
    """The loss keys of one kind: ``loss.matryoshka_dims`` (prefixes of one pooled vector) is single-vector only; the
    distillation keys need ``loss.distill``, which needs a hard negative (``data.group_size`` >= 2) and leaves
    ``loss.infonce_weight: 0`` something to train (``recipe``: a :class:`~.recipe.Recipe`). ``loss.backend`` goes
    through its one check, :func:`~hopscotch.retriever.training.loss.checked_backend`."""
    checked_backend(recipe.loss.backend, "recipe key loss.backend")
    if recipe.model.kind != SINGLE_VECTOR and recipe.loss.matryoshka_dims is not None:
        raise UsageError(f"recipe key loss.matryoshka_dims applies to model.kind {SINGLE_VECTOR} only (prefixes of "
                         f"one pooled vector), got {recipe.loss.matryoshka_dims!r} with model.kind {recipe.model.kind}")
    loss = recipe.loss
    if loss.distill == "none":
        for key in _DISTILL_ONLY:
            if getattr(loss, key) != DistillKeys.__dataclass_fields__[key].default:
                raise UsageError(f"recipe key loss.{key} applies with loss.distill kl or margin_mse, got "
                                 f"{getattr(loss, key)!r} with loss.distill none")
        if loss.infonce_weight == 0:
            raise UsageError("recipe key loss.infonce_weight: 0 leaves nothing to train with loss.distill none")
    elif recipe.data.group_size < 2:
        raise UsageError(f"recipe key loss.distill: {loss.distill} needs data.group_size >= 2 (the positive and at "
                         f"least one hard negative, each with a teacher score), got {recipe.data.group_size}")
