"""Saving a :class:`~hopscotch.retriever.model.dual_encoder.DualEncoder` as a folder that ``SentenceTransformer(path)`` loads.

Layout (the classic sentence-transformers files, which every sentence-transformers version reads)::

    path/
      config.json, model.safetensors, tokenizer files   # the backbone, LoRA merged in
      modules.json                                      # Transformer -> Pooling -> Normalize
      sentence_bert_config.json                         # max_seq_length
      1_Pooling/config.json                             # cls | mean | lasttoken
      2_Normalize/                                      # when the model L2-normalises
      config_sentence_transformers.json                 # prompts: {"query": instruction}
      hopscotch_config.json                             # pooling, lengths, instruction, temperature
      query_encoder/                                    # only with separate towers: the query tower

``hopscotch_config.json`` keeps what sentence-transformers has no place for: the query and passage
length budgets (the reasoning is cut from the left to fit ``query_max_len``, see
:func:`hopscotch.retriever.model.query_template.format_query_truncated`), the instruction and the temperature.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import torch

from hopscotch.retriever.model.config import HOPSCOTCH_CONFIG

_ST_POOLING = {"cls": "pooling_mode_cls_token", "mean": "pooling_mode_mean_tokens", "last": "pooling_mode_lasttoken"}


def merged_state_dict(peft_model) -> dict[str, torch.Tensor]:
    """The backbone's weights with every LoRA delta added in, without touching the model.

    ``X.base_layer.weight`` becomes ``X.weight + delta``; ``lora_*`` tensors are dropped. Unlike
    ``merge_and_unload`` this works on a copy, so training can go on after a mid-run save.
    """
    from peft.tuners.lora import LoraLayer

    base = peft_model.get_base_model()
    deltas = {}
    for name, module in base.named_modules():
        if isinstance(module, LoraLayer) and module.active_adapters:
            delta = sum(module.get_delta_weight(a) for a in module.active_adapters if a in module.lora_A)
            deltas[f"{name}.base_layer.weight"] = delta
    out = {}
    for key, value in base.state_dict().items():
        if ".lora_" in key or "lora_dropout" in key:
            continue
        value = value.detach()
        if key in deltas:
            value = value + deltas[key].to(value.dtype)
        out[key.replace(".base_layer.", ".")] = value.clone()
    return out


def _write_json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def save_tower(backbone, tokenizer, folder: Path, pooling: str, normalize: bool, max_seq_length: int,
               prompts: dict[str, str]) -> None:
    """One backbone + tokenizer + the sentence-transformers module files in ``folder``."""
    if hasattr(backbone, "get_base_model"):  # peft
        backbone.get_base_model().save_pretrained(folder, state_dict=merged_state_dict(backbone))
    else:
        backbone.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
        (folder / "2_Normalize").mkdir(exist_ok=True)
    _write_json(folder / "modules.json", modules)
    _write_json(folder / "sentence_bert_config.json", {"max_seq_length": max_seq_length, "do_lower_case": False})
    pool = {"word_embedding_dimension": int(backbone.config.hidden_size)}
    pool.update({flag: name == pooling for name, flag in _ST_POOLING.items()})
    pool.update({"pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False,
                 "pooling_mode_weightedmean_tokens": False, "include_prompt": True})
    _write_json(folder / "1_Pooling" / "config.json", pool)
    import sentence_transformers
    import transformers

    _write_json(folder / "config_sentence_transformers.json", {
        "__version__": {"sentence_transformers": sentence_transformers.__version__,
                        "transformers": transformers.__version__, "pytorch": torch.__version__},
        "prompts": prompts, "default_prompt_name": None,
        "similarity_fn_name": "cosine" if normalize else "dot"})


def save_model(model, path: str | os.PathLike) -> str:
    """Write ``model`` to ``path`` atomically (a temp folder beside it, then a rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    c = model.config
    try:
        prompts = {"query": c.instruction, "document": c.passage_prefix}
        max_len = max(c.query_max_len, c.passage_max_len)
        save_tower(model.passage_backbone, model.tokenizer, tmp, c.pooling, c.normalize, max_len, prompts)
        if not c.shared_towers:
            save_tower(model.query_backbone, model.tokenizer, tmp / "query_encoder", c.pooling, c.normalize,
                       max_len, prompts)
        saved = model.config_dict()
        saved["lora"] = {}  # the adapters are merged into the saved weights
        _write_json(tmp / HOPSCOTCH_CONFIG, saved)
        old = None
        if path.exists():
            old = path.with_name(f".{path.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
        os.replace(tmp, path)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return str(path)
