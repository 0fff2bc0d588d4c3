"""A recipe key (a *knob*): how one is declared (:func:`knob`: its default, range, ceiling and what its sentinels
mean) and how a value given for it is checked (:func:`checked_value`: coerced to the key's type, numbers also from
YAML strings such as ``3e-5``, then held to the range), with errors that name the key and where it was set.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
import os
import types
import typing
from dataclasses import field, fields
from typing import Literal, Union

from hopscotch.retriever.errors import UsageError

_MISSING = dataclasses.MISSING


def knob(default, *, hint: str | None = None, ceiling: tuple[float, str] | None = None, **limits):
    """A recipe field: its default, the range (``gt``, ``ge``, ``le``, ``lt``; None always passes) and ``ceiling``
    ``(limit, why)`` (the most that means anything) :func:`checked_value` enforces; ``hint``: what sentinels mean."""
    return field(default=default, metadata={"bounds": limits, "hint": hint, "ceiling": ceiling})


_NONE = type(None)
_NAMES = {bool: "true/false", int: "a whole number", float: "a number", str: "a string", _NONE: "null"}
_LIMITS = {"gt": (">", operator.gt), "ge": (">=", operator.ge), "le": ("<=", operator.le), "lt": ("<", operator.lt)}


@functools.cache
def section_schema(cls: type) -> dict[str, tuple[object, dict]]:
    """``{field: (type, {"bounds": ..., "hint": ...})}`` of a section."""
    hints = typing.get_type_hints(cls)
    return {f.name: (hints[f.name], f.metadata or {"bounds": {}}) for f in fields(cls)}


def _describe(tp) -> str:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (Union, types.UnionType):
        return " or ".join(_describe(a) for a in args)
    if origin is Literal:
        return "one of " + ", ".join(map(repr, args))
    if origin is list:
        return "a list of strings" if args == (str,) else "a list"
    return _NAMES.get(tp, getattr(tp, "__name__", str(tp)))


def _number(value, kind: type):
    if isinstance(value, str):  # YAML 1.1 reads '3e-5' (no dot) as a string
        try:
            value = float(value)
        except ValueError:
            return _MISSING
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return _MISSING
    if kind is int:
        return int(value) if float(value) == int(value) else _MISSING
    return float(value)


def _coerce(value, tp):
    """``value`` as type ``tp`` (numbers also from YAML strings such as '3e-5'), or ``_MISSING``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (Union, types.UnionType):
        if value is None:
            return None if _NONE in args else _MISSING
        for alternative in (a for a in args if a is not _NONE):
            if (out := _coerce(value, alternative)) is not _MISSING:
                return out
        return _MISSING
    if origin is Literal:
        return value if isinstance(value, str) and value in args else _MISSING
    if origin is list:
        items = [_coerce(v, args[0]) for v in value] if isinstance(value, list) else [_MISSING]
        return _MISSING if any(item is _MISSING for item in items) else items
    if tp is bool:
        return value if isinstance(value, bool) else _MISSING
    if tp in (int, float):
        return _number(value, tp)
    if tp is str:
        return os.fspath(value) if isinstance(value, (str, os.PathLike)) else _MISSING
    raise TypeError(f"recipe fields of type {tp!r} are not supported")


def checked_value(value, tp, meta: dict, key: str, where: str):
    out = _coerce(value, tp)
    if out is _MISSING:
        hint = " (YAML reads yes/no/on/off as true/false: quote the word)" if isinstance(value, bool) else ""
        raise UsageError(f"{where}: recipe key {key}: expected {_describe(tp)}, got {value!r}{hint}")
    shown = value if isinstance(value, (int, float)) else out  # -1 as written, '3e-5' as the number it means
    if isinstance(out, float) and not math.isfinite(out):
        raise UsageError(f"{where}: recipe key {key} must be a finite number, got {shown!r}")
    bounds, ceiling = meta["bounds"], meta.get("ceiling")
    if out is not None and not all(_LIMITS[op][1](out, limit) for op, limit in bounds.items()):
        limits = " and ".join(f"{_LIMITS[op][0]} {limit}" for op, limit in bounds.items())
        hint = f" ({meta['hint']})" if meta.get("hint") else ""
        raise UsageError(f"{where}: recipe key {key} must be {limits}, got {shown!r}{hint}")
    if out is not None and ceiling and out > ceiling[0]:
        raise UsageError(f"{where}: recipe key {key} must be <= {ceiling[0]} ({ceiling[1]}), got {shown!r}")
    return out
