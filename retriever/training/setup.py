"""Building the objects of a run from a :class:`~hopscotch.retriever.training.recipe.sections.Recipe`:
accelerator, model, loss, optimizer, schedule. The recipe has checked every value already."""

from __future__ import annotations

import contextlib
import math
import os

import torch

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.model.config import CROSS_ENCODER, MULTI_VECTOR
from hopscotch.retriever.model.cpu_precision import runnable_precision
from hopscotch.retriever.model.dual_encoder import DualEncoder
from hopscotch.retriever.model.matryoshka import check_dims_fit, prefixes
from hopscotch.retriever.model.multi_vector_trainable import TrainableMultiVector
from hopscotch.retriever.training.loss import InfoNCELoss
from hopscotch.retriever.training.recipe.sections import Recipe, TrainRecipe


def build_accelerator(recipe: Recipe, output_dir):
    """``Accelerator`` on GPU when there is one, else CPU (gloo across processes under torchrun)."""
    from accelerate import Accelerator
    from accelerate.utils import DistributedDataParallelKwargs

    train = recipe.train
    ddp = DistributedDataParallelKwargs(find_unused_parameters=not recipe.model.shared_towers)
    # DeepSpeed steps its engine inside backward and must know the accumulation; DDP/CPU runs are
    # accumulated by the trainer itself (accelerate's own count stays 1 so it does not rescale the loss)
    accum = train.grad_accum_steps if uses_deepspeed() else 1
    return Accelerator(cpu=not torch.cuda.is_available(), mixed_precision=mixed_precision(train),
                       gradient_accumulation_steps=accum,
                       log_with="wandb" if train.report_to == "wandb" else None,
                       project_dir=str(output_dir), kwargs_handlers=[ddp])


def mixed_precision(train: TrainRecipe) -> str:
    """accelerate's ``mixed_precision`` for ``train.mixed_precision`` on this machine: bf16 autocast on a CPU
    without native bfloat16 falls back to ``no`` (float32) with a warning, fp16 on CPU is refused (accelerate
    would run it as float32 without a word). Autocast wraps the model's forward only: parameters, AdamW's
    state and the loss stay float32. A different precision than this process's last run resets accelerate's
    shared state (it refuses to change it otherwise), so in-process runs may mix precisions."""
    from accelerate.state import AcceleratorState

    device_type = "cuda" if torch.cuda.is_available() else "cpu"
    if train.mixed_precision == "fp16" and device_type == "cpu":
        raise UsageError("train.mixed_precision: fp16 needs a GPU; on CPU use bf16 (autocast where the CPU has "
                         "bfloat16 instructions, float32 elsewhere) or \"no\"")
    runs = runnable_precision(train.mixed_precision, device_type, "train.mixed_precision")
    mixed = "no" if runs == "fp32" else runs
    state = AcceleratorState._shared_state
    if state and not uses_deepspeed() and state.get("_mixed_precision", mixed) != mixed:
        AcceleratorState._reset_state()
    return mixed


def uses_deepspeed() -> bool:
    """Launched by ``accelerate launch`` with a DeepSpeed config."""
    return os.environ.get("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true"


def full_parameters(model):
    """Context in which every process holds the full parameters (ZeRO-3 partitions them otherwise);
    all processes must enter it together."""
    params = list(model.parameters())
    if uses_deepspeed() and params and hasattr(params[0], "ds_id"):
        import deepspeed

        return deepspeed.zero.GatheredParameters(params, modifier_rank=None)
    return contextlib.nullcontext()


def build_model(recipe: Recipe):
    """The model ``model.kind`` names (a DualEncoder, TrainableMultiVector or TrainableCrossEncoder), as the recipe
    starts it (WiSE-FT builds it again: the same weights)."""
    m = recipe.model
    if m.kind == MULTI_VECTOR:
        return build_multi_vector(recipe)
    if m.kind == CROSS_ENCODER:
        return build_cross_encoder(recipe)
    return DualEncoder.from_pretrained(m.name, recipe.encoder_config(), dtype=m.dtype,
                                       gradient_checkpointing=m.gradient_checkpointing,
                                       attn_implementation=m.attn_implementation)


def build_multi_vector(recipe: Recipe) -> TrainableMultiVector:
    """A new multi-vector model over ``model.name``: marker rows and projection seeded by ``train.seed``."""
    from hopscotch.retriever.model.multi_vector import PUNCTUATION, build_multi_vector_model

    m, config = recipe.model, recipe.encoder_config()
    model = build_multi_vector_model(
        m.name, m.dim, query_max_len=m.query_max_len, passage_max_len=m.passage_max_len,
        markers=(m.query_marker, m.document_marker), instruction=m.instruction, query_augmentation=m.query_augmentation,
        skiplist=PUNCTUATION if m.skiplist else [], query_input=str(config.query_variant()), late_fusion=m.late_fusion,
        seed=recipe.train.seed)
    return TrainableMultiVector(model, config, dtype=m.dtype, gradient_checkpointing=m.gradient_checkpointing)


def build_cross_encoder(recipe: Recipe):
    """A new cross-encoder over ``model.name``: its classification head seeded by ``train.seed``."""
    from hopscotch.retriever.model.cross_encoder import build_cross_encoder_model
    from hopscotch.retriever.model.cross_encoder_trainable import TrainableCrossEncoder

    m, config = recipe.model, recipe.encoder_config()
    model = build_cross_encoder_model(m.name, query_max_len=m.query_max_len, passage_max_len=m.passage_max_len,
                                      instruction=m.instruction, query_input=str(config.query_variant()),
                                      seed=recipe.train.seed)
    return TrainableCrossEncoder(model, config, dtype=m.dtype, gradient_checkpointing=m.gradient_checkpointing)


def build_loss(recipe: Recipe, model_dim: int | None = None) -> InfoNCELoss:
    """The recipe's loss (InfoNCE, plus ``loss.distill``'s term; a cross-encoder's listwise cross-entropy,
    :class:`~hopscotch.retriever.training.listwise.ListwiseLoss`); ``model_dim`` (the built model's embedding size)
    bounds ``loss.matryoshka_dims``."""
    loss = recipe.loss
    if recipe.model.kind == CROSS_ENCODER:
        from hopscotch.retriever.training.listwise import ListwiseLoss

        return ListwiseLoss(loss.exclude_positive_duplicates, loss.distill, loss.distill_weight, loss.infonce_weight,
                            loss.teacher_temperature, loss.student_temperature)
    if model_dim is not None:
        check_dims_fit(loss.matryoshka_dims, model_dim, recipe.model.name)
    return InfoNCELoss(loss.backend, loss.exclude_positive_duplicates, loss.cross_process_negatives,
                       prefixes(loss.matryoshka_dims, loss.matryoshka_weights), recipe.model.normalize,
                       loss.distill, loss.distill_weight, loss.infonce_weight, loss.teacher_temperature,
                       loss.student_temperature)


def build_optimizer(model: torch.nn.Module, train: TrainRecipe) -> torch.optim.Optimizer:
    """AdamW over trainable parameters; no weight decay on biases, norms and the temperature."""
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        plain = param.dim() < 2 or "norm" in name.lower() or "temperature" in name
        (no_decay if plain else decay).append(param)
    groups = [{"params": decay, "weight_decay": train.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW([g for g in groups if g["params"]], lr=train.lr)


def build_scheduler(optimizer, train: TrainRecipe, total_steps: int):
    """Warmup then linear decay, cosine decay, or constant."""
    from transformers import get_scheduler

    warmup = train.warmup_steps
    if warmup is None:
        warmup = math.ceil(train.warmup_ratio * total_steps)
    name = "constant_with_warmup" if train.scheduler == "constant" else train.scheduler
    return get_scheduler(name, optimizer, num_warmup_steps=warmup, num_training_steps=total_steps)


def set_threads(train: TrainRecipe) -> None:
    threads = train.threads or (int(os.environ["OMP_NUM_THREADS"]) if os.environ.get("OMP_NUM_THREADS") else None)
    if threads and not torch.cuda.is_available():
        torch.set_num_threads(int(threads))
