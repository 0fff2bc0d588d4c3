"""How many tokens an encoder model can take: :func:`model_position_limit`, the one definition that both
``train``'s length check (:func:`hopscotch.retriever.training.preflight.check_model_lengths`) and the
commands' ``--max-length`` clamp (:func:`hopscotch.retriever.commands.flag_types.clamp_max_length`) use.

The limit is read from the model's Hugging Face ``config.json`` (a sentence-transformers folder: the config of
its Transformer module, found through ``modules.json``), without loading any weights:

* ``max_position_embeddings`` (BERT, RoBERTa, Qwen, ...), else ``n_positions`` (GPT-2 style configs);
* less RoBERTa's offset: models whose position table reserves the rows up to the padding index before the
  first token (RoBERTa, XLM-R, CamemBERT, Longformer, MPNet, ...) take ``max_position_embeddings -
  pad_token_id - 1`` tokens, as transformers' ``create_position_ids_from_input_ids`` numbers them
  (``pad_token_id`` 1 when the config does not say: 514 rows, 512 tokens).

The tokenizer's ``model_max_length`` and sentence-transformers' ``max_seq_length`` are not limits: they are
defaults (sentence-transformers saves its default ``max_seq_length`` in the tokenizer config too).

>>> model_position_limit("minilm")          # or a model folder: model_position_limit("runs/agentir/final")
512
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from hopscotch.retriever.model.loading import resolve_model_path

#: model types whose position table reserves ``pad_token_id + 1`` rows before the first token (RoBERTa's
#: offset); any model type naming ``roberta`` (``roberta-prelayernorm``, ``xlm-roberta-xl``) counts too
OFFSET_POSITION_TYPES = frozenset({
    "roberta", "xlm-roberta", "xlm-roberta-xl", "roberta-prelayernorm", "camembert", "longformer", "mpnet",
    "data2vec-text", "ibert", "luke", "xmod", "esm",
})


def read_json_dict(path: Path) -> dict:
    """A JSON object file's content; ``{}`` when it is missing, unreadable or not an object (a config that
    does not say)."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _transformer_dir(path: Path) -> Path:
    """The folder of a sentence-transformers model's Transformer module (the model folder itself otherwise)."""
    try:
        modules = json.loads((path / "modules.json").read_text(encoding="utf-8"))
        for module in modules:
            if str(module.get("type", "")).endswith("Transformer"):
                return path / module.get("path", "")
    except (OSError, ValueError, TypeError, AttributeError):
        pass
    return path


def _whole(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def model_position_limit(model: str | os.PathLike) -> int | None:
    """The most tokens encoder ``model`` (a name :func:`~.loading.resolve_model_path` takes, or its folder)
    can take, from its ``config.json`` as the module docstring says; None when the config does not say (no
    config, no position count: e.g. T5's relative positions), so callers apply no limit."""
    config = read_json_dict(_transformer_dir(Path(resolve_model_path(model))) / "config.json")
    positions = _whole(config.get("max_position_embeddings"))
    if positions is None:
        positions = _whole(config.get("n_positions"))
    if positions is None or positions <= 0:
        return None
    model_type = str(config.get("model_type", "")).lower()
    if model_type in OFFSET_POSITION_TYPES or "roberta" in model_type:
        pad = _whole(config.get("pad_token_id"))
        positions -= (pad if pad is not None and pad >= 0 else 1) + 1
    return positions if positions > 0 else None
