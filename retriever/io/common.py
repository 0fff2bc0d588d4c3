"""Low-level helpers shared by the readers: decoding, line iteration, JSON(L) parsing, atomic writes.

Readers get their text only through :func:`decoded_lines` (and :func:`iter_lines`, :func:`read_jsonl`,
:func:`read_json`, :func:`open_text` built on it) and check fields with :mod:`.validate`: the one input
boundary, where every malformed byte, line or field becomes a :class:`FormatError` naming file and line.
"""

from __future__ import annotations

import ast
import contextlib
import gzip
import io
import json
import os
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from hopscotch.retriever.errors import FormatError
from hopscotch.retriever.io.atomic import check_target, create_temp_file, ensure_parent
from hopscotch.retriever.io.validate import json_object, parse_json

_UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def _check_file(path: str | os.PathLike) -> Path:
    p = Path(path)
    if not p.exists():
        raise FormatError(p, None, "an existing file", "no such file")
    if p.is_dir():
        raise FormatError(p, None, "a file", "a folder")
    return p


def decoded_lines(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` for every line of a text file, 1-based, each with its line ending.

    The one place bytes become text: ``*.gz`` is un-gzipped, a UTF-8 byte-order mark at the start is
    dropped, and lines are split on ``\\n`` only. Raises :class:`FormatError` naming the file and line
    for a byte that is not UTF-8 (or a UTF-16 file), a truncated or corrupt gzip stream (reported on the
    line it broke in, with the last good line) and an unreadable file.
    """
    p = _check_file(path)
    gz = p.suffix == ".gz"
    try:
        fh = gzip.open(p, "rb") if gz else open(p, "rb")  # noqa: SIM115 - closed by the 'with' below
    except OSError as exc:
        raise FormatError(p, None, "a readable file", exc.strerror or str(exc)) from None
    with fh:
        lineno = 0
        while True:
            try:
                raw = fh.readline()
            except (OSError, EOFError, zlib.error) as exc:  # BadGzipFile is an OSError
                expected = "a complete, uncorrupted gzip file" if gz else "a readable file"
                raise FormatError(p, lineno + 1, expected,
                                  f"last good line {lineno}; {type(exc).__name__}: {exc}") from None
            if not raw:
                return
            lineno += 1
            if lineno == 1:
                if raw.startswith(_UTF8_BOM):
                    raw = raw[len(_UTF8_BOM):]
                elif raw.startswith(_UTF16_BOMS):
                    raise FormatError(p, 1, "UTF-8 text", "a UTF-16 byte-order mark (re-save the file as UTF-8)")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise FormatError(p, lineno, "UTF-8 text",
                                  f"byte 0x{raw[exc.start]:02x} at byte {exc.start + 1} of the line") from None
            yield lineno, text


class _CheckedText(io.TextIOBase):
    """A read-only text stream over :func:`decoded_lines` (what :func:`open_text` returns)."""

    def __init__(self, path: str | os.PathLike):
        super().__init__()
        self.name = str(path)
        self._lines = decoded_lines(path)
        self._pending = ""

    def readable(self) -> bool:
        return True

    def readline(self, size: int | None = -1) -> str:
        if self._pending:
            line, self._pending = self._pending, ""
        else:
            line = next(self._lines, (0, ""))[1]
        if size is not None and 0 <= size < len(line):
            line, self._pending = line[:size], line[size:]
        return line

    def read(self, size: int | None = -1) -> str:
        if size is None or size < 0:
            rest, self._pending = self._pending, ""
            return rest + "".join(line for _, line in self._lines)
        parts, n = [], 0
        while n < size and (line := self.readline(size - n)):
            parts.append(line)
            n += len(line)
        return "".join(parts)

    def close(self) -> None:
        self._lines.close()
        super().close()


def open_text(path: str | os.PathLike) -> IO[str]:
    """Open a text file for reading through :func:`decoded_lines` (gzip, BOM, UTF-8 checked line by line).

    A missing file or a folder raises :class:`FormatError` at once; bad bytes when their line is read.
    """
    _check_file(path)
    return _CheckedText(path)


def iter_lines(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` with 1-based numbers and no line ending, skipping blank lines."""
    for lineno, line in decoded_lines(path):
        line = line.rstrip("\n").rstrip("\r")
        if line.strip():
            yield lineno, line


def read_jsonl(path: str | os.PathLike, expected: str = "a JSON object") -> Iterator[tuple[int, dict]]:
    """Yield ``(line_number, object)`` for each non-blank line of a JSONL file.

    Raises :class:`FormatError` naming the file and line for anything :func:`decoded_lines` or
    :func:`~hopscotch.retriever.io.validate.json_object` refuses (bad bytes, invalid or too deeply
    nested JSON, a line that is not an object).
    """
    for lineno, line in iter_lines(path):
        yield lineno, json_object(line, path, lineno, expected)


def read_json(path: str | os.PathLike, expected: str = "a JSON value"):
    """The one JSON value of a whole file, read through :func:`decoded_lines`; errors name file and line."""
    text = "".join(line for _, line in decoded_lines(path))
    return parse_json(text, path, 1, expected)


def parquet_rows(path: str | os.PathLike, columns=None, batch_size: int = 4096) -> Iterator[dict]:
    """The rows of a parquet file as dicts, streamed in batches.

    ``columns``: None (all), or a function of the file's column names returning those to read (it may
    raise :class:`FormatError`). A file pyarrow cannot open, or a page it cannot read midway (corrupt
    data, invalid UTF-8), is a :class:`FormatError` naming the file and the 1-based row it broke at.
    """
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
        names = pf.schema_arrow.names
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a bad file
        raise FormatError(path, None, "a readable parquet file", str(exc)) from None
    batches, done = pf.iter_batches(batch_size=batch_size, columns=None if columns is None else columns(names)), 0
    while True:
        try:
            batch = next(batches, None)
            rows = [] if batch is None else batch.to_pylist()
        except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a bad page
            raise FormatError(path, done + 1, "a readable parquet file (rows numbered from 1)",
                              f"{type(exc).__name__}: {exc}") from None
        if batch is None:
            return
        yield from rows
        done += len(rows)


def first_key(obj: dict, keys: tuple[str, ...]):
    """Return the value of the first of ``keys`` present in ``obj`` (None when none is)."""
    for key in keys:
        if key in obj and obj[key] is not None:
            return obj[key]
    return None


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8"):
    """Write to a temporary file beside ``path`` and rename it into place on success.

    The target is checked first (:func:`~.atomic.check_target`: no device node, FIFO, socket or folder,
    a writable parent; else :class:`UsageError`); a symlink is followed, so the file it points at is
    replaced. The temporary ``.NAME.<pid>-<random>.tmp`` gets the replaced file's mode, else the umask's.
    A crash or exception leaves any previous ``path`` untouched and no partial file behind.
    """
    target = check_target(path)
    ensure_parent(target)
    fd, tmp = create_temp_file(target)
    kwargs = {} if "b" in mode else {"encoding": encoding}
    try:
        with os.fdopen(fd, mode, **kwargs) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
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
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        if not strict:
            return value
        raise FormatError(path or "<input>", lineno, f"{what} as a JSON object or a Python literal", text) from None
