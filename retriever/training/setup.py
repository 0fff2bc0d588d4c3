"""Building the objects of a run from a recipe: accelerator, model, loss, optimizer, schedule."""

from __future__ import annotations

import math
import os

import torch

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.model.config import EncoderConfig
from hopscotch.retriever.model.dual_encoder import DualEncoder
from hopscotch.retriever.training.loss import InfoNCELoss

SCHEDULERS = ("linear", "cosine", "constant")


def build_accelerator(cfg: dict, output_dir):
    """``Accelerator`` on GPU when there is one, else CPU (gloo across processes under torchrun)."""
    from accelerate import Accelerator
    from accelerate.utils import DistributedDataParallelKwargs

    train = cfg["train"]
    if train["mixed_precision"] not in ("no", "bf16", "fp16"):
        raise UsageError(f"train.mixed_precision: expected no, bf16 or fp16, got {train['mixed_precision']!r}")
    if train["report_to"] not in ("none", "wandb"):
        raise UsageError(f"train.report_to: expected none or wandb, got {train['report_to']!r}")
    ddp = DistributedDataParallelKwargs(find_unused_parameters=not cfg["model"]["shared_towers"])
    # DeepSpeed steps its engine inside backward and must know the accumulation; DDP/CPU runs are
    # accumulated by the trainer itself (accelerate's own count stays 1 so it does not rescale the loss)
    accum = train["grad_accum_steps"] if uses_deepspeed() else 1
    return Accelerator(cpu=not torch.cuda.is_available(), mixed_precision=train["mixed_precision"],
                       gradient_accumulation_steps=accum,
                       log_with="wandb" if train["report_to"] == "wandb" else None,
                       project_dir=str(output_dir), kwargs_handlers=[ddp])


def uses_deepspeed() -> bool:
    """Launched by ``accelerate launch`` with a DeepSpeed config."""
    return os.environ.get("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true"


def full_parameters(model):
    """Context in which every process holds the full parameters (ZeRO-3 partitions them otherwise);
    all processes must enter it together."""
    import contextlib

    params = list(model.parameters())
    if uses_deepspeed() and params and hasattr(params[0], "ds_id"):
        import deepspeed

        return deepspeed.zero.GatheredParameters(params, modifier_rank=None)
    return contextlib.nullcontext()


def encoder_config(cfg: dict) -> EncoderConfig:
    m, loss = cfg["model"], cfg["loss"]
    padding_side = m["padding_side"] or ("left" if m["pooling"] == "last" else "right")
    lora = dict(m["lora"]) if m["lora"].get("enabled") else {}
    return EncoderConfig(pooling=m["pooling"], normalize=m["normalize"], query_max_len=m["query_max_len"],
                         passage_max_len=m["passage_max_len"], instruction=m["instruction"],
                         passage_prefix=m["passage_prefix"], reasoning_aware=m["reasoning_aware"],
                         temperature=loss["temperature"], learn_temperature=loss["learn_temperature"],
                         shared_towers=m["shared_towers"], padding_side=padding_side, lora=lora)


def build_model(cfg: dict) -> DualEncoder:
    m = cfg["model"]
    if m["dtype"] not in ("float32", "bfloat16", "float16"):
        raise UsageError(f"model.dtype: expected float32, bfloat16 or float16, got {m['dtype']!r}")
    return DualEncoder.from_pretrained(m["name"], encoder_config(cfg), dtype=m["dtype"],
                                       gradient_checkpointing=m["gradient_checkpointing"],
                                       attn_implementation=m["attn_implementation"])


def build_loss(cfg: dict) -> InfoNCELoss:
    loss = cfg["loss"]
    return InfoNCELoss(loss["backend"], loss["exclude_positive_duplicates"], loss["cross_process_negatives"])


def build_optimizer(model: torch.nn.Module, cfg: dict) -> torch.optim.Optimizer:
    """AdamW over trainable parameters; no weight decay on biases, norms and the temperature."""
    train = cfg["train"]
    if train["optimizer"] != "adamw":
        raise UsageError(f"train.optimizer: only 'adamw' is supported, got {train['optimizer']!r}")
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        plain = param.dim() < 2 or "norm" in name.lower() or "temperature" in name
        (no_decay if plain else decay).append(param)
    groups = [{"params": decay, "weight_decay": train["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW([g for g in groups if g["params"]], lr=train["lr"])


def build_scheduler(optimizer, cfg: dict, total_steps: int):
    """Warmup then linear decay, cosine decay, or constant."""
    from transformers import get_scheduler

    train = cfg["train"]
    if train["scheduler"] not in SCHEDULERS:
        raise UsageError(f"train.scheduler: expected one of {SCHEDULERS}, got {train['scheduler']!r}")
    warmup = train["warmup_steps"]
    if warmup is None:
        warmup = int(math.ceil(train["warmup_ratio"] * total_steps))
    name = "constant_with_warmup" if train["scheduler"] == "constant" else train["scheduler"]
    return get_scheduler(name, optimizer, num_warmup_steps=warmup, num_training_steps=total_steps)


def set_threads(cfg: dict) -> None:
    threads = cfg["train"]["threads"] or (int(os.environ["OMP_NUM_THREADS"]) if os.environ.get("OMP_NUM_THREADS")
                                          else None)
    if threads and not torch.cuda.is_available():
        torch.set_num_threads(int(threads))
