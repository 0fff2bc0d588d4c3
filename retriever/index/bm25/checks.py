"""The checks a BM25 index folder passes on open, for both backends (the manifest first: :mod:`.manifest`), so that a
damaged, truncated or hand-edited folder fails with one line naming the file, never later with a traceback, an
empty result or a crash inside the numba kernel (:mod:`.kernel`).

Disk (:func:`check_disk_folder`; the files of :mod:`.disk` and :mod:`.docids`):

* every array: a regular file, NumPy, 1-D, of its dtype and length (terms ``T``, postings ``P`` and documents ``N`` of
  the manifest);
* read whole, ``O(T)``: the postings pointers (0 to ``P``, never decreasing), the block pointers (exactly
  ``ceil(df / block)`` blocks a term: every block the kernel reads is the term's own), the term hashes (strictly
  increasing: the lookup bisects them), the term offsets (0 to the size of ``terms.txt``, each term ending in a line
  break);
* sampled: :data:`TERM_SAMPLE` evenly spaced terms' strings hash to their entries (a vocabulary of another build
  fails); the postings whole up to :data:`FULL_POSTINGS` (rows ascending within each term and below ``N``, impacts
  finite and non-negative, block maxima exact), else those of :data:`POSTING_TERMS` evenly spaced terms; the
  floats and the docid table's offsets and lookup on blocks beyond
  :data:`~hopscotch.retriever.index.array_checks.FULL_CHECK` elements.

What is sampled is guarded where it is used: the kernel stops on a row that does not ascend (:mod:`.kernel`) and a
row at or past ``N`` is refused before its docid is read. bm25s (:func:`check_bm25s_folder`): ``params.index.json``
(bm25s's parameters, ``num_docs``), ``vocab.index.json`` (distinct token ids ``0..V-1``), the score matrix (CSC
pointers over ``V`` tokens, data and row indices of the recorded dtypes, rows below ``N``), read whole: bm25s holds it
in RAM anyway. Cost on open: docs/benchmarks.md, "BM25 index checks on open".
"""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np

from hopscotch.retriever.index.array_checks import (
    blocks,
    check_file,
    check_finite,
    check_pointers,
    check_range,
    damaged,
    finite_number,
    load_json,
    load_vector,
    whole_number,
)
from hopscotch.retriever.index.bm25.analyzer import term_hashes
from hopscotch.retriever.index.bm25.docids import DOCIDS_FILE, HASHES_FILE, LOOKUP_HASHES, LOOKUP_ROWS, OFFSETS_FILE
from hopscotch.retriever.index.bm25.manifest import META_FILE, REBUILD, TERMS_OFFSETS, TERMS_TEXT

TERM_SAMPLE = 1024          # terms whose strings are hashed against terms.hashes.npy on open
FULL_POSTINGS = 20_000_000  # postings checked whole on open up to this many
POSTING_TERMS = 512         # else: the postings of this many evenly spaced terms
_CHUNK = 1 << 22


def _bad(path: Path, what: str):
    return damaged(path, what, REBUILD)


def check_disk_folder(folder: Path, meta: dict) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The disk folder's arrays (memory-mapped) and term offsets, checked (module doc)."""
    terms, postings, docs, block = meta["num_terms"], meta["num_postings"], meta["num_docs"], meta["block"]
    spec = {"terms.hashes": (np.uint64, terms, " (one hash a term)"), "terms.max": (np.float32, terms, " (a term)"),
            "postings.indptr": (np.int64, terms + 1, " (the terms + 1)"),
            "postings.rows": (np.uint32, postings, " (one a posting)"),
            "postings.impacts": (np.float32, postings, " (one a posting)"),
            "blocks.ptr": (np.int64, terms + 1, " (the terms + 1)"), "blocks.max": (np.float32, None, ""),
            "doclens": (np.uint32, docs, " (one a document)")}
    path = {name: folder / f"{name}.npy" for name in spec}
    a = {name: load_vector(path[name], dtype, n, REBUILD, f"{what}, as {META_FILE} says" if n is not None else "")
         for name, (dtype, n, what) in spec.items()}
    check_pointers(path["postings.indptr"], a["postings.indptr"], postings, "postings pointers", REBUILD)
    _check_block_pointers(path["blocks.ptr"], a["blocks.ptr"], a["postings.indptr"], block)
    if len(a["blocks.max"]) != int(a["blocks.ptr"][-1]):
        raise _bad(path["blocks.max"], f"expected {int(a['blocks.ptr'][-1]):,} block maxima (blocks.ptr.npy's "
                                       f"last entry), got {len(a['blocks.max']):,}")
    _check_increasing(path["terms.hashes"], a["terms.hashes"])
    check_finite(path["terms.max"], a["terms.max"], "term maxima", REBUILD, non_negative=True)
    check_finite(path["blocks.max"], a["blocks.max"], "block maxima", REBUILD, non_negative=True)
    check_range(path["doclens"], a["doclens"], 1, 1 << 32, "document lengths", REBUILD)
    offsets = _check_terms(folder / TERMS_TEXT, folder / TERMS_OFFSETS, a["terms.hashes"])
    _check_postings(path, a, docs, block)
    check_docid_files(folder, docs)
    return a, offsets


def _check_block_pointers(path: Path, bptr: np.ndarray, indptr: np.ndarray, block: int) -> None:
    """``bptr[t + 1] - bptr[t] == ceil(df_t / block)`` for every term, from 0."""
    if int(bptr[0]) != 0:
        raise _bad(path, f"block pointers must start at 0, got {int(bptr[0]):,}")
    for start in range(0, len(bptr) - 1, _CHUNK):
        df = np.diff(np.asarray(indptr[start:start + _CHUNK + 1]))
        got = np.diff(np.asarray(bptr[start:start + _CHUNK + 1]))
        wrong = got != (df + block - 1) // block
        if wrong.any():
            t = start + int(np.argmax(wrong))
            raise _bad(path, f"term {t:,} has {int(got[t - start]):,} blocks for {int(df[t - start]):,} postings in "
                             f"blocks of {block} (expected {int((df[t - start] + block - 1) // block):,})")


def _check_increasing(path: Path, a: np.ndarray) -> None:
    for start in range(0, max(len(a) - 1, 0), _CHUNK):
        piece = np.asarray(a[start:start + _CHUNK + 1])
        wrong = piece[1:] <= piece[:-1]
        if wrong.any():
            raise _bad(path, f"term hashes must be sorted and distinct (entry {start + int(np.argmax(wrong)) + 1:,})")


def _check_terms(text_path: Path, offsets_path: Path, hashes: np.ndarray) -> np.ndarray:
    """``terms.offsets`` (``T + 1`` little-endian uint64 offsets into ``terms.txt``, each term a non-empty line) and a
    sample of the terms' strings against their hashes; returns the offsets."""
    check_file(text_path, REBUILD)
    check_file(offsets_path, REBUILD)
    n = len(hashes)
    size = offsets_path.stat().st_size
    if size != (n + 1) * 8:
        raise _bad(offsets_path, f"expected {n + 1:,} uint64 offsets (the terms + 1: {(n + 1) * 8:,} bytes), got "
                                 f"{size:,} bytes")
    offsets = np.memmap(offsets_path, dtype="<u8", mode="r")
    text_size = text_path.stat().st_size
    check_pointers(offsets_path, offsets, text_size, f"term offsets into {text_path.name}", REBUILD)
    if not n:
        return offsets
    text = np.memmap(text_path, dtype=np.uint8, mode="r")
    for start in range(0, n, _CHUNK):
        stop = min(start + _CHUNK, n)
        firsts, ends = (np.asarray(offsets[start:stop + 1]).astype(np.int64)[i] for i in (slice(0, -1), slice(1, None)))
        if (ends - firsts < 2).any() or (text[ends - 1] != 10).any():
            raise _bad(text_path, f"its terms do not end where {offsets_path.name} says (near term "
                                  f"{start:,}): truncated, or of another build")
    ids = np.unique(np.linspace(0, n - 1, min(n, TERM_SAMPLE)).astype(np.int64))
    words = []
    for i in ids.tolist():
        raw = bytes(text[int(offsets[i]):int(offsets[i + 1]) - 1])
        try:
            words.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise _bad(text_path, f"term {i:,} is not UTF-8 ({raw[:40]!r})") from None
    wrong = np.flatnonzero(term_hashes(words) != np.asarray(hashes[ids]))
    if len(wrong):
        i = int(ids[wrong[0]])
        raise _bad(text_path, f"term {i:,} ({words[wrong[0]][:40]!r}) does not hash to its entry of terms.hashes.npy: "
                              "the vocabulary is of another build or damaged")
    return offsets


def _check_postings(path: dict[str, Path], a: dict[str, np.ndarray], docs: int, block: int) -> None:
    """The postings of every term (up to :data:`FULL_POSTINGS`), else of :data:`POSTING_TERMS` evenly spaced ones."""
    indptr = a["postings.indptr"]
    total, terms = int(indptr[-1]), len(indptr) - 1
    if total <= FULL_POSTINGS:
        spans = [(0, terms)]
    else:
        picked = np.unique(np.linspace(0, terms - 1, min(terms, POSTING_TERMS)).astype(np.int64))
        spans = [(t, t + 1) for t in picked.tolist()]
    for lo, hi in spans:
        _check_terms_postings(path, a, lo, hi, docs, block)


def _check_terms_postings(path: dict[str, Path], a: dict[str, np.ndarray], lo: int, hi: int, docs: int,
                          block: int) -> None:
    """Terms ``[lo, hi)``: rows ascending within each term and below ``docs``, impacts finite and >= 0, block maxima
    and term maxima exact (read whole: the caller bounds the span)."""
    ptr = np.asarray(a["postings.indptr"][lo:hi + 1])
    first, last = int(ptr[0]), int(ptr[-1])
    if last == first:
        return
    rows = np.asarray(a["postings.rows"][first:last])
    if int(rows.max()) >= docs:
        raise _bad(path["postings.rows"], f"rows out of range: up to {int(rows.max()):,}, expected below {docs:,} "
                                          "(the documents)")
    step_down = rows[1:] <= rows[:-1]
    inner = ptr[1:-1]
    step_down[inner[(inner > first) & (inner < last)] - first - 1] = False  # where a term starts, rows start again
    if step_down.any():
        p = first + int(np.argmax(step_down)) + 1
        raise _bad(path["postings.rows"], f"rows must ascend within each term (posting {p:,})")
    impacts = np.asarray(a["postings.impacts"][first:last])
    check_finite(path["postings.impacts"], impacts, "impacts", REBUILD, non_negative=True)
    if (impacts == 0).any():  # BM25 gives every posting a positive score (idf > 0, tf >= 1)
        raise _bad(path["postings.impacts"], f"impacts must be positive (posting {first + int(np.argmax(impacts == 0)):,} "
                                             "is 0)")
    df = np.diff(ptr)
    live = np.flatnonzero(df)
    nblocks = (df + block - 1) // block
    starts = np.repeat(ptr[:-1] - first, nblocks) + (np.arange(int(nblocks.sum())) -
                                                     np.repeat(np.cumsum(nblocks) - nblocks, nblocks)) * block
    bptr = np.asarray(a["blocks.ptr"][lo:hi + 1])
    if not np.array_equal(np.maximum.reduceat(impacts, starts), np.asarray(a["blocks.max"][bptr[0]:bptr[-1]])):
        raise _bad(path["blocks.max"], f"block maxima differ from the postings' impacts (terms {lo:,}..{hi - 1:,})")
    if not np.array_equal(np.maximum.reduceat(impacts, ptr[live] - first), np.asarray(a["terms.max"][lo:hi])[live]):
        raise _bad(path["terms.max"], f"term maxima differ from the postings' impacts (terms {lo:,}..{hi - 1:,})")


def check_docid_files(folder: Path, docs: int) -> None:
    """The docid table's files beside a disk index (:mod:`.docids`): sizes, the offsets' ends and a sample of their
    order, the sorted lookup's dtypes, lengths and (sampled) order and rows."""
    for name, size in ((OFFSETS_FILE, (docs + 1) * 8), (HASHES_FILE, docs * 8), (DOCIDS_FILE, None)):
        check_file(folder / name, REBUILD)
        if size is not None and (folder / name).stat().st_size != size:
            raise _bad(folder / name, f"expected {size:,} bytes ({docs:,} documents), got "
                                      f"{(folder / name).stat().st_size:,}: truncated, or of another build")
    offsets = np.memmap(folder / OFFSETS_FILE, dtype="<u8", mode="r")
    if int(offsets[0]) != 0 or int(offsets[-1]) != (folder / DOCIDS_FILE).stat().st_size:
        raise _bad(folder / OFFSETS_FILE, f"offsets must run from 0 to the size of {DOCIDS_FILE}: truncated, or of "
                                          "another build")
    for piece in blocks(offsets):
        if (piece[1:] <= piece[:-1]).any():
            raise _bad(folder / OFFSETS_FILE, "offsets must rise (one docid a line)")
    hashes = load_vector(folder / LOOKUP_HASHES, np.uint64, docs, REBUILD, " (one a document)")
    rows = load_vector(folder / LOOKUP_ROWS, np.int64, docs, REBUILD, " (one a document)")
    for piece in blocks(hashes):
        if (piece[1:] < piece[:-1]).any():
            raise _bad(folder / LOOKUP_HASHES, "the docid hashes must be sorted")
    check_range(folder / LOOKUP_ROWS, rows, 0, docs, "rows", REBUILD)


# -- bm25s ------------------------------------------------------------------------------------------------------------

BM25S_FILES = {"params": "params.index.json", "vocab": "vocab.index.json", "data": "data.csc.index.npy",
               "indices": "indices.csc.index.npy", "indptr": "indptr.csc.index.npy",
               "nonoccurrence": "nonoccurrence_array.index.npy"}
BM25S_METHODS = ("robertson", "lucene", "atire", "bm25l", "bm25+")


def check_bm25s_folder(folder: Path, meta: dict) -> dict:
    """A bm25s folder's files, checked (module doc) before bm25s reads them; returns its parameters."""
    import bm25s

    docs = meta["num_docs"]
    path = {key: folder / name for key, name in BM25S_FILES.items()}
    params = load_json(path["params"], REBUILD)
    known = set(inspect.signature(bm25s.BM25.__init__).parameters) - {"self"} | {"version", "num_docs"}
    if not isinstance(params, dict) or set(params) - known:
        raise _bad(path["params"], "expected bm25s's parameters (" + ", ".join(sorted(known)) + ")"
                   + (f", got {', '.join(sorted(set(params) - known))}" if isinstance(params, dict) else ""))
    if params.get("num_docs") != docs:
        raise _bad(path["params"], f"'num_docs' is {params.get('num_docs')!r}, the manifest says {docs:,}")
    numbers = [k for k in ("k1", "b", "delta") if k in params and not finite_number(params[k])]
    if numbers:
        raise _bad(path["params"], f"'{numbers[0]}' must be a finite number, got {params[numbers[0]]!r}")
    method = params.get("method", "lucene")
    if method not in BM25S_METHODS:
        raise _bad(path["params"], f"'method' must be one of {', '.join(BM25S_METHODS)}, got {method!r}")
    dtypes = {}
    for key, default in (("dtype", "float32"), ("int_dtype", "int32")):
        try:
            dtypes[key] = np.dtype(params.get(key, default))
        except TypeError:
            raise _bad(path["params"], f"'{key}' is not a NumPy dtype: {params.get(key)!r}") from None
    vocab = load_json(path["vocab"], REBUILD)
    if not isinstance(vocab, dict) or not all(isinstance(k, str) and whole_number(v) for k, v in vocab.items()):
        raise _bad(path["vocab"], "expected bm25s's vocabulary: an object of token -> id (a whole number)")
    ids = np.fromiter(vocab.values(), dtype=np.int64, count=len(vocab))
    if len(ids) and (int(ids.max()) >= len(ids) or len(np.unique(ids)) != len(ids)):
        raise _bad(path["vocab"], f"token ids must be distinct and run 0..{len(ids) - 1:,}")
    indptr = load_vector(path["indptr"], np.int64, len(vocab) + 1, REBUILD, " (the tokens + 1)")
    data = load_vector(path["data"], dtypes["dtype"], None, REBUILD, f" (the recorded dtype {dtypes['dtype']})")
    indices = load_vector(path["indices"], dtypes["int_dtype"], len(data), REBUILD,
                          f" (the recorded int_dtype {dtypes['int_dtype']}, one a score)")
    check_pointers(path["indptr"], indptr, len(data), "score pointers", REBUILD)
    check_finite(path["data"], data, "scores", REBUILD, full=None)  # whole: bm25s holds them in RAM anyway
    check_range(path["indices"], indices, 0, docs, "document rows", REBUILD, full=None)
    if method in ("bm25l", "bm25+"):
        check_finite(path["nonoccurrence"], load_vector(path["nonoccurrence"], dtypes["dtype"], len(vocab), REBUILD),
                     "non-occurrence scores", REBUILD)
    return params
