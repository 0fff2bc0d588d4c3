"""Building a disk BM25 folder (:mod:`.disk`) from a corpus stream: bounded memory, resumable at every step.

Work happens in ``.NAME.partial`` beside the output; its ``build.json`` holds the build's fingerprint (flags and
corpus), and a work folder with another fingerprint is started afresh.

1. **Runs.** The corpus is read once, in order, ``batch_docs`` documents at a time: analyzed
   (:class:`~.analyzer.Analyzer`; in ``workers`` processes when asked), inverted in RAM into one *run* (the
   batch's terms by hash, each with its rows and term frequencies; the documents' lengths), its docids appended to
   the docid files (:class:`~.docids.DocidAppender`), its files written, and ``run_XXXXX.done.json`` last. A
   rerun keeps the finished runs, cuts the docid files back to them and reads on after their last document.
   A docid repeated inside a batch is refused before the batch is analysed; once the runs are written the docid
   lookup is sorted (:func:`~.docids.finish_lookup`), refusing a docid met twice anywhere, before any merge. Either
   refusal names the file and line of both, and a refused build removes its work folder.
2. **Merge.** When the corpus is done, ``N`` and the mean length are known, and the runs are merged range of term
   hashes by range (each range about ``merge_postings`` postings; a term is never split): its postings gathered from
   every run (the runs are in row order, so a stable sort by hash keeps each term's rows ascending), their impacts
   computed (bm25s's formula and float32 rounding), written into the final arrays; ``merge.json`` records each
   finished range, so a killed merge resumes at the next one.
3. **Finish.** Term tables, block maxima (:func:`~.kernel.block_maxima`), ``hopscotch_bm25.json``; the runs are
   deleted and the work folder renamed onto the output (the old one moved aside first), so the output is always a
   whole index.

Memory: one batch (its text and about 50 bytes a term occurrence), then 32 bytes a document for the docid lookup's
sort, then one merge range (about 40 bytes a posting, and at least the postings of the most frequent term).
"""

from __future__ import annotations

import itertools
import json
import shutil
import time
from array import array
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from hopscotch.retriever.errors import HopscotchError, UsageError
from hopscotch.retriever.index.bm25.analyzer import Analyzer, term_keys
from hopscotch.retriever.index.bm25.disk_merge import (
    RUN_ARRAYS,
    RUNS_DIR,
    finish_tables,
    merge_runs,
    publish,
    release_memory,
    run_path,
)
from hopscotch.retriever.index.bm25.docids import DocidAppender, finish_lookup, repeated_docid
from hopscotch.retriever.index.bm25.manifest import LAYOUT
from hopscotch.retriever.index.layout import save_npy
from hopscotch.retriever.io.common import atomic_write, read_json, write_json
from hopscotch.retriever.io.corpus import Document
from hopscotch.retriever.io.progress import progress
from hopscotch.retriever.model.query_template import format_document

BUILD_FILE = "build.json"
PARTIAL_SUFFIX = ".partial"


@dataclass(frozen=True)
class DiskBuildOptions:
    """How a disk BM25 folder is built (the ``bm25-index`` flags)."""

    k1: float = 1.5
    b: float = 0.75
    stemmer: str | None = "english"
    stopwords: str | None = "en"
    batch_docs: int = 100_000          # documents a run (and a resume step)
    merge_postings: int = 20_000_000   # postings a merge range (about 40 bytes each while merged)
    block: int = 64                    # postings a block (block maxima)
    workers: int = 1                   # processes analyzing text (1: this one)
    show_progress: bool = True


def partial_folder(out: str | Path) -> Path:
    """The work folder of a build of ``out``: ``.NAME.partial`` beside it."""
    out = Path(out)
    return out.parent / f".{out.name}{PARTIAL_SUFFIX}"


# -- 1. runs ------------------------------------------------------------------------------------------

#: documents analyzed and counted together (bounds the memory of a batch's term occurrences)
CHUNK_DOCS = 10_000


def _analyze(pairs: list[tuple[str, str]], stemmer, stopwords) -> tuple[list[str], np.ndarray, np.ndarray,
                                                                            np.ndarray, np.ndarray]:
    """A chunk of ``(title, text)`` as postings: ``(its terms in first-seen order, each posting's term (index among
    them), its document (index in the chunk), its term frequency, each document's number of terms)``, postings
    sorted by term, then document."""
    analyzer = _ANALYZERS.get((stemmer, stopwords)) or _ANALYZERS.setdefault((stemmer, stopwords),
                                                                             Analyzer(stemmer, stopwords))
    word_id: dict[str, int] = {}  # word -> its term's index, -1 for a stopword
    term_id: dict[str, int] = {}
    terms: list[str] = []
    ids, lens = array("I"), array("I")
    for title, text in pairs:
        words = analyzer.words(format_document(title, text))
        found = list(map(word_id.get, words))
        if None in found:
            for w in {w for w, f in zip(words, found) if f is None}:
                term = analyzer.term_of(w)
                if not term:
                    word_id[w] = -1
                    continue
                if term not in term_id:
                    term_id[term] = len(terms)
                    terms.append(term)
                word_id[w] = term_id[term]
            found = list(map(word_id.__getitem__, words))
        doc = [i for i in found if i >= 0]
        ids.extend(doc)
        lens.append(len(doc))
    lens_arr = np.frombuffer(lens, dtype=np.uint32) if len(lens) else np.zeros(0, np.uint32)
    n = max(len(lens_arr), 1)
    doc_of = np.repeat(np.arange(len(lens_arr), dtype=np.int64), lens_arr.astype(np.int64))
    keys, tfs = np.unique(np.frombuffer(ids, dtype=np.uint32).astype(np.int64) * n + doc_of, return_counts=True)
    return terms, (keys // n).astype(np.uint32), (keys % n).astype(np.uint32), tfs.astype(np.uint32), lens_arr


_ANALYZERS: dict = {}


def _invert(chunks, first_row: int) -> dict:
    """One run's arrays from analyzed chunks (in corpus order): its terms by hash (``hashes``, ``checks``:
    :func:`~.analyzer.term_keys`; their postings ``tptr``), ``rows`` (ascending within a term), ``tfs`` (term
    frequencies), ``lens`` (document lengths), and the terms themselves in hash order (``strings``)."""
    vocab: dict[str, int] = {}
    terms_of, docs_of, tfs_of, lens = [], [], [], []
    offset = 0
    for terms, post_term, post_doc, tfs, doc_lens in chunks:
        remap = np.fromiter((vocab.setdefault(t, len(vocab)) for t in terms), dtype=np.int64, count=len(terms))
        terms_of.append(remap[post_term] if len(post_term) else np.zeros(0, np.int64))
        docs_of.append(post_doc.astype(np.int64) + offset)
        tfs_of.append(tfs)
        lens.append(doc_lens)
        offset += len(doc_lens)
    strings = list(vocab)
    hashes, checks = term_keys(strings)
    by_hash = np.argsort(hashes, kind="stable")
    if len(hashes) > 1 and np.any(hashes[by_hash][1:] == hashes[by_hash][:-1]):
        raise UsageError("two different terms of the corpus share a 64-bit hash; build with --backend bm25s")
    rank = np.empty(len(strings), dtype=np.int64)
    rank[by_hash] = np.arange(len(strings))
    n = max(offset, 1)
    keys = rank[np.concatenate(terms_of)] * n + np.concatenate(docs_of) if terms_of else np.zeros(0, np.int64)
    order = np.argsort(keys, kind="stable")
    keys = keys[order]
    tfs = np.concatenate(tfs_of)[order] if tfs_of else np.zeros(0, np.uint32)
    del order
    tptr = np.searchsorted(keys // n, np.arange(len(strings) + 1))
    ordered = [strings[i] for i in by_hash.tolist()]
    term_offsets = np.zeros(len(ordered) + 1, dtype=np.int64)
    np.cumsum([len(t.encode("utf-8")) + 1 for t in ordered], out=term_offsets[1:])
    lens = np.concatenate(lens) if lens else np.zeros(0, dtype=np.uint32)
    return {"hashes": hashes[by_hash], "checks": checks[by_hash], "tptr": tptr.astype(np.int64),
            "rows": (keys % n + first_row).astype(np.uint32),
            "tfs": tfs.astype(np.uint16 if len(tfs) == 0 or tfs.max() < 65536 else np.uint32),
            "lens": lens.astype(np.uint32), "term_offsets": term_offsets, "strings": ordered}


def _write_run(work: Path, run: int, first_row: int, arrays: dict) -> None:
    for name in RUN_ARRAYS:
        save_npy(run_path(work, run, f"{name}.npy"), arrays[name])
    with atomic_write(run_path(work, run, "terms.txt")) as fh:
        fh.writelines(t + "\n" for t in arrays["strings"])
    write_json(run_path(work, run, "done.json"), {"first_row": first_row, "rows": len(arrays["lens"]),
                                                   "postings": len(arrays["rows"])})


def _done_runs(work: Path) -> list[dict]:
    """The finished runs in order (each must start where the one before ended); files of an unfinished one go."""
    runs, row = [], 0
    while run_path(work, len(runs), "done.json").is_file():
        done = read_json(run_path(work, len(runs), "done.json"))
        if done.get("first_row") != row:
            break
        runs.append(done)
        row += done["rows"]
    for stale in (work / RUNS_DIR).glob("run_*"):
        if int(stale.name[4:9]) >= len(runs):
            stale.unlink()
    return runs


def _open_work(work: Path, fingerprint: str, options: DiskBuildOptions, log) -> None:
    state = work / BUILD_FILE
    settings = {"fingerprint": fingerprint, "k1": options.k1, "b": options.b, "stemmer": options.stemmer,
                "stopwords": options.stopwords, "block": options.block}
    if work.exists() and not work.is_dir():
        raise UsageError(f"{work}: a file where the build keeps its work folder (.NAME.partial): remove it, or build "
                         "into another --out")
    if work.is_dir():
        try:
            old = json.loads(state.read_text())
        except (OSError, ValueError):
            old = None
        if old != settings:
            log(f"bm25 (disk): {work} holds a build with other inputs or flags: starting again")
            shutil.rmtree(work)
    if not work.is_dir():
        (work / RUNS_DIR).mkdir(parents=True)
        state.write_text(json.dumps(settings, indent=2))


def _batches(docs: Iterable[Document], size: int):
    it = iter(docs)
    while batch := list(itertools.islice(it, size)):
        yield batch


def _check_batch_ids(batch: list[Document], first_row: int, corpus_name: str) -> None:
    """A docid repeated inside one batch, refused before the batch is analysed (across batches: the docid lookup,
    before the merge)."""
    seen: dict[str, int] = {}
    for i, doc in enumerate(batch):
        j = seen.setdefault(doc.docid, i)
        if j != i:
            raise repeated_docid(doc.docid, first_row + j, first_row + i, corpus_name)


def write_runs(docs: Iterable[Document], work: Path, options: DiskBuildOptions, log,
               on_commit: Callable[[int], None] | None = None, corpus_name: str = "") -> list[dict]:
    """Stage 1 (module doc): every run, the finished ones kept; the finished runs' records."""
    runs = _done_runs(work)
    rows = sum(r["rows"] for r in runs)
    appender = DocidAppender(work)
    appender.truncate(rows)
    if rows:
        log(f"bm25 (disk): resuming: {rows:,} documents already in {len(runs)} run(s)")
    pool = None
    if options.workers > 1:
        pool = ProcessPoolExecutor(options.workers)
    bar = progress(desc="bm25 (disk) runs", unit="doc", show=options.show_progress, initial=rows)
    try:
        for batch in _batches(itertools.islice(docs, rows, None), options.batch_docs):
            _check_batch_ids(batch, rows, corpus_name)
            pairs = [(d.title, d.text) for d in batch]
            step = min(CHUNK_DOCS, -(-len(pairs) // options.workers))
            jobs = [pairs[i:i + step] for i in range(0, len(pairs), step)]
            if pool is None:
                chunks = [_analyze(job, options.stemmer, options.stopwords) for job in jobs]
            else:
                chunks = list(pool.map(_analyze, jobs, itertools.repeat(options.stemmer),
                                       itertools.repeat(options.stopwords)))
            del pairs, jobs
            arrays = _invert(chunks, rows)
            appender.append([d.docid for d in batch])
            _write_run(work, len(runs), rows, arrays)
            runs.append({"first_row": rows, "rows": len(batch), "postings": len(arrays["rows"])})
            rows += len(batch)
            bar.update(len(batch))
            if on_commit is not None:
                on_commit(rows)
    finally:
        bar.close()
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    return runs


def build_disk_index(docs: Iterable[Document], out: str | Path, fingerprint: str,
                     options: DiskBuildOptions = DiskBuildOptions(), corpus_name: str = "",
                     log: Callable[[str], None] = print, on_commit: Callable[[int], None] | None = None) -> dict:
    """Build (or resume, module doc) the disk BM25 folder ``out`` from ``docs``, the whole corpus from its first
    document (the finished runs' documents are skipped). ``on_commit(rows)`` is called after each run is written.
    Returns the folder's ``hopscotch_bm25.json``."""
    out = Path(out)
    work = partial_folder(out)
    _open_work(work, fingerprint, options, log)
    t0 = time.perf_counter()
    try:  # a refused build (a repeated docid, a bad line, an empty corpus) leaves no work folder behind
        runs = write_runs(docs, work, options, log, on_commit, corpus_name)
        release_memory()
        if not runs:
            raise UsageError("cannot build a BM25 index over an empty corpus")
        finish_lookup(work, corpus_name)  # every docid once: checked before any merge
        release_memory()
        state = merge_runs(work, runs, options.k1, options.b, options.merge_postings, options.block, log)
    except HopscotchError:
        shutil.rmtree(work, ignore_errors=True)
        raise
    num_terms = finish_tables(work, state)
    release_memory()
    meta = {"backend": "disk", "layout": LAYOUT, "k1": options.k1, "b": options.b, "stemmer": options.stemmer,
            "stopwords": options.stopwords, "num_docs": state["num_docs"], "num_terms": num_terms,
            "num_postings": state["num_postings"], "avgdl": state["avgdl"], "block": options.block,
            "analyzer": Analyzer(options.stemmer, options.stopwords).describe(), "fingerprint": fingerprint,
            "build": {k: v for k, v in asdict(options).items() if k not in ("show_progress",)},
            "build_seconds_last_run": round(time.perf_counter() - t0, 1)}
    publish(work, out, meta)
    return meta
