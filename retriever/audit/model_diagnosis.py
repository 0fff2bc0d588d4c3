"""Which setting makes a loader's vectors differ from a model's golden vectors (``hopscotch audit model``).

The probes are re-encoded by a reference encoder (the folder's weights in a
:class:`~hopscotch.retriever.model.dual_encoder.DualEncoder`, whose every setting can be changed) under the
golden vectors' recorded settings with one setting changed at a time (then two): pooling (cls, mean, last
token), padding side, normalisation, the query instruction / prompt and the passage prefix (with and without,
and the values the folder's files hold), the query and passage max lengths (the other side's, the
sentence-transformers ``max_seq_length``, the folder's recorded ones, half) and the query input variant. A
variation whose vectors equal the loader's names the setting that loader uses differently.

The folder's files are also read for what each loader will use (:func:`declared_settings`), so a report can say
*where* the differing setting lives (``1_Pooling/config.json``, ``hopscotch_config.json``, ...).
"""

from __future__ import annotations

import itertools
import json
from dataclasses import fields, replace
from pathlib import Path

import numpy as np

from hopscotch.retriever.model.config import EncoderConfig
from hopscotch.retriever.model.golden import encode_probes
from hopscotch.retriever.model.query_input import QueryInput

#: how close a variation's vectors must be to a loader's to reproduce them (both fresh float32 encodings)
MATCH_TOL = 1e-4
MAX_PAIRS = 80
_ST_MODES = (("cls", "pooling_mode_cls_token"), ("mean", "pooling_mode_mean_tokens"),
             ("last", "pooling_mode_lasttoken"))


def _json(path: Path) -> dict:
    try:
        return json.loads(path.read_text()) if path.is_file() else {}
    except (OSError, json.JSONDecodeError):
        return {}


def declared_settings(folder: str) -> dict[str, dict]:
    """What each loader reads from the folder: ``{"sentence-transformers": {...}, "hopscotch_config.json": {...}}``
    with the keys of the golden settings (pooling, normalize, padding_side, instruction, passage_prefix, lengths)."""
    folder = Path(folder)
    pool = _json(folder / "1_Pooling" / "config.json")
    modules = json.loads((folder / "modules.json").read_text()) if (folder / "modules.json").is_file() else []
    st_config = _json(folder / "config_sentence_transformers.json")
    prompts = st_config.get("prompts") or {}
    mode = pool.get("pooling_mode")
    pooling = (mode if isinstance(mode, str) else None) or next((m for m, flag in _ST_MODES if pool.get(flag)), None)
    st = {"pooling": {"lasttoken": "last"}.get(pooling, pooling),
          "normalize": any("Normalize" in m.get("type", "") for m in modules),
          "max_seq_length": _json(folder / "sentence_bert_config.json").get("max_seq_length"),
          "instruction": prompts.get("query"), "passage_prefix": prompts.get("document"),
          "padding_side": _json(folder / "tokenizer_config.json").get("padding_side")}
    out = {"sentence-transformers": {k: v for k, v in st.items() if v is not None}}
    saved = _json(folder / "hopscotch_config.json")
    if saved:
        keys = ("pooling", "normalize", "padding_side", "instruction", "passage_prefix", "query_max_len",
                "passage_max_len", "query_input")
        out["hopscotch_config.json"] = {k: saved[k] for k in keys if k in saved}
    return out


def declared_differences(golden: dict, declared: dict[str, dict]) -> list[str]:
    """Lines naming each file setting that differs from the golden vectors' recorded one."""
    lines = []
    where = {"sentence-transformers": "sentence-transformers files", "hopscotch_config.json": "hopscotch_config.json"}
    for source, values in declared.items():
        for key, value in values.items():
            if key == "max_seq_length":
                continue  # one length for both sides: compared by re-encoding, not declared
            if key in golden and golden[key] != value:
                lines.append(f"{where[source]}: {key} = {value!r} (golden vectors: {golden[key]!r})")
    return lines


def variations(golden: dict, declared: dict[str, dict], fixed: bool = False) -> list[tuple[str, dict]]:
    """``(label, changes)``: one-setting changes of the golden settings worth trying (module doc); ``fixed``:
    for a loader given the golden input texts (sentence-transformers), so no query input variant."""
    out: list[tuple[str, dict]] = []
    st, hop = declared.get("sentence-transformers", {}), declared.get("hopscotch_config.json", {})

    def add(key: str, values, label) -> None:
        seen = {golden.get(key)}
        for value in values:
            if value is not None and value not in seen:
                seen.add(value)
                out.append((label(value), {key: value}))

    add("pooling", ("cls", "mean", "last"), lambda v: f"pooling {v} (golden: {golden['pooling']})")
    add("padding_side", ("left", "right"), lambda v: f"padding side {v} (golden: {golden['padding_side']})")
    add("normalize", (True, False), lambda v: "L2-normalised" if v else "not normalised")
    add("instruction", ("", st.get("instruction"), hop.get("instruction")),
        lambda v: f"query prefix/prompt {v!r} (golden: {golden['instruction']!r})")
    add("passage_prefix", ("", st.get("passage_prefix"), hop.get("passage_prefix")),
        lambda v: f"document prefix/prompt {v!r} (golden: {golden['passage_prefix']!r})")
    for side, other in (("query_max_len", "passage_max_len"), ("passage_max_len", "query_max_len")):
        what = "query" if side == "query_max_len" else "document"
        add(side, (golden[other], st.get("max_seq_length"), hop.get(side), max(1, golden[side] // 2)),
            lambda v, what=what, side=side: f"{what} max length {v} tokens (golden: {golden[side]})")
    if not fixed:
        add("query_input", (hop.get("query_input"), "query", "reasoning"),
            lambda v: f"query input {v} (golden: {golden['query_input']})")
    return out


def fixed_inputs(probes: list[dict], settings: dict, changes: dict) -> list[str]:
    """The golden input texts with the query instruction / passage prefix swapped per ``changes`` (what a loader
    given those texts and its own prompts encodes)."""
    out = []
    for p in probes:
        key = "instruction" if p["kind"] == "query" else "passage_prefix"
        text, old = p["input"], settings.get(key) or ""
        if key in changes and text.startswith(old):
            text = changes[key] + text[len(old):]
        out.append(text)
    return out


def encoder_config(settings: dict, changes: dict | None = None):
    """The :class:`~hopscotch.retriever.model.config.EncoderConfig` of recorded settings with ``changes``."""
    known = {f.name for f in fields(EncoderConfig)}
    config = EncoderConfig(**{k: v for k, v in settings.items() if k in known and k != "lora"})
    changes = dict(changes or {})
    if "query_input" in changes:
        changes["reasoning_aware"] = QueryInput.parse(changes["query_input"]).uses_reasoning
    return replace(config, **changes) if changes else config


class Reference:
    """The folder's weights under any settings: :meth:`vectors` encodes the probes (cached per change set)."""

    def __init__(self, model, probes: list[dict]):
        self.model, self.probes, self._cache = model, probes, {}

    def vectors(self, settings: dict, changes: dict | None = None, fixed: bool = False) -> np.ndarray:
        """The probes' vectors under ``settings`` with ``changes``; ``fixed``: from the golden input texts (their
        prefixes swapped, cut from the right) instead of texts rendered under the changed settings."""
        key = json.dumps([changes or {}, fixed], sort_keys=True)
        if key not in self._cache:
            config = encoder_config(settings, changes)
            self.model.config = config
            self.model.tokenizer.padding_side = config.padding_side
            inputs = fixed_inputs(self.probes, settings, changes or {}) if fixed else None
            _, vecs, _ = encode_probes(self.model, self.probes, inputs)
            self._cache[key] = np.asarray(vecs, dtype=np.float32)
        return self._cache[key]


def max_diff(a: np.ndarray, b: np.ndarray, rows: list[int] | None = None) -> float:
    """Largest absolute difference over ``rows`` (all: None); inf when the shapes differ."""
    if rows is not None:
        a, b = a[rows], b[rows]
    return float(np.max(np.abs(a - b))) if a.shape == b.shape and a.size else float("inf")


def diagnose(reference: Reference, settings: dict, declared: dict[str, dict], observed: np.ndarray,
             rows: list[int], fixed: bool = False) -> list[str]:
    """Labels of the setting changes (one, else two) whose re-encoding reproduces ``observed`` (a loader's vectors
    of the probes ``rows``; ``fixed``: a loader given the golden input texts); empty when none does."""
    singles = variations(settings, declared, fixed)
    found = [label for label, change in singles
             if max_diff(reference.vectors(settings, change, fixed), observed, rows) <= MATCH_TOL]
    if found:
        return found
    pairs = [(a, b) for a, b in itertools.combinations(singles, 2) if not set(a[1]) & set(b[1])][:MAX_PAIRS]
    return [f"{la} + {lb}" for (la, ca), (lb, cb) in pairs
            if max_diff(reference.vectors(settings, {**ca, **cb}, fixed), observed, rows) <= MATCH_TOL]
