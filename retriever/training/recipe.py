"""Recipes: YAML experiment files (model + data + loss + schedule) with ``key=value`` overrides.

Every key has a default (:data:`DEFAULTS`); a recipe sets some, the command line overrides any::

    train.py --recipe recipes/minilm_hotpot.yaml --output out train.lr=3e-5 data.train=tuples.jsonl

Values on the command line are parsed as YAML (``3e-5`` a float, ``[a.jsonl, b.jsonl]`` a list,
``null`` None). An unknown key or a value of the wrong type is an error naming the key.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

import yaml

from hopscotch.retriever.errors import UsageError

DEFAULTS: dict = {
    "model": {
        "name": "minilm",              # 'minilm', or a local HF / sentence-transformers folder
        "pooling": "mean",             # cls | mean | last
        "normalize": True,
        "shared_towers": True,
        "query_max_len": 128,
        "passage_max_len": 256,
        "instruction": "",             # prefix of every query (AgentIR: 'Instruct: ...\nQuery: ')
        "passage_prefix": "",
        "reasoning_aware": True,       # 'Reasoning: ...\n\nQuery: ...' inputs; False: query only
        "padding_side": None,          # None: left for 'last' pooling, right otherwise
        "dtype": "float32",            # weights: float32 | bfloat16 | float16
        "attn_implementation": None,
        "gradient_checkpointing": False,
        "lora": {"enabled": False, "r": 16, "alpha": 32, "dropout": 0.1, "target_modules": None},
    },
    "loss": {
        "temperature": 0.05,
        "learn_temperature": False,
        "backend": "auto",             # auto (fused on CUDA) | fused | reference
        "exclude_positive_duplicates": True,
        "cross_process_negatives": True,
    },
    "data": {
        "train": None,                 # a tuple file, a folder, or a list of them
        "group_size": 8,               # passages per query: 1 positive + group_size-1 hard negatives
        "length_grouping": True,
        "pad_to_multiple_of": 8,
        "max_tuples": None,
    },
    "train": {
        "seed": 42,
        "batch_size": 16,              # queries per process per step (per micro-step with accumulation)
        "grad_accum_steps": 1,
        "gradcache_chunk_size": None,  # GradCache mini-batch size; None: encode the batch at once
        "encode_chunk_size": None,     # length-sorted sub-batches within one forward (no caching)
        "lr": 2e-5,
        "weight_decay": 0.01,
        "optimizer": "adamw",
        "scheduler": "linear",         # linear | cosine | constant
        "warmup_ratio": 0.1,
        "warmup_steps": None,          # overrides warmup_ratio
        "epochs": 1,
        "max_steps": None,             # overrides epochs
        "max_grad_norm": 1.0,
        "mixed_precision": "no",       # no | bf16 | fp16
        "threads": None,               # torch.set_num_threads on CPU
        "log_every": 10,
        "save_every": 500,             # checkpoint every N optimizer steps (0: only at the end)
        "save_total_limit": 2,
        "report_to": "none",           # none | wandb (WANDB_MODE=offline|disabled from the environment)
        "run_name": None,
    },
    "eval": {
        "queries": None,               # dev queries (JSONL with optional 'reasoning')
        "corpus": None,
        "qrels": None,
        "every": 0,                    # evaluate every N steps (0: only at the end when a dev set is given)
        "metric": "ndcg@10",
        "batch_size": 64,
        "max_queries": None,
    },
}


# keys whose default is None but whose value, when set, is a whole number
_INT_KEYS = {"train.max_steps", "train.warmup_steps", "train.gradcache_chunk_size", "train.encode_chunk_size",
             "train.threads", "data.max_tuples", "eval.max_queries"}


def _number(value, key: str, kind):
    if isinstance(value, str):  # YAML 1.1 reads '3e-5' (no dot) as a string
        try:
            value = float(value)
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"recipe key {key}: expected a number, got {value!r}")
    if kind is int:
        if float(value) != int(value):
            raise UsageError(f"recipe key {key}: expected a whole number, got {value!r}")
        return int(value)
    return float(value) if kind is float else value


def _check(value, default, key: str):
    if value is None:
        return value
    if default is None:
        return _number(value, key, int) if key in _INT_KEYS else value
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise UsageError(f"recipe key {key}: expected true/false, got {value!r}")
    elif isinstance(default, (int, float)):
        value = _number(value, key, type(default) if isinstance(default, float) else None)
    elif isinstance(default, str) and not isinstance(value, str):
        raise UsageError(f"recipe key {key}: expected a string, got {value!r}")
    return value


def _merge(base: dict, update: dict, where: str, prefix: str = "") -> None:
    for key, value in update.items():
        full = f"{prefix}{key}"
        if key not in base:
            known = ", ".join(sorted(f"{prefix}{k}" for k in base))
            raise UsageError(f"{where}: unknown recipe key {full!r} (known: {known})")
        if isinstance(base[key], dict):
            if not isinstance(value, dict):
                raise UsageError(f"{where}: recipe key {full!r} is a section; expected a mapping, got {value!r}")
            _merge(base[key], value, where, full + ".")
        else:
            base[key] = _check(value, DEFAULTS_FLAT.get(full), full)


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


DEFAULTS_FLAT = _flatten(DEFAULTS)


def parse_override(item: str) -> dict:
    """``'train.lr=3e-5'`` -> ``{'train': {'lr': 3e-05}}``."""
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise UsageError(f"override {item!r}: expected key=value, e.g. train.lr=3e-5")
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError as exc:
        raise UsageError(f"override {item!r}: the value is not valid YAML ({exc.problem})") from None
    out: dict = {}
    node = out
    parts = key.strip().split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
    return out


def load_recipe(recipe: str | os.PathLike | dict | None, overrides: list[str] | tuple = ()) -> dict:
    """Defaults, then the recipe (a YAML path or a dict), then ``key=value`` overrides."""
    config = copy.deepcopy(DEFAULTS)
    if isinstance(recipe, dict):
        _merge(config, recipe, "recipe")
    elif recipe is not None:
        path = Path(recipe)
        if not path.is_file():
            raise UsageError(f"--recipe {recipe}: no such file")
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = f":{mark.line + 1}" if mark else ""
            raise UsageError(f"{path}{line}: expected a YAML mapping of sections ({exc})") from None
        if not isinstance(data, dict):
            raise UsageError(f"{path}: expected a YAML mapping of sections, got {type(data).__name__}")
        _merge(config, data, str(path))
    for item in overrides:
        _merge(config, parse_override(item), "command line")
    if not config["data"]["train"]:
        raise UsageError("recipe key data.train is required (a tuple file or a list of them)")
    return config
