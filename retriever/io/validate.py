"""The field checks of the one input boundary: ids, texts, numbers, JSON values and repeated ids.

Every reader of :mod:`hopscotch.retriever.io` gets its lines from :mod:`.common` (which decodes bytes,
gzip and BOMs) and checks each field it keeps with the functions here. Whatever is wrong becomes a
:class:`~hopscotch.retriever.errors.FormatError` naming the file, the 1-based line, what was expected and
what was found, which the CLI prints as one line with exit code 2; nothing here lets a Python exception
(``RecursionError``, ``OverflowError``, ``UnicodeDecodeError``, ...) or a silently wrong value through.

Rules:

* ids (:func:`check_id`): a string or an integer, never a bool, float, list or object; not empty; no
  control or line-breaking character (``\\n``, ``\\r``, ``\\t``, NUL, ``\\x85``, U+2028/9: they would shift
  every later line of a docid file) and no lone surrogate; ``whitespace=False`` (TREC runs and qrels,
  TSV files, query ids) refuses any whitespace too;
* texts (:func:`check_text`): strings without lone surrogates (they cannot be written back as UTF-8);
* numbers (:func:`finite_number`, :func:`integer_grade`, :func:`count`): finite (no ``nan``/``inf``),
  within their range; a relevance grade is an integer (``2`` or ``2.0``; ``0.9`` is refused, not
  truncated) within a C ``int`` (trec_eval's type); negative grades are TREC's non-relevant levels and read;
* JSON (:func:`parse_json`): invalid JSON, nesting too deep for the parser, or a number too long to
  convert are refused;
* numbers a flag also sets (:func:`json_number`): a value a JSON file of ours holds (``alpha`` of a
  ``--fusion-config``) goes through the flag's own ``type=`` function
  (:mod:`hopscotch.retriever.searchers.arg_types`), so a file can never carry what the flag refuses;
* repeats (:class:`UniqueIds`): an id met a second time names both places.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable
from typing import Any

from hopscotch.retriever.errors import FormatError

GRADE_LIMIT = 2**31 - 1  # trec_eval / pytrec_eval keep grades in a C int

_BAD_ID_CHAR = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_WHITESPACE = re.compile(r"\s")
_INTEGER = re.compile(r"[+-]?\d+")
_DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_NON_FINITE = {"nan", "+nan", "-nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity"}


def _shown(value: Any) -> str:
    """What was found, for a message (:class:`FormatError` quotes it): a string as is, else its type and repr."""
    return value[:80] if isinstance(value, str) else f"{type(value).__name__} {repr(value)[:80]}"


def check_id(value: Any, path: str | os.PathLike, lineno: int | None, what: str = "an id", *,
             whitespace: bool = True) -> str:
    """``value`` as an id string (integers read as their decimal string), or :class:`FormatError`.

    Refused: other types, empty ids, control / line-breaking characters and lone surrogates anywhere,
    and with ``whitespace=False`` any whitespace (a TREC or TSV column cannot carry it).
    """
    if type(value) is str and value.isprintable() and (whitespace or " " not in value) and value.strip(" "):
        return value  # the fast path of almost every id: printable excludes control and line-break characters
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise FormatError(path, lineno, f"{what} as a string or an integer", _shown(value))
    text = value if isinstance(value, str) else str(value)
    if not text or text.isspace():
        raise FormatError(path, lineno, f"{what} that is not empty", _shown(text))
    if _BAD_ID_CHAR.search(text):
        raise FormatError(path, lineno, f"{what} without control or line-break characters", _shown(text))
    if not whitespace and _WHITESPACE.search(text):
        raise FormatError(path, lineno, f"{what} without whitespace (the format cannot carry it)", _shown(text))
    return text


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")  # C speed; a regex scan is several times slower on long texts
    except UnicodeEncodeError:
        return True
    return False


def check_text(value: Any, path: str | os.PathLike, lineno: int | None, what: str = "a text") -> str:
    """``value`` if it is a string that can be written back as UTF-8 (no lone surrogates), else :class:`FormatError`."""
    if not isinstance(value, str):
        raise FormatError(path, lineno, f"{what} as a string", _shown(value))
    if not value.isascii() and _has_surrogate(value):
        raise FormatError(path, lineno, f"{what} without lone UTF-16 surrogates (\\ud800-\\udfff escapes)",
                          _shown(value))
    return value


def _number(value: Any) -> int | float | None:
    """A JSON number or a numeric string as int / float (``nan``/``inf`` spelled out included); None if neither."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if not isinstance(value, str):
        return None
    text = value.strip()
    try:
        if _INTEGER.fullmatch(text):
            return int(text)
        if _DECIMAL.fullmatch(text) or text.lower() in _NON_FINITE:
            return float(text)
    except ValueError:  # an integer of more digits than Python converts
        return math.inf
    return None


def finite_number(value: Any, path: str | os.PathLike, lineno: int | None, what: str = "a number", *,
                  minimum: float | None = None, maximum: float | None = None) -> float:
    """``value`` (a number or a numeric string) as a finite float within ``[minimum, maximum]``."""
    number = _number(value)
    if number is None:
        raise FormatError(path, lineno, what, _shown(value))
    number = float(number) if not isinstance(number, int) or abs(number) < 2**1023 else math.inf
    if not math.isfinite(number):  # spelled nan / inf, or too large for a float (1e400, 5,000 digits)
        spelled = isinstance(value, float) or (isinstance(value, str) and value.strip().lower() in _NON_FINITE)
        raise FormatError(path, lineno, f"{what}, not nan or infinite" if spelled else f"{what} within range",
                          _shown(value))
    if (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
        bounds = f"in [{'-inf' if minimum is None else minimum}, {'inf' if maximum is None else maximum}]"
        raise FormatError(path, lineno, f"{what} {bounds}", _shown(value))
    return number


def integer_grade(value: Any, path: str | os.PathLike, lineno: int | None,
                  what: str = "an integer relevance grade") -> int:
    """A relevance grade: an integer (``2``, ``"2"``, ``2.0``) within a C int; ``0.9``, ``nan``, ``inf`` are refused."""
    number = finite_number(value, path, lineno, what, minimum=-GRADE_LIMIT, maximum=GRADE_LIMIT)
    if not number.is_integer():
        raise FormatError(path, lineno, f"{what} (not a fraction: grades are not rounded)", _shown(value))
    return int(number)


def count(value: Any, path: str | os.PathLike, lineno: int | None, what: str = "a count") -> int:
    """A non-negative integer (``3`` or ``3.0``; not ``-1``, ``2.5``, ``nan``, ``inf`` or a bool)."""
    number = finite_number(value, path, lineno, f"{what} as a non-negative integer", minimum=0)
    if not number.is_integer():
        raise FormatError(path, lineno, f"{what} as a non-negative integer", _shown(value))
    return int(number)


def json_number(value: Any, checker: Callable[[str], Any], path: str | os.PathLike, lineno: int | None,
                what: str) -> Any:
    """``value``, a number read from a JSON file, checked by ``checker``: the ``type=`` function of the flag
    that sets the same setting (:mod:`hopscotch.retriever.searchers.arg_types`: ``non_negative_float``,
    ``unit_interval``, ...), which refuses a value with a :class:`ValueError` (their ``FlagValueError``).

    A JSON number only (a string, a bool or null is refused); whatever the flag would refuse (``nan``,
    out of range, a fraction for an integer) is a :class:`FormatError` naming ``what`` (``'alpha'``)."""
    wants = getattr(checker, "wants", "a number")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise FormatError(path, lineno, f"{what} as {wants}", _shown(value))
    try:
        return checker(repr(value))  # repr round-trips a float; nan and inf spell themselves
    except ValueError:
        raise FormatError(path, lineno, f"{what} as {wants}", _shown(value)) from None


def parse_json(text: str, path: str | os.PathLike, lineno: int | None, expected: str) -> Any:
    """``json.loads(text)``, with every failure a :class:`FormatError`.

    ``lineno`` is the file line ``text`` starts on (a JSONL line, or 1 for a whole file): a syntax error
    is reported on the line it is on. Nesting too deep for the parser (``RecursionError``) and numbers
    too long to convert (``ValueError``) are refused too.
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        line = None if lineno is None else lineno + exc.lineno - 1
        raise FormatError(path, line, expected, f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    except RecursionError:
        raise FormatError(path, lineno, expected, "JSON nested too deeply to parse") from None
    except ValueError as exc:  # e.g. an integer literal longer than int() converts
        raise FormatError(path, lineno, expected, f"invalid JSON value: {exc}") from None


def json_object(text: str, path: str | os.PathLike, lineno: int | None, expected: str) -> dict:
    """:func:`parse_json`, which must give an object (a dict)."""
    obj = parse_json(text, path, lineno, expected)
    if not isinstance(obj, dict):
        raise FormatError(path, lineno, expected, type(obj).__name__)
    return obj


class UniqueIds:
    """Remembers ids and where each was first seen; :meth:`add` refuses one met again.

    ``what`` names the ids in the message (``"document ids"``). Memory: one entry per id (the id string,
    usually already held by the caller, and one packed integer for its place).
    """

    def __init__(self, what: str):
        self.what = what
        self._first: dict[str, int] = {}
        self._files: list[str] = []
        self._path: object = None

    def add(self, key: str, path: str | os.PathLike, lineno: int | None) -> None:
        """Record ``key`` at ``path:lineno``; :class:`FormatError` there if it was seen before."""
        if path is not self._path:  # a new file (the same path object is passed for a whole file)
            self._path = path
            self._files.append(str(path))
        first = self._first.get(key)
        if first is None:
            self._first[key] = (lineno or 0) << 20 | min(len(self._files) - 1, (1 << 20) - 1)
            return
        line, file_no = first >> 20, first & ((1 << 20) - 1)
        where = f"line {line}" if self._files[file_no] == str(path) else f"{self._files[file_no]}:{line}"
        raise FormatError(path, lineno, f"unique {self.what} ({repr(key)[:80]} is already at {where})")
