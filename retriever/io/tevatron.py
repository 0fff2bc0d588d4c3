"""Tevatron's file formats: the newer training JSONL and the encode pickles ``(reps, lookup)``.

Training, newer format (Tevatron's ``TrainDataset`` without ``positive_passages``)::

    {"query_id": "q1", "query_text": "...", "query_image": null,
     "positive_document_ids": ["d3"], "negative_document_ids": ["d7", "d9"], ...}

Documents are named by id and resolved against a separate corpus. :class:`TevatronIdResolver` turns
such a row into the older, self-contained layout (``{query_id, query, positive_passages: [{docid, title,
text}], negative_passages}``) that :mod:`hopscotch.retriever.io.tuples` parses; other fields (a
``reasoning``, the context fields) pass through unchanged. Ids go through
:func:`~hopscotch.retriever.io.docids.canonical_docid`; an id missing from the corpus is a
:class:`FormatError`. Only text queries are supported (no ``query_image``/``video``/``audio`` alone).

Encode pickles: ``tevatron.retriever.driver.encode`` writes ``pickle.dump((reps, lookup))`` per shard,
``reps`` a ``[n, d]`` numpy array and ``lookup`` the ``n`` docids (the published BrowseComp-Plus
dense indexes are such files, ``corpus.*.pkl``). Unpickling runs code chosen by whoever wrote the file,
so :func:`read_tevatron_pickle` uses a restricted unpickler that resolves nothing but numpy's array,
dtype and reconstruct functions: plain containers, strings and numbers load, and any other reference
(``os.system``, ``builtins.eval``, ...) raises :class:`FormatError` before anything is called. Callers
read pickles only when the user names them with an explicit flag (``hopscotch index --import-tevatron``).
:func:`write_tevatron_pickle` writes the same layout (float32 ``reps``, a list of str docids, pickle
protocol 4) atomically.
"""

from __future__ import annotations

import glob
import importlib
import os
import pickle
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hopscotch.retriever.errors import FormatError, UsageError
from hopscotch.retriever.io.common import atomic_write
from hopscotch.retriever.io.corpus import load_corpus_dict
from hopscotch.retriever.io.docids import canonical_docid
from hopscotch.retriever.io.validate import check_id

PICKLE_PROTOCOL = 4  # what Tevatron's own encode writes (Python's default protocol)
PICKLE_WARNING = ("pickle files can run arbitrary code when loaded; Hopscotch loads them with a restricted "
                  "unpickler that accepts only numpy arrays, lists and strings")

# (module, name) references a Tevatron pickle may hold -> (module to import, attribute); numpy 2 pickles
# name numpy._core, numpy 1 pickles numpy.core: either resolves to the installed numpy's own function
_ALLOWED_GLOBALS = {
    ("numpy", "ndarray"): ("numpy", "ndarray"),
    ("numpy", "dtype"): ("numpy", "dtype"),
    ("_codecs", "encode"): ("_codecs", "encode"),  # how protocol 2 spells bytes
}
for _core in ("numpy.core", "numpy._core"):
    _ALLOWED_GLOBALS[(f"{_core}.multiarray", "_reconstruct")] = ("multiarray", "_reconstruct")
    _ALLOWED_GLOBALS[(f"{_core}.multiarray", "scalar")] = ("multiarray", "scalar")
    _ALLOWED_GLOBALS[(f"{_core}.numeric", "_frombuffer")] = ("numeric", "_frombuffer")


class RefusedPickle(pickle.UnpicklingError):
    """A pickle referenced something other than numpy's array machinery; nothing of it was called."""


def _numpy_core(submodule: str):
    for base in ("numpy._core", "numpy.core"):
        try:
            return importlib.import_module(f"{base}.{submodule}")
        except ImportError:
            continue
    raise ImportError(f"numpy has no core.{submodule}")


class _RestrictedUnpickler(pickle.Unpickler):
    """An unpickler whose only callables are numpy's ndarray / dtype reconstruction functions."""

    def find_class(self, module: str, name: str):
        target = _ALLOWED_GLOBALS.get((module, name))
        if target is None:
            raise RefusedPickle(f"{module}.{name}")
        where, attr = target
        owner = importlib.import_module(where) if where in ("numpy", "_codecs") else _numpy_core(where)
        return getattr(owner, attr)

    def persistent_load(self, pid):
        raise RefusedPickle(f"persistent id {str(pid)[:40]}")


@dataclass
class TevatronReps:
    """One encode pickle: ``reps`` float32 ``[n, d]`` and the ``n`` canonical docids, in order."""

    reps: np.ndarray
    docids: list[str]


def _docid(value, path) -> str:
    """One lookup entry as a canonical docid: a str, an integer, or UTF-8 bytes; checked with
    :func:`~hopscotch.retriever.io.validate.check_id` (no empty ids, control or line-break characters)."""
    if isinstance(value, (tuple, list)):
        raise FormatError(path, None, "a lookup of docids (chunked lookups of (docid, chunk) pairs are not "
                                      "supported)", repr(value)[:80])
    if isinstance(value, (bytes, np.bytes_)):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FormatError(path, None, "docids in the lookup as UTF-8 bytes",
                              f"{bytes(value)[:40]!r} ({exc.reason} at byte {exc.start})") from None
    if isinstance(value, (str, np.str_)):
        return canonical_docid(check_id(str(value), path, None, "a docid in the lookup"))
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return str(int(value))
    raise FormatError(path, None, "docids (strings or integers) in the lookup", type(value).__name__)


def read_tevatron_pickle(path: str | os.PathLike) -> TevatronReps:
    """Read one Tevatron encode pickle safely (see the module docstring); raises :class:`FormatError`
    for a refused reference, an unreadable file or a layout other than ``(reps [n, d], n docids)``."""
    p = Path(path)
    if not p.is_file():
        raise FormatError(p, None, "an existing Tevatron pickle file", "no such file")
    expected = "a Tevatron encode pickle (reps, lookup)"
    try:
        with open(p, "rb") as fh:
            obj = _RestrictedUnpickler(fh).load()
    except RefusedPickle as exc:
        raise FormatError(p, None, f"{expected} holding only numpy arrays, lists and strings",
                          f"a reference to {exc}, refused unexecuted: pickles can run code") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError,
            KeyError, MemoryError, RecursionError, UnicodeDecodeError) as exc:
        raise FormatError(p, None, expected, f"unreadable pickle: {type(exc).__name__}: {exc}") from None
    if not isinstance(obj, (tuple, list)) or len(obj) != 2:
        raise FormatError(p, None, expected, f"a {type(obj).__name__}" + (f" of {len(obj)} items"
                                                                         if isinstance(obj, (tuple, list)) else ""))
    reps, lookup = obj
    if not isinstance(lookup, (list, tuple, np.ndarray)):
        raise FormatError(p, None, "a lookup list of docids", type(lookup).__name__)
    try:
        arr = np.asarray(reps)
    except ValueError as exc:
        raise FormatError(p, None, "reps as a [n, d] numeric array", str(exc)) from None
    if arr.ndim != 2 or arr.dtype.kind not in "fiu" or arr.shape[1] == 0:
        raise FormatError(p, None, "reps as a [n, d] numeric array", f"shape {arr.shape}, dtype {arr.dtype}")
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    docids = [_docid(x, p) for x in (lookup.tolist() if isinstance(lookup, np.ndarray) else lookup)]
    if len(docids) != arr.shape[0]:
        raise FormatError(p, None, "one docid per row of reps", f"{len(docids)} docids for {arr.shape[0]} rows")
    if not np.isfinite(arr).all():
        raise FormatError(p, None, "finite embeddings", "NaN or infinite values in reps")
    return TevatronReps(arr, docids)


def _natural_key(path: str) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path)]


def tevatron_pickle_paths(pattern: str) -> list[Path]:
    """The files a glob pattern (``'corpus.*.pkl'``) or a single file names, in natural order (``2`` before
    ``10``), so the rows of an import keep the shards' order."""
    pattern = os.path.expanduser(str(pattern))
    matches = [m for m in glob.glob(pattern) if Path(m).is_file()]
    if not matches and Path(pattern).is_file():
        matches = [pattern]
    if not matches:
        raise UsageError(f"--import-tevatron {pattern!r}: no file matches (quote the glob, e.g. 'corpus.*.pkl')")
    return [Path(m) for m in sorted(matches, key=_natural_key)]


def write_tevatron_pickle(path: str | os.PathLike, reps: np.ndarray, docids: Sequence[str]) -> None:
    """Write ``(float32 reps [n, d], [docid, ...])`` the way Tevatron's encode does, atomically."""
    arr = np.ascontiguousarray(reps, dtype=np.float32)
    ids = [str(d) for d in docids]
    if arr.ndim != 2 or arr.shape[0] != len(ids):
        raise ValueError(f"reps of shape {arr.shape} do not match {len(ids)} docids")
    with atomic_write(path, "wb", encoding=None) as fh:
        pickle.dump((arr, ids), fh, protocol=PICKLE_PROTOCOL)


def tevatron_export_path(prefix: str | os.PathLike, shard: int) -> Path:
    """``PREFIX.<shard>.pkl``: one pickle per index shard, matched by the glob ``'PREFIX.*.pkl'``."""
    return Path(f"{prefix}.{shard}.pkl")


# --- training JSONL, newer format ---------------------------------------------------------------------

_MEDIA_KEYS = ("query_image", "query_video", "query_audio")
_NEWER_KEYS = ("query_text", "positive_document_ids", "negative_document_ids") + _MEDIA_KEYS


def is_newer_format(obj: dict) -> bool:
    """Whether a training row names its documents by id (Tevatron's newer format)."""
    return "positive_document_ids" in obj and "positive_passages" not in obj


class TevatronIdResolver:
    """Expands newer-format rows into self-contained tuple rows, reading ``corpus`` once, on first need.

    ``corpus``: any corpus :func:`~hopscotch.retriever.io.corpus.load_corpus_dict` reads (JSONL,
    parquet, BEIR folder), or None: then a newer-format row raises :class:`UsageError` asking for one.
    """

    def __init__(self, corpus: str | os.PathLike | None = None):
        self.corpus = corpus
        self._docs: dict | None = None

    def documents(self, path, lineno) -> dict:
        if self._docs is None:
            if self.corpus is None:
                raise UsageError(f"{path}:{lineno}: a Tevatron training row that names its documents by id "
                                 "(positive_document_ids) needs the corpus they come from (recipe key "
                                 "data.corpus)")
            if not Path(self.corpus).exists():
                raise UsageError(f"data.corpus: {self.corpus}: no such file or folder")

            self._docs = load_corpus_dict(self.corpus)
        return self._docs

    def _passages(self, obj: dict, key: str, path, lineno) -> list[dict]:
        ids = obj.get(key) or []
        if not isinstance(ids, (list, tuple)):
            raise FormatError(path, lineno, f"'{key}' as a list of docids", type(ids).__name__)
        docs = self.documents(path, lineno)
        out = []
        for raw in ids:
            if not isinstance(raw, (str, int)) or isinstance(raw, bool):
                raise FormatError(path, lineno, f"docids (strings) in '{key}'", repr(raw)[:80])
            doc = docs.get(canonical_docid(check_id(raw, path, lineno, f"a docid in '{key}'")))
            if doc is None:
                raise FormatError(path, lineno, f"'{key}' ids found in the corpus {self.corpus}",
                                  f"unknown docid {raw!r}")
            out.append({"docid": doc.docid, "title": doc.title, "text": doc.text})
        return out

    def expand(self, obj: dict, path, lineno) -> dict:
        """``obj`` itself unless it is a newer-format row; else the same tuple in the older layout."""
        if not is_newer_format(obj):
            return obj
        text = obj.get("query_text")
        if not isinstance(text, str) or not text.strip():
            media = [k for k in _MEDIA_KEYS if obj.get(k) is not None]
            got = f"only {', '.join(media)} (image/video/audio queries are not supported)" if media else \
                f"keys {sorted(obj)[:8]}"
            raise FormatError(path, lineno, "a non-empty string 'query_text'", got)
        row = {k: v for k, v in obj.items() if k not in _NEWER_KEYS}
        row["query"] = text
        row["positive_passages"] = self._passages(obj, "positive_document_ids", path, lineno)
        row["negative_passages"] = self._passages(obj, "negative_document_ids", path, lineno)
        return row
