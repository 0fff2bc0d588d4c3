"""Saving a :class:`~hopscotch.retriever.model.dual_encoder.DualEncoder` as a folder that ``SentenceTransformer(path)`` loads.

Layout (the classic sentence-transformers files, which every sentence-transformers version reads)::

    path/
      config.json, model.safetensors, tokenizer files   # the backbone, LoRA merged in
      modules.json                                      # Transformer -> Pooling -> Normalize
      sentence_bert_config.json                         # max_seq_length (the passage length), query_length
      1_Pooling/config.json                             # cls | mean | lasttoken
      2_Normalize/                                      # when the model L2-normalises
      config_sentence_transformers.json                 # prompts: {"query": instruction, "document": prefix}
      hopscotch_config.json                             # pooling, lengths, instruction, temperature
      golden_vectors.json                               # probe vectors at save time (hopscotch audit model)
      hopscotch_query_tokenizer.py                      # the query tokenizer (trust_remote_code only)
      README.md                                         # the model card
      query_encoder/                                    # only with separate towers: the query tower

``hopscotch_config.json`` keeps what sentence-transformers has no place for: the query and passage
length budgets (the reasoning is cut from the left to fit ``query_max_len``, see
:func:`hopscotch.retriever.model.query_template.format_query_truncated`), the instruction and the temperature.

Queries in sentence-transformers. A tokenizer has one truncation side, and passages must lose their end
while a long reasoning query must lose the start of its reasoning and keep the instruction and the query;
sentence-transformers (v6) imports no module class outside its own package without ``trust_remote_code``.
So the folder loads two ways:

* ``SentenceTransformer(path)``: Hopscotch's vectors for passages and for every query that fits
  ``query_max_len`` tokens (give it Hopscotch's query text, e.g. through ``encode_query`` which adds the
  instruction); a longer query is cut from the right, losing the query itself.
* ``SentenceTransformer(path, trust_remote_code=True)``: ``tokenizer_config.json`` maps ``AutoTokenizer``
  to ``hopscotch_query_tokenizer.HopscotchQueryTokenizer``, the backbone's tokenizer class with
  :class:`HopscotchQueryTokenizerMixin`: any text in the reasoning template
  (``[instruction]Reasoning: {reasoning}\\n\\nQuery: {query}``) is rendered as Hopscotch renders it (query
  input variant, instruction, reasoning cut from the left to ``query_max_len``), so
  ``encode(query_text)`` equals Hopscotch's query vector for queries of any length. Its source is this
  module's and :mod:`~hopscotch.retriever.model.query_template`'s own functions, copied at save time.
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
import tempfile
from pathlib import Path

import torch

from hopscotch.retriever.io.atomic import atomic_folder
from hopscotch.retriever.model.config import HOPSCOTCH_CONFIG
from hopscotch.retriever.model.golden import save_golden
from hopscotch.retriever.model.loading import bundled_minilm_path, looks_like_hub_id
from hopscotch.retriever.model.query_input import (
    FOCUS_QUESTION_WEIGHT,
    FOCUS_STOPWORDS,
    _focus_sentences,
    _focus_stem,
    _focus_words,
    _token_starts,
    focus_text,
    tail_text,
)
from hopscotch.retriever.model.query_template import _word_start, format_query, format_query_truncated, parse_query

_ST_POOLING = {"cls": "pooling_mode_cls_token", "mean": "pooling_mode_mean_tokens", "last": "pooling_mode_lasttoken"}
QUERY_TOKENIZER_MODULE = "hopscotch_query_tokenizer"
QUERY_TOKENIZER_CLASS = "HopscotchQueryTokenizer"
MODEL_CARD = "README.md"


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


class _PlainTokenizer:
    """A :class:`HopscotchQueryTokenizerMixin` tokenizer seen without its query rendering (what the
    truncation helpers count tokens with); every other attribute is the tokenizer's own."""

    def __init__(self, tokenizer):
        self._tokenizer = tokenizer

    def __call__(self, *args, **kwargs):
        return super(HopscotchQueryTokenizerMixin, self._tokenizer).__call__(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._tokenizer, name)


class HopscotchQueryTokenizerMixin:
    """Renders texts in the reasoning template as Hopscotch does, before tokenizing them.

    Mixed into the backbone's tokenizer class in the saved folder's ``hopscotch_query_tokenizer.py``
    (loaded with ``trust_remote_code=True``). ``hopscotch_query`` (from ``tokenizer_config.json``) holds the
    model's ``instruction``, ``query_max_len`` and ``query_input``. A text ``[instruction]Reasoning: R\\n\\nQuery:
    q`` becomes exactly what Hopscotch encodes for query ``q`` with reasoning ``R``: ``reasoning_tail:N``
    keeps R's last N tokens, ``reasoning_focus:N`` the sentences of R that ``focus_text`` picks for ``q``
    within N tokens, the instruction goes in front (added when missing), and R is cut from the left to fit
    ``query_max_len``. Other texts, and every text of a ``query``-variant model, pass unchanged.
    """

    def __init__(self, *args, hopscotch_query: dict | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.hopscotch_query = dict(hopscotch_query or {})
        self.init_kwargs["hopscotch_query"] = self.hopscotch_query  # written back by save_pretrained

    def hopscotch_query_text(self, text: str) -> str:
        """``text`` as Hopscotch's query encoder input (unchanged unless in the reasoning template)."""
        settings = getattr(self, "hopscotch_query", None) or {}
        variant = str(settings.get("query_input") or "reasoning")
        instruction = settings.get("instruction") or ""
        parsed = None if variant == "query" else parse_query(text, instruction)
        if parsed is None:
            return text
        query, reasoning = parsed
        plain = _PlainTokenizer(self)
        kind, _, budget = variant.partition(":")
        if kind == "reasoning_tail":
            reasoning = tail_text(reasoning or "", int(budget), plain)
        elif kind == "reasoning_focus":
            reasoning = focus_text(reasoning or "", int(budget), query, plain)
        return format_query_truncated(plain, settings.get("query_max_len"), query, reasoning, instruction=instruction)

    def __call__(self, text=None, *args, **kwargs):
        if not kwargs.get("is_split_into_words"):
            if isinstance(text, str):
                text = self.hopscotch_query_text(text)
            elif isinstance(text, (list, tuple)) and all(isinstance(t, str) for t in text):
                text = [self.hopscotch_query_text(t) for t in text]
        return super().__call__(text, *args, **kwargs)


_SHIPPED = (_token_starts, tail_text, _focus_stem, _focus_words, _focus_sentences, focus_text, format_query,
            _word_start, format_query_truncated, parse_query, _PlainTokenizer, HopscotchQueryTokenizerMixin)


def query_tokenizer_source(base_class: str) -> str:
    """The source of ``hopscotch_query_tokenizer.py`` for a backbone tokenizer class named ``base_class``:
    self-contained (``re`` and ``transformers`` only), built from the functions Hopscotch itself runs."""
    base = base_class.removesuffix("Fast")
    doc = ('"""The query tokenizer of a Hopscotch model folder (written by hopscotch.retriever.model.saving; load it '
           'with\nSentenceTransformer(path, trust_remote_code=True)). Do not edit: it is regenerated on every save."""')
    parts = [doc, "from __future__ import annotations", "import re", 'EMPTY_REASONING = "Empty"',
             f"FOCUS_STOPWORDS = frozenset({sorted(FOCUS_STOPWORDS)!r})",
             f"FOCUS_QUESTION_WEIGHT = {FOCUS_QUESTION_WEIGHT!r}"]
    parts += [inspect.getsource(obj).rstrip() for obj in _SHIPPED]
    parts.append(f"try:\n    from transformers import {base}Fast as _Base\nexcept ImportError:\n"
                 f"    from transformers import {base} as _Base")
    parts.append(f"class {QUERY_TOKENIZER_CLASS}(HopscotchQueryTokenizerMixin, _Base):\n"
                 f'    """{base} that renders reasoning-template texts as Hopscotch does."""')
    return "\n\n\n".join(parts) + "\n"


def ship_query_tokenizer(folder: Path, tokenizer, query: dict) -> bool:
    """Write ``hopscotch_query_tokenizer.py`` into a saved tower and map ``AutoTokenizer`` to it in
    ``tokenizer_config.json`` (with the ``hopscotch_query`` settings); False when the backbone's tokenizer
    class is not one of transformers' own (then the folder keeps its plain tokenizer only)."""
    import transformers

    name = type(tokenizer).__name__
    base = name.removesuffix("Fast")
    config_file = folder / "tokenizer_config.json"
    if not config_file.is_file() or not (hasattr(transformers, base) or hasattr(transformers, base + "Fast")):
        return False
    (folder / f"{QUERY_TOKENIZER_MODULE}.py").write_text(query_tokenizer_source(base))
    config = json.loads(config_file.read_text())
    ref = f"{QUERY_TOKENIZER_MODULE}.{QUERY_TOKENIZER_CLASS}"
    config["auto_map"] = {"AutoTokenizer": [ref, ref]}
    config["hopscotch_query"] = query
    _write_json(config_file, config)
    return True


def task_lengths(query_max_len: int, passage_max_len: int) -> dict[str, int]:
    """``sentence_bert_config.json``'s per-task lengths (``query_length`` for ``encode_query``, ``document_length``
    for ``encode_document``) where the installed sentence-transformers reads them (v6), else nothing (an older
    one would refuse the keys)."""
    try:
        from sentence_transformers.base.modules.transformer import Transformer
    except ImportError:
        return {}
    keys = getattr(Transformer, "config_keys", ())
    if "query_length" not in keys or "document_length" not in keys:
        return {}
    return {"query_length": int(query_max_len), "document_length": int(passage_max_len)}


def save_tower(backbone, tokenizer, folder: Path, pooling: str, normalize: bool, max_seq_length: int,
               prompts: dict[str, str], query: dict | None = None, lengths: dict[str, int] | None = None) -> bool:
    """One backbone + tokenizer + the sentence-transformers module files in ``folder``; with ``query``
    (``instruction``, ``query_max_len``, ``query_input``) also the query tokenizer. ``max_seq_length``: what
    ``encode`` cuts at; ``lengths``: :func:`task_lengths`. True when the query tokenizer was shipped."""
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
    _write_json(folder / "sentence_bert_config.json", {"max_seq_length": max_seq_length, "do_lower_case": False,
                                                        **(lengths or {})})
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
    return ship_query_tokenizer(folder, tokenizer, query) if query is not None else False


def save_model(model, path: str | os.PathLike, training: dict | None = None) -> str:
    """Write ``model`` to ``path`` atomically (a temp folder beside it, then a rename), with its model card.

    ``training`` (default: the model's ``training_info`` attribute, if any) says what it was trained on for
    the card: ``{"data": [sources], "recipe": name, ...}``; see :func:`model_card`.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # ".NAME.<random>.tmp": the temp name every clean-up of stale temp files knows (training preflight)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    c = model.config
    try:
        prompts = {"query": c.instruction, "document": c.passage_prefix}
        query = {"instruction": c.instruction, "query_max_len": c.query_max_len, "query_input": str(c.query_variant())}
        # one document length: what the model trained its passages at is what sentence-transformers cuts them at
        # (encode, encode_document); encode_query takes the query length (task_lengths)
        lengths = task_lengths(c.query_max_len, c.passage_max_len)
        shipped = save_tower(model.passage_backbone, model.tokenizer, tmp, c.pooling, c.normalize, c.passage_max_len,
                             prompts, query, lengths if c.shared_towers else None)
        if not c.shared_towers:
            save_tower(model.query_backbone, model.tokenizer, tmp / "query_encoder", c.pooling, c.normalize,
                       c.query_max_len, prompts, query)
        saved = model.config_dict()
        saved["lora"] = {}  # the adapters are merged into the saved weights
        _write_json(tmp / HOPSCOTCH_CONFIG, saved)
        save_golden(tmp, model)  # golden_vectors.json: what `hopscotch audit model` re-encodes
        info = training if training is not None else getattr(model, "training_info", None)
        (tmp / MODEL_CARD).write_text(model_card(c, path.name, base_model_name(model), info, shipped))
        old = None
        if path.exists():
            old = path.with_name(f".{path.name}.old.tmp")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
        os.replace(tmp, path)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return str(path)


def save_multi_vector(st_model, path: str | os.PathLike, config: dict) -> str:
    """A multi-vector model (a ``sentence_transformers.MultiVectorEncoder``: Transformer -> Dense -> MultiVectorMask
    -> Normalize) written by sentence-transformers itself, plus ``hopscotch_config.json`` (``config``, with
    ``kind: multi_vector``), atomically; ``MultiVectorEncoder(path)`` loads the folder unchanged."""
    with atomic_folder(path) as build:
        st_model.save(str(build))
        _write_json(build / HOPSCOTCH_CONFIG, config)
        save_golden(build, st_model, multi_vector=True)
    return str(path)


def base_model_name(model) -> str:
    """What the model started from: a Hub id, ``sentence-transformers/all-MiniLM-L6-v2`` for the bundled
    model, else the folder's name (never a full local path)."""
    backbone = model.passage_backbone
    backbone = backbone.get_base_model() if hasattr(backbone, "get_base_model") else backbone
    source = str(getattr(backbone.config, "_name_or_path", "") or "")
    if not source:
        return "unknown"
    if os.path.abspath(source) == os.path.abspath(bundled_minilm_path()):
        return "sentence-transformers/all-MiniLM-L6-v2"
    if "models--" in source and "/snapshots/" in source:  # a Hub cache snapshot
        return source.split("models--", 1)[1].split("/snapshots/", 1)[0].replace("--", "/", 1)
    if not os.path.exists(source) and looks_like_hub_id(source):
        return source
    return f"a local folder named {Path(source).name!r}"


_VARIANT_TEXT = {
    "query": "the query alone: `{{instruction}}{{query}}` (no reasoning)",
    "prior_queries": "the trajectory's earlier queries, one per line",
    "reasoning": "the agent's full reasoning so far",
    "current_reasoning": "only the reasoning written since the last tool result",
    "reasoning_tail": "the last {n} tokens of the reasoning",
    "reasoning_focus": "the reasoning's sentences most related to the query (shared content words; the task "
                       "statement's count less), newest first on ties, kept in order within {n} tokens",
    "with_documents": "the reasoning with the previous call's results (`title: snippet` lines) spliced in",
}


_CARD = """---
{meta}
---

# {name}: a Hopscotch dense retriever

A dense retriever trained with Hopscotch for deep-research agents. Base model: {base}.

## Training data

{trained}

## Query input

| setting | value |
|---|---|
| query input variant | `{variant}`: {about} |
| query text | `{{instruction}}Reasoning: {{reasoning or 'Empty'}}\\n\\nQuery: {{query}}` (AgentIR's template) |
| instruction | `{instruction}` (concatenated, no separator) |
| query length | {qlen} tokens: the reasoning is cut from the left, the query survives |
| passages | `{prefix}` + title + " " + text, cut from the right at {plen} tokens |
| embedding | {pooling}, {sim}; {towers} |

## With Hopscotch

```bash
hopscotch index --corpus corpus.jsonl --model PATH --out index
hopscotch search --index index --queries queries.jsonl --reasoning --out run.trec
```

`search` and `serve` use the query input variant above unless `--query-input` says otherwise; in Python,
`DualEncoder.from_pretrained("PATH")` (`hopscotch.retriever.model.dual_encoder`).

## With sentence-transformers

```python
from sentence_transformers import SentenceTransformer

queries = SentenceTransformer("{qpath}", trust_remote_code=True)
q = queries.encode_query(["Reasoning: <the agent's reasoning>\\n\\nQuery: <its search query>"])
passages = SentenceTransformer("PATH")
p = passages.encode_document(["<title> <text>"])
```

{remote}

Without `trust_remote_code`, `SentenceTransformer("{qpath}")` gives the same passage vectors (`encode_document`,
or `encode`: cut at {plen} tokens, the length the model was trained with), and the same query vectors for query
texts that fit {qlen} tokens (`encode_query` adds the instruction); a longer text is cut from the right, losing the
query: shorten its reasoning from the left first. Fill the reasoning slot per the variant.
"""


def model_card(config, name: str, base: str, training: dict | None, shipped: bool) -> str:
    """The ``README.md`` of a saved folder: what it was trained on (``training["data"]`` and any other
    ``training`` keys), its query input, and how to load it with Hopscotch and with sentence-transformers."""
    variant = config.query_variant()
    meta = ["library_name: sentence-transformers", "pipeline_tag: sentence-similarity",
            "tags: [sentence-transformers, feature-extraction, dense-retrieval, hopscotch, reasoning-aware]"]
    if looks_like_hub_id(base):
        meta.append(f"base_model: {base}")
    training = dict(training or {})
    data = training.pop("data", None)
    data = [data] if isinstance(data, str) else list(data or [])
    lines = [f"- `{d}`" for d in data] or ["Not recorded (saved outside `hopscotch train`, or without its data list)."]
    lines += [f"- {key}: `{value}`" for key, value in training.items()]
    remote = (f"`trust_remote_code=True` runs `{QUERY_TOKENIZER_MODULE}.py` from this folder: the tokenizer with "
              "Hopscotch's query rendering (a text in the template above gets the variant, the instruction and the "
              f"left cut to {config.query_max_len} tokens; other texts pass unchanged), so query vectors equal "
              "Hopscotch's for queries of any length." if shipped else
              "This folder ships no query tokenizer (its tokenizer class is not one of transformers' own).")
    return _CARD.format(
        meta="\n".join(meta), name=name, base=base, trained="\n".join(lines), variant=variant,
        about=_VARIANT_TEXT[variant.kind].format(n=variant.tail), instruction=json.dumps(config.instruction),
        qlen=config.query_max_len, prefix=json.dumps(config.passage_prefix), plen=config.passage_max_len,
        pooling={"cls": "first ([CLS]) token", "mean": "mean of the tokens", "last": "last token"}[config.pooling],
        sim="cosine (L2-normalised)" if config.normalize else "dot product",
        towers=("one encoder for queries and passages" if config.shared_towers else
                "separate towers: passages with this folder, queries with `query_encoder/`"),
        qpath="PATH" if config.shared_towers else "PATH/query_encoder", remote=remote)
