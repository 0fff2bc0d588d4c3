"""Range-checked ``type=`` functions for numeric command-line flags (argparse).

Each function takes the flag's text and returns the value, or raises :class:`FlagValueError` (an
:class:`argparse.ArgumentTypeError`), which argparse prints as one line naming the flag (``hopscotch search:
error: argument --k: expected an integer >= 1, got '0'``) and exit code 2, before any work starts. Floats are
finite (``nan`` and ``inf`` are refused); integers are whole decimal numbers (``1e3`` and ``2.0`` are refused,
not truncated). Each function's ``wants`` says what it accepts (``"a finite number >= 0"``): a number a JSON
file of ours holds for the same setting goes through the same function
(:func:`~hopscotch.retriever.io.validate.json_number`, which catches :class:`FlagValueError` as the
:class:`ValueError` it also is, so that the ``io`` layer needs no argparse).

They sit in the ``searchers`` layer, the lowest that declares command-line flags: every backend declares its
own (``SearcherClass.parse_args(parser)``, as BrowseComp-Plus and AgentIR build a searcher), and so do the
commands above it; the commands import them, with the metric and clamping helpers, from
:mod:`hopscotch.retriever.commands.flag_types`.

Example::

    parser.add_argument("--k", type=positive_int, default=100)
    parser.add_argument("--alpha", type=unit_interval)
    parser.add_argument("--permutations", type=int_range(1, 1_000_000), default=10_000)
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

#: the largest seed every random generator here takes (numpy's legacy seeding is 32-bit)
SEED_MAX = 2**32 - 1


class FlagValueError(argparse.ArgumentTypeError, ValueError):
    """A flag value (or the same setting read from a file) out of range; argparse prints its message."""


def _shown(text) -> str:
    return repr(text if isinstance(text, str) else str(text))[:60]


def _bounds(lo: float | None, hi: float | None, kind: str) -> str:
    if lo is not None and hi is not None:
        return f"{kind} in [{lo:,}, {hi:,}]" if kind == "an integer" else f"{kind} in [{lo:g}, {hi:g}]"
    if lo is not None:
        return f"{kind} >= {lo:,}" if kind == "an integer" else f"{kind} >= {lo:g}"
    return f"{kind} <= {hi:,}" if kind == "an integer" and hi is not None else kind


def int_range(lo: int | None = None, hi: int | None = None) -> Callable[[str], int]:
    """A ``type=`` function accepting whole numbers ``lo <= n <= hi`` (None: unbounded on that side)."""

    wants = _bounds(lo, hi, "an integer")

    def parse(text: str) -> int:
        try:
            value = int(str(text).strip(), 10)
        except ValueError:
            value = None
        if value is None or (lo is not None and value < lo) or (hi is not None and value > hi):
            raise FlagValueError(f"expected {wants}, got {_shown(text)}")
        return value

    parse.__name__ = "integer"
    parse.wants = wants  # what it accepts, for messages about a value read from a file (validate.json_number)
    return parse


def float_range(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False
                ) -> Callable[[str], float]:
    """A ``type=`` function accepting finite numbers ``lo <= x <= hi`` (``lo < x`` with ``lo_open``)."""

    if lo_open and lo is not None:
        wants = f"a finite number > {lo:g}" + (f" and <= {hi:g}" if hi is not None else "")
    else:
        wants = _bounds(lo, hi, "a finite number")

    def parse(text: str) -> float:
        try:
            value = float(str(text).strip())
        except (ValueError, OverflowError):
            value = math.nan
        low_ok = lo is None or (value > lo if lo_open else value >= lo)
        if not math.isfinite(value) or not low_ok or (hi is not None and value > hi):
            raise FlagValueError(f"expected {wants}, got {_shown(text)}")
        return value

    parse.__name__ = "number"
    parse.wants = wants  # what it accepts, for messages about a value read from a file (validate.json_number)
    return parse


#: whole numbers >= 1 (counts, sizes, ``k``)
positive_int = int_range(1)
#: whole numbers >= 0
non_negative_int = int_range(0)
#: random seeds: 0 .. 2**32 - 1
seed_int = int_range(0, SEED_MAX)
#: any finite number (no ``nan`` / ``inf``)
finite_float = float_range()
#: finite numbers > 0 (timeouts, rates)
positive_float = float_range(0.0, lo_open=True)
#: finite numbers >= 0
non_negative_float = float_range(0.0)
#: weights and fractions in [0, 1]
unit_interval = float_range(0.0, 1.0)
