"""The checks every index folder's reader makes of its files on open (multi-vector: :mod:`.multi_vector.files`;
BM25, both backends: :mod:`.bm25.checks`): a file that is missing, a folder, truncated, not NumPy, of another dtype
or shape, or holding values out of range fails at open with one line naming it and saying how to rebuild it, never
later with an IndexError (or a crash in a compiled kernel) inside a search.

Value checks read an array whole up to :data:`FULL_CHECK` elements, and :data:`SAMPLE_BLOCKS` evenly spaced blocks of
it beyond (a web-scale index is not read whole at open).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from hopscotch.retriever.errors import UsageError

FULL_CHECK = 50_000_000   # arrays up to this many elements are range-checked whole; larger ones on SAMPLE_BLOCKS blocks
SAMPLE_BLOCKS = 64


def damaged(path: Path, what: str, rebuild: str) -> UsageError:
    """The one-line error of a damaged index file: ``PATH: what; rebuild``."""
    return UsageError(f"{path}: {what}; {rebuild}")


def check_file(path: Path, rebuild: str) -> None:
    """``path`` is an existing regular file (not a folder)."""
    if path.is_dir():
        raise damaged(path, "a folder where the index has a file", rebuild)
    if not path.is_file():
        raise damaged(path, "missing", rebuild)


def load_array(path: Path, rebuild: str, mmap: bool = False) -> np.ndarray:
    """``np.load`` of one index file (no pickles); a missing, truncated or non-NumPy file is a one-line UsageError
    naming it."""
    check_file(path, rebuild)
    try:
        return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise damaged(path, f"not a readable NumPy array ({str(exc).splitlines()[0][:120]})", rebuild) from None


def load_vector(path: Path, dtype, length: int | None, rebuild: str, what: str = "") -> np.ndarray:
    """:func:`load_array` (memory-mapped) of a 1-D array of exactly ``dtype`` and (unless None) ``length``."""
    a = load_array(path, rebuild, mmap=True)
    want = np.dtype(dtype)
    if a.dtype != want or a.ndim != 1:
        raise damaged(path, f"expected a 1-D {want} array{what}, got {a.dtype} of shape {a.shape}", rebuild)
    if length is not None and len(a) != length:
        raise damaged(path, f"expected {length:,} entries{what}, got {len(a):,}", rebuild)
    return a


def load_json(path: Path, rebuild: str):
    """A JSON file of an index folder, parsed."""
    check_file(path, rebuild)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise damaged(path, f"not readable JSON ({str(exc)[:120]})", rebuild) from None


def blocks(a: np.ndarray, full: int | None = FULL_CHECK):
    """``a`` whole, or :data:`SAMPLE_BLOCKS` evenly spaced blocks of it (the first and last included) when it is
    larger than ``full`` (None: always whole, in pieces of ``FULL_CHECK``)."""
    if full is None:
        for start in range(0, max(len(a), 1), FULL_CHECK):
            yield np.asarray(a[start:start + FULL_CHECK])
        return
    if a.size <= full:
        yield np.asarray(a)
        return
    n = len(a)
    step = max(1, full // SAMPLE_BLOCKS)
    for start in np.linspace(0, max(0, n - step), SAMPLE_BLOCKS).astype(np.int64):
        yield np.asarray(a[start:start + step])


def check_range(path: Path, a: np.ndarray, low: int, high: int, what: str, rebuild: str,
                full: int | None = FULL_CHECK) -> None:
    """Integers of ``a`` in ``[low, high)`` (``full``: as :func:`blocks`)."""
    if not np.issubdtype(a.dtype, np.integer):
        raise damaged(path, f"{what} must be integers, got dtype {a.dtype}", rebuild)
    for block in blocks(a, full):
        if block.size and (int(block.min()) < low or int(block.max()) >= high):
            raise damaged(path, f"{what} out of range: values {int(block.min())}..{int(block.max())}, expected "
                                f"{low}..{high - 1}", rebuild)


def check_finite(path: Path, a: np.ndarray, what: str, rebuild: str, non_negative: bool = False,
                 full: int | None = FULL_CHECK) -> None:
    """Floats of ``a`` finite (and ``>= 0`` when ``non_negative``; ``full``: as :func:`blocks`)."""
    if not np.issubdtype(a.dtype, np.floating):
        raise damaged(path, f"{what} must be floats, got dtype {a.dtype}", rebuild)
    for block in blocks(a, full):
        if not np.isfinite(block).all():
            raise damaged(path, f"{what} holds NaN or infinite values", rebuild)
        if non_negative and block.size and float(block.min()) < 0:
            raise damaged(path, f"{what} holds negative values ({float(block.min()):g})", rebuild)


def check_pointers(path: Path, ptr: np.ndarray, end: int, what: str, rebuild: str) -> None:
    """An offsets array (CSR ``indptr``): non-decreasing from 0 to ``end`` (read whole: it has an entry a row)."""
    if not len(ptr):
        raise damaged(path, f"{what}: empty, expected at least one offset", rebuild)
    first, last = int(ptr[0]), int(ptr[-1])
    if first != 0 or last != end:
        raise damaged(path, f"{what} must run from 0 to {end:,}, got {first:,}..{last:,}", rebuild)
    step = 1 << 24
    for start in range(0, len(ptr) - 1, step):  # in pieces: no whole-array temporary
        piece = np.asarray(ptr[start:start + step + 1])
        if piece.size > 1 and bool((piece[1:] < piece[:-1]).any()):
            at = start + int(np.argmax(piece[1:] < piece[:-1]))
            raise damaged(path, f"{what} must not decrease (entry {at + 1:,}: {int(ptr[at + 1]):,} after "
                                f"{int(ptr[at]):,})", rebuild)


def whole_number(value, low: int = 0) -> bool:
    """``value`` is an int (not a bool) ``>= low``."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def finite_number(value) -> bool:
    """``value`` is a finite int or float (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
