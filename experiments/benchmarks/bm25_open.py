"""What the checks on open of a disk BM25 folder (:mod:`hopscotch.retriever.index.bm25.checks`) cost at scale, on
synthetic folders of the real layout (written here array by array: building a million-document index takes the
real build minutes; the checks only read the arrays).

A folder of ``docs`` documents, ``terms`` terms and ``postings`` postings: term ``t`` (strings ``t0``, ``t1``, ...,
ordered by hash as a build orders them) holds a Zipf-like share of the postings, its rows evenly spread and
ascending, its impacts random; block maxima, term maxima, docids ``d0``, ``d1``, ... and their lookup are computed
as a build computes them, so the folder passes every check. :func:`time_open` times ``load_bm25_index`` (the
manifest, the checks and the docid table), the page cache warm, and the checks alone with the postings read whole
(as an index of up to ``FULL_POSTINGS`` postings is checked).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from hopscotch.retriever.index.bm25 import checks, load_bm25_index, read_meta
from hopscotch.retriever.index.bm25.analyzer import Analyzer, term_keys
from hopscotch.retriever.index.bm25.manifest import LAYOUT, META_FILE
from hopscotch.retriever.io.docids import docid_hash


def write_synthetic_disk_folder(out: Path, docs: int, terms: int, postings: int, block: int = 64,
                                seed: int = 0) -> dict:
    """Write the folder (module doc); returns its manifest."""
    from hopscotch.retriever.index.bm25.kernel import block_maxima

    rng = np.random.default_rng(seed)
    out.mkdir(parents=True, exist_ok=True)
    weights = 1.0 / np.arange(1, terms + 1) ** 0.9
    df = np.minimum(np.maximum(1, np.round(weights / weights.sum() * postings)).astype(np.int64), docs)
    df = df[rng.permutation(terms)]  # term ids are hash order, unrelated to frequency
    indptr = np.zeros(terms + 1, np.int64)
    np.cumsum(df, out=indptr[1:])
    total = int(indptr[-1])
    first = np.repeat(indptr[:-1], df)
    within = np.arange(total, dtype=np.int64) - first
    stride = np.repeat(docs // df, df)
    rows = (np.repeat(rng.integers(0, np.maximum(docs - (df - 1) * (docs // df), 1)), df) + within * stride)
    impacts = rng.random(total, dtype=np.float32) * 8
    bptr, bmax = block_maxima(indptr, impacts, block)
    live = df > 0
    tmax = np.zeros(terms, np.float32)
    tmax[live] = np.maximum.reduceat(impacts, indptr[:-1][live])
    strings = [f"t{i}" for i in range(terms)]
    hashes, _ = term_keys(strings)
    order = np.argsort(hashes)
    strings = [strings[i] for i in order.tolist()]
    for name, value in (("terms.hashes", hashes[order]), ("terms.max", tmax), ("postings.indptr", indptr),
                        ("postings.rows", rows.astype(np.uint32)), ("postings.impacts", impacts),
                        ("blocks.ptr", bptr), ("blocks.max", bmax), ("doclens", np.full(docs, 50, np.uint32))):
        np.save(out / f"{name}.npy", value)
    text = "".join(s + "\n" for s in strings).encode()
    (out / "terms.txt").write_bytes(text)
    ends = np.cumsum([len(s) + 1 for s in strings])
    np.concatenate([[0], ends]).astype("<u8").tofile(out / "terms.offsets")
    ids = [f"d{i}" for i in range(docs)]
    (out / "docids.txt").write_text("".join(d + "\n" for d in ids))
    np.concatenate([[0], np.cumsum([len(d) + 1 for d in ids])]).astype("<u8").tofile(out / "docids.offsets")
    doc_hashes = np.fromiter((docid_hash(d) for d in ids), dtype="<u8", count=docs)
    doc_hashes.tofile(out / "docids.hashes")
    lookup = np.argsort(doc_hashes, kind="stable")
    np.save(out / "lookup_hashes.npy", doc_hashes[lookup])
    np.save(out / "lookup_rows.npy", lookup.astype(np.int64))
    meta = {"backend": "disk", "layout": LAYOUT, "k1": 1.5, "b": 0.75, "stemmer": "english", "stopwords": "en",
            "num_docs": docs, "num_terms": terms, "num_postings": total, "avgdl": 50.0, "block": block,
            "analyzer": Analyzer("english", "en").describe()}
    (out / META_FILE).write_text(json.dumps(meta))
    return meta


def time_open(folder: Path, repeats: int = 3) -> dict:
    """Median seconds of ``load_bm25_index(folder)`` (sampled postings, as on open), and of the checks with the
    postings read whole; the page cache warmed by a first open."""
    load_bm25_index(folder)

    def median(fn) -> float:
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return float(np.median(times))

    meta = read_meta(folder)
    opened = median(lambda: load_bm25_index(folder))
    full, checks.FULL_POSTINGS = checks.FULL_POSTINGS, 1 << 62
    try:
        whole = median(lambda: checks.check_disk_folder(folder, meta))
    finally:
        checks.FULL_POSTINGS = full
    return {"docs": meta["num_docs"], "terms": meta["num_terms"], "postings": meta["num_postings"],
            "open_s": opened, "whole_postings_s": whole}
