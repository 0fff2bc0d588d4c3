"""A BM25 index folder's manifest, ``hopscotch_bm25.json``: which backend the folder holds and how it was built,
read and checked in one place (:func:`read_meta`) before any other file of the folder is opened.

Schema (layout :data:`LAYOUT`; a manifest without ``layout`` is read as layout 1, the layout of every folder written
before the key was)::

    backend      "bm25s" | "disk" (absent: "bm25s", the folders from before the disk backend)
    layout       1
    k1, b        finite numbers, k1 >= 0, 0 <= b <= 1
    stemmer      a PyStemmer language, or null; stopwords: a bm25s stopword list, or null
    num_docs     a whole number >= 1
    fingerprint  the build's inputs and flags (optional)
    disk only:   num_terms, num_postings (whole numbers >= 0), avgdl (a positive number), block (a whole number
                 >= 1), analyzer (optional: {"stopword_list": [...]}, the stopwords as the build recorded them)

A manifest that breaks it is a one-line :class:`~hopscotch.retriever.errors.UsageError` naming the file and the key.
"""

from __future__ import annotations

import os
from pathlib import Path

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.index.array_checks import damaged, finite_number, load_json, whole_number
from hopscotch.retriever.index.bm25.analyzer import check_analyzer_names

META_FILE = "hopscotch_bm25.json"
BACKENDS = ("bm25s", "disk")
LAYOUT = 1
REBUILD = "rebuild the index with 'hopscotch bm25-index --overwrite'"

_COMMON = (("k1", lambda v: finite_number(v) and v >= 0, "a finite number >= 0"),
           ("b", lambda v: finite_number(v) and 0 <= v <= 1, "a number in [0, 1]"),
           ("stemmer", lambda v: v is None or (isinstance(v, str) and v != ""), "a PyStemmer language or null"),
           ("stopwords", lambda v: v is None or (isinstance(v, str) and v != ""), "a bm25s stopword list or null"),
           ("num_docs", lambda v: whole_number(v, 1), "a whole number >= 1"))
_DISK = (("num_terms", lambda v: whole_number(v, 0), "a whole number >= 0"),
         ("num_postings", lambda v: whole_number(v, 0), "a whole number >= 0"),
         ("avgdl", lambda v: finite_number(v) and v > 0, "a positive number"),
         ("block", lambda v: whole_number(v, 1), "postings a block, a whole number >= 1"))


def read_meta(folder: str | os.PathLike) -> dict:
    """A BM25 folder's ``hopscotch_bm25.json``, checked against the schema (module doc; ``backend`` filled in), or
    a one-line UsageError."""
    folder = Path(folder)
    path = folder / META_FILE
    if not folder.is_dir():
        raise UsageError(f"{folder}: not a folder; give a BM25 index folder (built by 'hopscotch bm25-index')")
    if not path.exists():
        raise UsageError(f"{folder}: not a Hopscotch BM25 index (no {META_FILE}); build one with "
                         "'hopscotch bm25-index'")
    meta = load_json(path, REBUILD)
    backend = meta.get("backend", "bm25s") if isinstance(meta, dict) else None
    if backend in BACKENDS:
        other = "disk" if backend == "bm25s" else "bm25s"
        if not (folder / BACKEND_FILES[backend]).exists() and (folder / BACKEND_FILES[other]).exists():
            raise damaged(path, f"names the {backend} backend, but the folder holds a {other} index "
                                f"({BACKEND_FILES[other]}, no {BACKEND_FILES[backend]})", REBUILD)
    check_meta(path, meta)
    return meta


#: the disk backend's vocabulary: the terms, one a line, and their byte offsets (:mod:`.disk`)
TERMS_TEXT, TERMS_OFFSETS = "terms.txt", "terms.offsets"
#: a file only each backend's folder has
BACKEND_FILES = {"bm25s": "params.index.json", "disk": "postings.indptr.npy"}


def check_meta(path: Path, meta) -> None:
    """The schema of the module doc (``meta["backend"]`` set when absent)."""
    if not isinstance(meta, dict):
        raise damaged(path, f"expected a JSON object, got {type(meta).__name__}", REBUILD)
    backend = meta.setdefault("backend", "bm25s")
    if backend not in BACKENDS:
        raise damaged(path, f"'backend' must be one of {', '.join(BACKENDS)}, got {backend!r}", REBUILD)
    layout = meta.get("layout", LAYOUT)
    if not whole_number(layout, 1):
        raise damaged(path, f"'layout' must be a whole number >= 1, got {layout!r}", REBUILD)
    if layout > LAYOUT:
        raise UsageError(f"{path}: layout {layout} was written by a newer Hopscotch (this one reads layout "
                         f"{LAYOUT}): upgrade Hopscotch, or rebuild the index with 'hopscotch bm25-index --overwrite'")
    for key, valid, expected in _COMMON + (_DISK if backend == "disk" else ()):
        if key not in meta:
            raise damaged(path, f"no {key!r} ({expected}) for the {backend} backend: a folder of an older layout or "
                                "of another tool", REBUILD)
        if not valid(meta[key]):
            raise damaged(path, f"{key!r} must be {expected}, got {meta[key]!r}", REBUILD)
    if meta.get("fingerprint") is not None and not isinstance(meta["fingerprint"], str):
        raise damaged(path, f"'fingerprint' must be a string, got {meta['fingerprint']!r}", REBUILD)
    analyzer = meta.get("analyzer")
    if analyzer is not None:
        words = analyzer.get("stopword_list") if isinstance(analyzer, dict) else ()
        if not isinstance(analyzer, dict) or not (words is None or (isinstance(words, list) and
                                                                    all(isinstance(w, str) for w in words))):
            raise damaged(path, "'analyzer' must be an object whose 'stopword_list' is a list of words or null",
                          REBUILD)

    for key in ("stemmer", "stopwords"):
        if isinstance(meta[key], str) and meta[key].lower() == "none":  # the flags' spelling, not the manifest's
            raise damaged(path, f"'{key}': null means none here, not {meta[key]!r}", REBUILD)
    recorded = isinstance(analyzer, dict) and analyzer.get("stopword_list") is not None
    try:  # a recorded stopword list is the one used (and checking the name would import bm25s: about a second)
        check_analyzer_names(meta["stemmer"], None if recorded else meta["stopwords"])
    except ValueError as exc:  # the flags' message, in the manifest's terms
        raise damaged(path, str(exc).replace("or 'none'", "or null"), REBUILD) from None
