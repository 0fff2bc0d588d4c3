"""The dual encoder: any Hugging Face backbone, pooled, normalised, with a (learnable) temperature.

Queries go in as AgentIR's reasoning-aware text (``{instruction}Reasoning: ...\\n\\nQuery: ...``), the
reasoning slot filled per ``config.query_input`` and cut from the left to fit ``query_max_len``; passages
as ``title + " " + text``. The model saves a sentence-transformers folder (see
:mod:`hopscotch.retriever.model.saving`).

Example (not run: it loads and saves a model)::

    model = DualEncoder.from_pretrained("minilm", pooling="mean", temperature=0.05)
    q = model.encode(model.tokenize_queries(["who directed Gummo"], ["The film Gummo came out in 1997."]))
    p = model.encode(model.tokenize_passages([("Gummo", "Gummo is a 1997 film by Harmony Korine.")]), "passage")
    model.save("out/final")     # SentenceTransformer("out/final") gives the same passage vectors
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import asdict

import torch
from torch import nn

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.model.config import EncoderConfig, read_saved_config, refuse_multi_vector
from hopscotch.retriever.model.loading import quiet_loading_bars, resolve_model_path
from hopscotch.retriever.model.query_template import format_document, format_queries
from hopscotch.retriever.model.rng import encode_sides
from hopscotch.retriever.model.saving import save_model


def pool(hidden: torch.Tensor, attention_mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """``cls``: first token; ``mean``: masked mean; ``last``: last non-padding token (either padding side)."""
    if pooling == "cls":
        return hidden[:, 0]
    if pooling == "mean":
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    seq_len = attention_mask.shape[1]
    last = seq_len - 1 - attention_mask.flip(1).int().argmax(1)  # index of the last 1 in each row
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]



def prepare_trainable(module: nn.Module, backbone: nn.Module, config: EncoderConfig, dtype: str | torch.dtype,
                      gradient_checkpointing: bool) -> None:
    """What the trainable multi-vector and cross-encoder models do with the recipe's keys: activation checkpointing on
    ``backbone``, ``module``'s weights cast to ``dtype``, then its temperature (:func:`init_temperature`)."""
    if gradient_checkpointing:
        backbone.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    torch_dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    if torch_dtype != torch.float32:
        module.to(torch_dtype)
    init_temperature(module, config)


def init_temperature(module: nn.Module, config: EncoderConfig) -> None:
    """``module.log_temperature``: log of ``config.temperature``, a parameter when ``config.learn_temperature``,
    else a saved buffer (the trainable single- and multi-vector models alike)."""
    log_t = torch.tensor(math.log(config.temperature), dtype=torch.float32)
    if config.learn_temperature:
        module.log_temperature = nn.Parameter(log_t)
    else:
        module.register_buffer("log_temperature", log_t, persistent=True)

class DualEncoder(nn.Module):
    """Query and passage towers (one shared backbone by default) producing L2-normalised embeddings.

    ``forward(queries=..., passages=...)`` returns ``(q, p, temperature)`` so that a wrapped
    (DDP) model sees every trainable tensor, the temperature included, in one forward call.
    """

    def __init__(self, backbone: nn.Module, tokenizer, config: EncoderConfig, query_backbone: nn.Module | None = None):
        super().__init__()
        self.config = config
        self.tokenizer = tokenizer
        self.passage_backbone = backbone
        self.separate_query_backbone = query_backbone  # None: the towers share ``passage_backbone``
        if config.shared_towers != (query_backbone is None):
            raise UsageError("shared_towers=True takes one backbone; False takes a separate query_backbone")
        init_temperature(self, config)

    # -- construction ----------------------------------------------------------------------------
    @classmethod
    def from_pretrained(cls, name: str | os.PathLike, config: EncoderConfig | None = None, *,
                        dtype: str | torch.dtype = "float32", gradient_checkpointing: bool = False,
                        attn_implementation: str | None = None) -> DualEncoder:
        """Load a backbone (``minilm``, an HF folder, a sentence-transformers folder or a saved model).

        ``config.lora`` (``{r, alpha, dropout, target_modules}``) wraps the backbone(s) in peft LoRA.
        """
        from transformers import AutoModel, AutoTokenizer

        quiet_loading_bars()
        path = resolve_model_path(name)
        refuse_multi_vector(path)   # training a single-vector model from a multi-vector folder would drop its head
        config = config or read_saved_config(path) or EncoderConfig()
        torch_dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
        kwargs = {"dtype": torch_dtype}
        if attn_implementation:
            kwargs["attn_implementation"] = attn_implementation

        def load(folder):
            model = AutoModel.from_pretrained(folder, local_files_only=True, **kwargs)
            for param in unused_head(model).parameters():
                param.requires_grad_(False)  # never in the embedding: DDP would wait for its gradient
            if gradient_checkpointing:
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            if config.lora and config.lora.get("enabled", True):
                model = apply_lora(model, config.lora)
            return model

        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        tokenizer.padding_side = config.padding_side
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
        query_path = os.path.join(path, "query_encoder")
        query_backbone = None
        if not config.shared_towers:
            query_backbone = load(query_path if os.path.isdir(query_path) else path)
        return cls(load(path), tokenizer, config, query_backbone)

    # -- properties ------------------------------------------------------------------------------
    @property
    def query_backbone(self) -> nn.Module:
        return self.separate_query_backbone if self.separate_query_backbone is not None else self.passage_backbone

    @property
    def temperature(self) -> torch.Tensor:
        return self.log_temperature.exp()

    @property
    def dim(self) -> int:
        return int(self.passage_backbone.config.hidden_size)

    # -- text to features ------------------------------------------------------------------------
    def format_queries(self, queries: Sequence[str], reasonings: Sequence | None = None,
                       query_inputs: Sequence | None = None) -> list[str]:
        """Query texts in the model's query input variant (``config.query_variant()``), the reasoning cut from
        the left to fit ``query_max_len``.

        ``reasonings`` holds each query's context (a reasoning string, or a record with the context fields:
        see :func:`~hopscotch.retriever.model.query_template.format_queries`); ``query_inputs`` optionally
        one variant per query (None entries: the model's), for training on a mixture of variants.
        """
        c = self.config
        variant = c.query_variant()
        if query_inputs is not None:
            variant = [variant if v is None else v for v in query_inputs]
        return format_queries(self.tokenizer, c.query_max_len, queries, reasonings, instruction=c.instruction,
                              query_input=variant)

    def _tokenize(self, texts: list[str], max_len: int, pad_to_multiple_of: int | None) -> dict:
        return dict(self.tokenizer(texts, padding=True, truncation=True, max_length=max_len,
                                   pad_to_multiple_of=pad_to_multiple_of, return_tensors="pt"))

    def tokenize_queries(self, queries: Sequence[str], reasonings: Sequence | None = None,
                         pad_to_multiple_of: int | None = None, query_inputs: Sequence | None = None) -> dict:
        return self._tokenize(self.format_queries(queries, reasonings, query_inputs), self.config.query_max_len,
                              pad_to_multiple_of)

    def tokenize_passages(self, passages: Sequence[tuple[str | None, str]], pad_to_multiple_of: int | None = None
                          ) -> dict:
        """Tokenize ``(title, text)`` pairs."""
        prefix = self.config.passage_prefix
        texts = [prefix + format_document(title, text) for title, text in passages]
        return self._tokenize(texts, self.config.passage_max_len, pad_to_multiple_of)

    # -- encoding --------------------------------------------------------------------------------
    def encode(self, features: dict, kind: str = "query", chunk_size: int | None = None) -> torch.Tensor:
        """Embed tokenized texts with the query or passage tower.

        ``chunk_size`` encodes length-sorted sub-batches, each trimmed to its own longest row, so short
        texts do not pay for the padding of long ones; the embeddings come back in input order and
        gradients flow as for one batch.
        """
        backbone = self.query_backbone if kind == "query" else self.passage_backbone
        mask = features["attention_mask"]
        if not chunk_size or chunk_size >= mask.shape[0]:
            return self._embed(backbone, features)
        lengths = mask.sum(1)
        chunks = length_chunks(lengths, chunk_size)
        parts = [self._embed(backbone, trim_padding(features, rows, int(lengths[rows].max()), self.config.padding_side))
                 for rows in chunks]
        return torch.cat(parts)[torch.argsort(torch.cat(chunks))]

    def _embed(self, backbone: nn.Module, features: dict) -> torch.Tensor:
        inputs = {k: v for k, v in features.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
        hidden = backbone(**inputs).last_hidden_state
        emb = pool(hidden, features["attention_mask"], self.config.pooling)
        if torch.is_autocast_enabled(emb.device.type):  # mixed precision: normalised and scored in float32
            emb = emb.float()
        return nn.functional.normalize(emb, dim=-1) if self.config.normalize else emb

    def forward(self, queries: dict | None = None, passages: dict | None = None, chunk_size: int | None = None,
                query_rng=None, passage_rng=None):
        """Encode either or both sides; ``*_rng`` restore a CPU RNG state first (GradCache replay)."""
        q, p = encode_sides(self.encode, queries, passages, chunk_size, query_rng, passage_rng)
        return q, p, self.temperature

    # -- saving ----------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> str:
        """Write a sentence-transformers folder (atomically); see :func:`hopscotch.retriever.model.saving.save_model`."""

        return save_model(self, path)

    def config_dict(self) -> dict:
        d = asdict(self.config)
        if self.config.learn_temperature:
            d["temperature"] = float(self.temperature.detach())
        return d


def unused_head(backbone: nn.Module) -> nn.Module:
    """The backbone's pooler head (BERT's ``pooler``), which token pooling never uses; empty if none."""
    head = getattr(backbone, "pooler", None)
    return head if isinstance(head, nn.Module) else nn.Module()


def length_chunks(lengths: torch.Tensor, chunk_size: int) -> list[torch.Tensor]:
    """Rows in length order (longest first, stable), cut into chunks of ``chunk_size``: the one chunking of every
    length-sorted encoder (the dual encoder's, the multi-vector model's, the cross-encoder's pairs and GradCache's
    mini-batches). Each chunk is then trimmed to its own longest row, so short texts do not pay for long ones' padding
    (on CPU, chunks of 8 rows take about 30% less compute than 32 for the agent recipe: docs/benchmarks.md)."""
    order = torch.argsort(lengths, descending=True, stable=True)
    return [order[start:start + chunk_size] for start in range(0, len(order), chunk_size)]


def trim_padding(features: dict, rows: torch.Tensor, length: int, padding_side: str) -> dict:
    """Rows ``rows`` of a padded batch, cut to ``length`` columns (from the padded side)."""
    cols = slice(None, length) if padding_side == "right" else slice(-length, None)
    return {k: v[rows][:, cols] for k, v in features.items() if torch.is_tensor(v) and v.dim() == 2}


def apply_lora(backbone: nn.Module, lora: dict) -> nn.Module:
    """Wrap ``backbone`` in peft LoRA: ``{r, alpha, dropout, target_modules}``."""
    from peft import LoraConfig, get_peft_model

    unknown = set(lora) - {"r", "alpha", "dropout", "target_modules", "enabled"}
    if unknown:
        raise UsageError(f"model.lora: unknown keys {sorted(unknown)} (use r, alpha, dropout, target_modules)")
    cfg = LoraConfig(r=int(lora.get("r", 16)), lora_alpha=int(lora.get("alpha", 32)),
                     lora_dropout=float(lora.get("dropout", 0.1)), target_modules=lora.get("target_modules"),
                     bias="none")
    return get_peft_model(backbone, cfg)
