"""Recipes: a typed :class:`~hopscotch.retriever.training.recipe.sections.Recipe` read from a YAML experiment file plus ``key=value`` overrides.

A recipe has five sections, one dataclass each (:mod:`~hopscotch.retriever.training.recipe.sections`): ``model``
(with ``model.lora``), ``loss``, ``data``, ``train`` and ``eval``. Every key has a default; a recipe sets some,
the command line overrides any::

    train.py --recipe recipes/minilm_hotpot.yaml --output out train.lr=3e-5 data.train=tuples.jsonl

    recipe = load_recipe("recipes/minilm_hotpot.yaml", ["train.lr=3e-5"])
    recipe.train.lr, recipe.model.pooling, recipe.encoder_config()

Values on the command line are parsed as YAML (``3e-5`` a float, ``[a.jsonl, b.jsonl]`` a list, ``null`` None).
An unknown key (with the closest known names), a value of the wrong type, one out of range (``command line:
recipe key train.lr must be > 0, got -1``) or not finite (:mod:`~hopscotch.retriever.training.recipe.knobs`) is an
error naming the key, raised before anything is loaded; so are contradicting keys (``train.warmup_steps`` over
``train.max_steps``, an unknown ``eval.metric``: :mod:`~hopscotch.retriever.training.recipe.checks`). The query
mix's keys are ``model.query_mix``, ``model.query_mix_max_words`` and ``model.query_mix_long``; their former names
(``model.late_fusion``, ...) still work, with a note (:data:`KEY_ALIASES`).
``dataclasses.asdict(recipe)`` is the resolved recipe as the nested dict that ``train_summary.json`` stores.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import os
import sys
from pathlib import Path

import yaml

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.common import decoded_lines
from hopscotch.retriever.training.recipe.checks import check_loss_kind, check_mixture, check_together
from hopscotch.retriever.training.recipe.knobs import checked_value, section_schema
from hopscotch.retriever.training.recipe.sections import Recipe


#: public recipe key -> the model config's field it sets: the query mix's keys (the fields keep their former
#: ``late_fusion`` names, which saved model folders record); the former keys still work, with a deprecation note
KEY_ALIASES = {"model.query_mix": "model.late_fusion", "model.query_mix_max_words": "model.late_fusion_max_words",
               "model.query_mix_long": "model.late_fusion_long"}
DEPRECATED_KEYS = {field: key for key, field in KEY_ALIASES.items()}


def _public_keys(update: dict, prefix: str, where: str, note: bool) -> dict:
    """``update`` (one section's keys) with the public names of :data:`KEY_ALIASES` read as their fields; a former
    name (``model.late_fusion``) is read as it is, with one note on stderr when ``note``."""
    out = {}
    for key, value in update.items():
        full = prefix + key
        if full in KEY_ALIASES:
            field = KEY_ALIASES[full].rpartition(".")[2]
            if field in update:
                raise UsageError(f"{where}: recipe keys {full} and {prefix}{field} name the same setting: give one")
            key = field
        elif full in DEPRECATED_KEYS and note:
            print(f"hopscotch: note: {where}: recipe key {full} is deprecated, use {DEPRECATED_KEYS[full]}",
                  file=sys.stderr)
        out[key] = value
    return out


@functools.cache
def recipe_keys() -> tuple[str, ...]:
    """Every dotted recipe key (``model.lora.r``, ``train.lr``, ...)."""
    def walk(cls, prefix):
        for name, (tp, _) in section_schema(cls).items():
            yield from walk(tp, f"{prefix}{name}.") if dataclasses.is_dataclass(tp) else [prefix + name]
    return tuple(walk(Recipe, ""))


def _unknown(key: str, known: list[str], where: str) -> UsageError:
    close = difflib.get_close_matches(key, recipe_keys(), n=2, cutoff=0.75)
    guess = f", did you mean {' or '.join(map(repr, close))}?" if close else ""
    return UsageError(f"{where}: unknown recipe key {key!r}{guess} (known: {', '.join(known)})")


def _merge(cls: type, values: dict, update: dict, where: str, prefix: str = "", note: bool = True) -> None:
    """Check ``update`` against section ``cls`` and write its values into ``values`` (a nested dict); ``note``: say
    so when a deprecated key is used."""
    schema = section_schema(cls)
    for key, value in _public_keys(update, prefix, where, note).items():
        full = f"{prefix}{key}"
        if key not in schema:
            raise _unknown(full, sorted(prefix + k for k in schema), where)
        tp, meta = schema[key]
        if dataclasses.is_dataclass(tp):
            if not isinstance(value, dict):
                raise UsageError(f"{where}: recipe key {full!r} is a section; expected a mapping, got {value!r}")
            _merge(tp, values[key], value, where, full + ".", note)
        else:
            values[key] = checked_value(value, tp, meta, full, where)


def _build(cls: type, values: dict):
    return cls(**{name: _build(tp, values[name]) if dataclasses.is_dataclass(tp) else values[name]
                  for name, (tp, _) in section_schema(cls).items()})


# -- reading ---------------------------------------------------------------------------------------

def parse_override(item: str) -> dict:
    """``'train.lr=3e-5'`` -> ``{'train': {'lr': 3e-05}}``."""
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise UsageError(f"override {item!r}: expected key=value, e.g. train.lr=3e-5")
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError as exc:
        raise UsageError(f"override {item!r}: the value is not valid YAML ({exc.problem})") from None
    node = out = {}
    parts = key.strip().split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
    return out


def _read_yaml(recipe: str | os.PathLike) -> tuple[dict, str]:
    path = Path(recipe)
    if not path.is_file():
        raise UsageError(f"--recipe {recipe}: no such file")
    try:
        data = yaml.safe_load("".join(line for _, line in decoded_lines(path))) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        raise UsageError(f"{path}{line}: expected a YAML mapping of sections ({exc})") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a YAML mapping of sections, got {type(data).__name__}")
    return data, str(path)


def load_recipe(recipe: str | os.PathLike | dict | Recipe | None, overrides: list[str] | tuple = ()) -> Recipe:
    """Defaults, then the recipe (a YAML path, a nested dict or a :class:`Recipe`), then ``key=value``
    overrides; every value checked for its key's type and range."""
    values = dataclasses.asdict(Recipe())
    if isinstance(recipe, Recipe):
        _merge(Recipe, values, dataclasses.asdict(recipe), "recipe", note=False)
    elif isinstance(recipe, dict):
        _merge(Recipe, values, recipe, "recipe")
    elif recipe is not None:
        _merge(Recipe, values, *_read_yaml(recipe))
    for item in overrides:
        _merge(Recipe, values, parse_override(item), "command line")
    out = _build(Recipe, values)
    if not out.data.train:
        raise UsageError("recipe key data.train is required (a tuple file or a list of them)")
    if out.eval.queries and not (out.eval.corpus and out.eval.qrels):
        raise UsageError("recipe keys eval.corpus and eval.qrels are required with eval.queries")
    out.encoder_config()  # EncoderConfig checks pooling, lengths, padding side, temperature, Matryoshka keys
    check_loss_kind(out)
    check_mixture(out.data)
    check_together(out)
    return out
