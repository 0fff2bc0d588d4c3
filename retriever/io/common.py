"""Low-level helpers shared by the readers: line iteration, JSONL parsing, atomic writes."""

from __future__ import annotations

import ast
import contextlib
import gzip
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from hopscotch.retriever.errors import FormatError


def open_text(path: str | os.PathLike) -> IO[str]:
    """Open a text file for reading, transparently un-gzipping ``*.gz``."""
    p = Path(path)
    if not p.exists():
        raise FormatError(p, None, "an existing file", "no such file")
    if p.suffix == ".gz":
        return gzip.open(p, "rt", encoding="utf-8")
    return open(p, "r", encoding="utf-8")


def iter_lines(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` with 1-based numbers, skipping blank lines."""
    with open_text(path) as fh:
        for lineno, line in enumerate(fh, start=1):
            line = line.rstrip("\n").rstrip("\r")
            if line.strip():
                yield lineno, line


def read_jsonl(path: str | os.PathLike, expected: str = "a JSON object") -> Iterator[tuple[int, dict]]:
    """Yield ``(line_number, object)`` for each non-blank line of a JSONL file.

    Raises :class:`FormatError` naming the file and line when a line is not a JSON object.
    """
    for lineno, line in iter_lines(path):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise FormatError(path, lineno, expected, f"invalid JSON: {exc.msg}") from None
        if not isinstance(obj, dict):
            raise FormatError(path, lineno, expected, type(obj).__name__)
        yield lineno, obj


def first_key(obj: dict, keys: tuple[str, ...]):
    """Return the value of the first of ``keys`` present in ``obj`` (None when none is)."""
    for key in keys:
        if key in obj and obj[key] is not None:
            return obj[key]
    return None


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8"):
    """Write to a temporary file beside ``path`` and rename it into place on success.

    A crash or exception leaves any previous ``path`` untouched and no partial file behind.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    kwargs = {} if "b" in mode else {"encoding": encoding}
    try:
        with os.fdopen(fd, mode, **kwargs) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_json(path: str | os.PathLike, obj, indent: int | None = 2) -> None:
    """Atomically write ``obj`` as JSON."""
    with atomic_write(path) as fh:
        json.dump(obj, fh, indent=indent, ensure_ascii=False)
        fh.write("\n")


def write_jsonl(path: str | os.PathLike, rows) -> int:
    """Atomically write an iterable of dicts as JSONL; returns the number of rows."""
    n = 0
    with atomic_write(path) as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    return n


def parse_nested(value, path=None, lineno: int | None = None, what: str = "a nested field", strict: bool = False):
    """A nested field as a Python object: kept if already one, else parsed as JSON, then as a Python repr.

    Agent run files store nested fields either way (BrowseComp-Plus JSON objects, or Python-repr
    strings). Only strings that look like a list or an object (``[...]``, ``{...}``) are parsed; one
    that does not parse raises :class:`FormatError` with ``strict``, else is kept as the string it is.
    """
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text or text[0] not in "[{" or text[-1] not in "]}":
        return value
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        if not strict:
            return value
        raise FormatError(path or "<input>", lineno, f"{what} as a JSON object or a Python literal", text) from None
