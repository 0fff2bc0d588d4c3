"""Recipe keys in range alone but not together, checked once the whole recipe is built: the loss keys of one model
kind or one distillation setting (:func:`check_loss_kind`), warmup longer than the run or a dev metric nobody
computes (:func:`check_together`) and the training mixture of query input variants (:func:`check_mixture`). The
keys of one model kind set for the other are refused as the ``model`` section is built
(:func:`~hopscotch.retriever.training.recipe.sections.check_model_kind`).
"""

from __future__ import annotations

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.evaluation.metrics import parse_metric
from hopscotch.retriever.model.config import CROSS_ENCODER, SINGLE_VECTOR
from hopscotch.retriever.training.loss import checked_backend
from hopscotch.retriever.training.recipe.sections import DistillKeys

_DISTILL_ONLY = ("distill_weight", "teacher_temperature", "student_temperature")


def check_loss_kind(recipe) -> None:
    """The loss keys of one kind: ``loss.matryoshka_dims`` (prefixes of one pooled vector) is single-vector only; the
    distillation keys need ``loss.distill``, which needs a hard negative (``data.group_size`` >= 2) and leaves
    ``loss.infonce_weight: 0`` something to train (``recipe``: a :class:`~hopscotch.retriever.training.recipe.sections.Recipe`).
    ``loss.backend`` goes through its one check, :func:`~hopscotch.retriever.training.loss.checked_backend`."""
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
    if recipe.model.kind == CROSS_ENCODER:
        _check_cross_encoder_run(recipe)


def _check_cross_encoder_run(recipe) -> None:
    """A cross-encoder ranks each query's own group (no in-batch negatives): at least one hard negative, no
    GradCache (pairs have no embeddings to cache: ``train.encode_chunk_size`` bounds the memory), no dev set (it
    ranks no corpus alone: evaluate it as ``hopscotch search --rerank-model``)."""
    if recipe.data.group_size < 2:
        raise UsageError(f"recipe key data.group_size: a {CROSS_ENCODER} ranks each query's own passages (the positive "
                         f"and its hard negatives), so it needs >= 2, got {recipe.data.group_size}")
    if recipe.train.gradcache_chunk_size is not None:
        raise UsageError(f"recipe key train.gradcache_chunk_size applies to encoders; a {CROSS_ENCODER} scores pairs "
                         "(train.encode_chunk_size bounds its memory)")
    if recipe.eval.queries:
        raise UsageError(f"recipe key eval.queries: a {CROSS_ENCODER} reranks a first stage and has no dev search of "
                         "its own; evaluate OUTPUT/final with hopscotch search --rerank-model")


def check_together(recipe) -> None:
    """Keys in range alone but not together: warmup longer than the run, a dev metric nobody computes."""
    tr = recipe.train
    if tr.warmup_steps is not None and tr.max_steps is not None and tr.warmup_steps > tr.max_steps:
        raise UsageError(f"recipe key train.warmup_steps must be <= train.max_steps ({tr.max_steps}), "
                         f"got {tr.warmup_steps}")
    try:
        parse_metric(recipe.eval.metric)
    except UsageError as exc:
        raise UsageError(f"recipe key eval.metric: {exc}") from None


def check_mixture(data) -> None:
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
