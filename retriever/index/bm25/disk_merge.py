"""Stages 2 and 3 of a disk BM25 build (:mod:`.disk_build`): the runs merged into the final arrays, range of
term hashes by range (resumable), then the term tables, block maxima, docid lookup and manifest, and the work folder
renamed onto the output.

Impacts are bm25s's, value for value: ``idf`` (float32) ``= ln(1 + (N - df + 0.5) / (df + 0.5))``, times (in float64)
``tf / (k1 ((1 - b) + b dl / avgdl) + tf)``, rounded to float32; ``dl`` is a document's number of terms (1 for one
without any, as bm25s counts it) and ``avgdl`` their mean.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import shutil
from pathlib import Path

import numpy as np

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.index.bm25.manifest import TERMS_OFFSETS, TERMS_TEXT
from hopscotch.retriever.index.bm25.memory import META_FILE
from hopscotch.retriever.index.layout import save_npy
from hopscotch.retriever.io.atomic import remove_path, temp_path
from hopscotch.retriever.io.common import read_json, write_json

HASH_BUCKETS = 1 << 16  # ranges are planned on the top 16 bits of the term hashes
RUNS_DIR = "runs"
#: a run's arrays (``runs/run_XXXXX.NAME.npy``), beside its ``terms.txt`` and ``done.json``
RUN_ARRAYS = ("hashes", "checks", "tptr", "rows", "tfs", "lens", "term_offsets")


def run_path(work: Path, run: int, name: str) -> Path:
    """A file of run ``run`` in the work folder ``work``."""
    return work / RUNS_DIR / f"run_{run:05d}.{name}"


def _run_arrays(work: Path, run: int, mmap: bool = True) -> dict[str, np.ndarray]:
    return {name: np.load(run_path(work, run, f"{name}.npy"), mmap_mode="r" if mmap else None)
            for name in RUN_ARRAYS}


def _run_strings(work: Path, run: int, arrays: dict, wanted: np.ndarray) -> list[str]:
    """The run's terms at the positions ``wanted`` (of its hash-ordered term list), read through its offsets."""
    if not len(wanted):
        return []
    offsets = arrays["term_offsets"]
    lo, hi = int(offsets[int(wanted.min())]), int(offsets[int(wanted.max()) + 1])
    with open(run_path(work, run, "terms.txt"), "rb") as fh:
        fh.seek(lo)
        data = fh.read(hi - lo)
    starts = np.asarray(offsets[wanted]) - lo
    ends = np.asarray(offsets[wanted + 1]) - lo - 1
    return [data[a:b].decode("utf-8") for a, b in zip(starts.tolist(), ends.tolist())]


def plan_ranges(work: Path, num_runs: int, budget: int) -> list[tuple[int, int]]:
    """Hash ranges ``[lo, hi)`` (as bucket numbers of the top 16 bits) of about ``budget`` postings each."""
    per_bucket = np.zeros(HASH_BUCKETS, dtype=np.int64)
    for run in range(num_runs):
        arrays = _run_arrays(work, run)
        per_bucket += np.bincount((np.asarray(arrays["hashes"]) >> np.uint64(48)).astype(np.int64),
                                  weights=np.diff(np.asarray(arrays["tptr"])), minlength=HASH_BUCKETS).astype(np.int64)
    ranges, lo, total = [], 0, 0
    for bucket, n in enumerate(per_bucket.tolist()):
        if total and total + n > budget:
            ranges.append((lo, bucket))
            lo, total = bucket, 0
        total += n
    ranges.append((lo, HASH_BUCKETS))
    return ranges


def _slices(work: Path, num_runs: int, lo: int, hi: int) -> list[tuple[int, dict, int, int]]:
    """``(run, its arrays, first, end)``: each run's terms whose hash bucket lies in ``[lo, hi)``."""
    lo_h = np.uint64(lo) << np.uint64(48)
    out = []
    for run in range(num_runs):
        arrays = _run_arrays(work, run)
        h = arrays["hashes"]
        a = int(np.searchsorted(h, lo_h))
        b = len(h) if hi >= HASH_BUCKETS else int(np.searchsorted(h, np.uint64(hi) << np.uint64(48)))
        if a < b:
            out.append((run, arrays, a, b))
    return out


def merge_range(work: Path, num_runs: int, lo: int, hi: int, lens: np.ndarray, num_docs: int, avgdl: float,
                k1: float, b: float) -> dict:
    """One range's terms and postings (module doc): ``{"terms", "df", "max", "strings", "rows", "impacts"}``, the
    postings term by term, rows ascending within a term. Each run's postings are scattered straight into place (the
    runs are in row order, so a term's rows from later runs go after earlier ones): no sort of the postings."""
    parts = _slices(work, num_runs, lo, hi)
    hashes = [np.asarray(arr["hashes"][a:e]) for _, arr, a, e in parts]
    counts = [np.diff(np.asarray(arr["tptr"][a:e + 1])) for _, arr, a, e in parts]
    if not parts:
        empty = np.zeros(0, np.int64)
        return {"terms": np.zeros(0, np.uint64), "df": empty, "max": np.zeros(0, np.float32), "strings": [],
                "rows": np.zeros(0, np.uint32), "impacts": np.zeros(0, np.float32)}
    terms, first, inv = np.unique(np.concatenate(hashes), return_index=True, return_inverse=True)
    checks = np.concatenate([np.asarray(arr["checks"][a:e]) for _, arr, a, e in parts])
    if np.any(checks != checks[first][inv]):
        raise UsageError("two different terms of the corpus share a 64-bit hash; build with --backend bm25s")
    df = np.bincount(inv, weights=np.concatenate(counts), minlength=len(terms)).astype(np.int64)
    start = np.zeros(len(terms) + 1, dtype=np.int64)
    np.cumsum(df, out=start[1:])
    idf = np.log(1 + (num_docs - df + 0.5) / (df + 0.5)).astype(np.float32)  # bm25s: math.log(1 + ...), float32
    rows = np.empty(int(start[-1]), dtype=np.uint32)
    impacts = np.empty(int(start[-1]), dtype=np.float32)
    filled = np.zeros(len(terms), dtype=np.int64)
    owner = np.repeat(np.arange(len(parts)), [len(h) for h in hashes])  # which part each unique term came from first
    strings: list = [None] * len(terms)
    pos = 0
    for j, ((run, arr, a, e), cnt) in enumerate(zip(parts, counts)):
        term = inv[pos:pos + len(cnt)]
        mine = np.flatnonzero(owner[first[term]] == j)  # terms whose first occurrence is this run's
        for t, name in zip(term[mine].tolist(), _run_strings(work, run, arr, np.arange(a, e)[mine])):
            strings[t] = name
        pos += len(cnt)
        tptr = np.asarray(arr["tptr"][a:e + 1])
        run_rows = np.asarray(arr["rows"][tptr[0]:tptr[-1]])
        tf = np.asarray(arr["tfs"][tptr[0]:tptr[-1]], dtype=np.float64)
        of = np.repeat(term, cnt)
        dest = np.repeat(start[term] + filled[term] - (tptr[:-1] - tptr[0]), cnt) + np.arange(len(run_rows))
        filled[term] += cnt
        dl = np.asarray(lens[run_rows.astype(np.int64)], dtype=np.float64)
        rows[dest] = run_rows
        impacts[dest] = (idf[of].astype(np.float64) * (tf / (k1 * ((1 - b) + b * dl / avgdl) + tf))).astype(np.float32)
    term_max = np.maximum.reduceat(impacts, start[:-1]) if len(terms) else np.zeros(0, np.float32)
    return {"terms": terms, "df": df, "max": term_max.astype(np.float32), "strings": strings, "rows": rows,
            "impacts": impacts}


def _write_at(path: Path, first: int, values: np.ndarray) -> None:
    """Write ``values`` into the ``.npy`` file ``path`` from element ``first`` on (plain writes: no mapped pages)."""
    offset = np.load(path, mmap_mode="r").offset
    with open(path, "r+b") as fh:
        fh.seek(offset + first * values.itemsize)
        fh.write(values.tobytes())
        fh.flush()
        os.fsync(fh.fileno())


def merge_runs(work: Path, runs: list[dict], k1: float, b: float, budget: int, block: int, log=print) -> dict:
    """Stage 2 (module doc); returns ``{"num_docs", "num_postings", "avgdl", "ranges", ...}``."""
    from hopscotch.retriever.index.bm25.kernel import block_maxima

    state_path = work / "merge.json"
    num_docs = sum(r["rows"] for r in runs)
    total = sum(r["postings"] for r in runs)
    state = read_json(state_path) if state_path.is_file() else None
    if state is None or state.get("runs") != len(runs) or state.get("num_postings") != total:
        lens = np.concatenate([np.asarray(_run_arrays(work, r)["lens"]) for r in range(len(runs))])
        lens = np.maximum(lens, 1).astype(np.uint32)  # bm25s counts a document without terms as 1 long
        save_npy(work / "doclens.npy", lens)
        for name, dtype in (("postings.rows", np.uint32), ("postings.impacts", np.float32)):
            np.lib.format.open_memmap(work / f"{name}.npy", mode="w+", dtype=dtype, shape=(total,)).flush()
        state = {"runs": len(runs), "num_docs": num_docs, "num_postings": total,
                 "avgdl": float(lens.astype(np.float64).sum() / num_docs),
                 "ranges": plan_ranges(work, len(runs), budget), "done": 0, "postings_done": 0}
        write_json(state_path, state)
    lens = np.load(work / "doclens.npy", mmap_mode="r")
    if state["done"]:
        log(f"bm25 (disk): resuming the merge at range {state['done'] + 1} of {len(state['ranges'])}")
    for i in range(state["done"], len(state["ranges"])):
        lo, hi = state["ranges"][i]
        merged = merge_range(work, len(runs), lo, hi, lens, num_docs, state["avgdl"], k1, b)
        first = state["postings_done"]
        for name in ("rows", "impacts"):
            _write_at(work / f"postings.{name}.npy", first, merged[name])
        indptr = np.zeros(len(merged["df"]) + 1, dtype=np.int64)
        np.cumsum(merged["df"], out=indptr[1:])
        bptr, merged["blocks"] = block_maxima(indptr, merged["impacts"], block)
        merged["nblocks"] = np.diff(bptr)
        for name in ("terms", "df", "max", "blocks", "nblocks"):
            save_npy(work / f"range_{i:05d}.{name}.npy", merged[name])
        (work / f"range_{i:05d}.terms.txt").write_text("".join(t + "\n" for t in merged["strings"]), encoding="utf-8")
        state.update(done=i + 1, postings_done=first + len(merged["rows"]))
        write_json(state_path, state)
        del merged
        release_memory()  # each range allocates anew: without this the heap keeps growing over the ranges
    return state


def release_memory() -> None:
    """Hand the heap a finished step freed back to the system (glibc keeps it otherwise, and the next step's peak
    adds onto it)."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to trim
        pass


def finish_tables(work: Path, state: dict) -> int:
    """Stage 3's term tables and block pointers from the merged ranges; returns the number of terms."""
    n = len(state["ranges"])
    names = ("terms", "df", "max", "blocks", "nblocks")
    empty = {"terms": np.uint64, "df": np.int64, "max": np.float32, "blocks": np.float32, "nblocks": np.int64}
    parts = {name: (np.concatenate([np.load(work / f"range_{i:05d}.{name}.npy") for i in range(n)]) if n else
                    np.zeros(0, empty[name])) for name in names}
    for name, counts in (("postings.indptr", parts["df"]), ("blocks.ptr", parts["nblocks"])):
        ptr = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=ptr[1:])
        save_npy(work / f"{name}.npy", ptr)
    save_npy(work / "terms.hashes.npy", parts["terms"])
    save_npy(work / "terms.max.npy", parts["max"].astype(np.float32))
    save_npy(work / "blocks.max.npy", parts["blocks"].astype(np.float32))
    offsets = [0]
    with open(work / TERMS_TEXT, "wb") as out:
        for i in range(n):
            data = (work / f"range_{i:05d}.terms.txt").read_bytes()
            out.write(data)
            ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10) + 1 + offsets[-1]
            offsets.extend(ends.tolist())
    np.asarray(offsets, dtype="<u8").tofile(work / TERMS_OFFSETS)
    return len(parts["terms"])


def publish(work: Path, out: Path, meta: dict) -> None:
    """Drop the build's scratch files, write the manifest and rename the work folder onto ``out`` (the old ``out``
    moved aside first, then deleted)."""
    shutil.rmtree(work / RUNS_DIR, ignore_errors=True)
    for scratch in work.glob("range_*"):
        scratch.unlink()
    (work / "merge.json").unlink(missing_ok=True)
    (work / META_FILE).write_text(json.dumps(meta, indent=2))
    old = None
    if out.exists():
        old = temp_path(out, ".old")
        os.replace(out, old)
    try:
        os.replace(work, out)
    except BaseException:
        if old is not None and not out.exists():
            os.replace(old, out)
        raise
    (out / "build.json").unlink(missing_ok=True)
    if old is not None:
        remove_path(old)
