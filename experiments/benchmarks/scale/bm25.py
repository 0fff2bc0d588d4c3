"""BM25 in the cost-curve benchmark (:mod:`.run`): both backends built and searched at each size, the plan of
``hopscotch bm25-index --plan`` beside them, and the report's BM25 section (docs/scaling.md, "BM25 cost curves").

Stages (each in its own process, :mod:`.stages`): ``bm25`` / ``bm25_search`` (bm25s, sizes up to
``bm25s_max``: it holds the whole score matrix in RAM) and ``bm25_disk`` / ``bm25_disk_search`` (the disk backend:
:func:`~hopscotch.retriever.index.bm25.disk_build.build_disk_index`, its default options). A search stage times
``queries`` searches at ``k`` on ``threads`` threads (bm25s: its ``n_threads``; disk: queries spread over threads),
query analysis and docid lookup included, the median of ``repeats`` runs after a warm-up.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from hopscotch_experiments.benchmarks.common import folder_bytes, md_table, peak_rss_mib

from hopscotch.retriever.index.bm25 import BM25Index, load_bm25_index
from hopscotch.retriever.index.bm25.disk_build import DiskBuildOptions, build_disk_index, partial_folder
from hopscotch.retriever.index.bm25.plan import plan_bm25
from hopscotch.retriever.io.common import atomic_write
from hopscotch.retriever.io.corpus import read_corpus
from hopscotch.retriever.io.queries import read_queries

START, END = "<!-- scale-bench-bm25:start -->", "<!-- scale-bench-bm25:end -->"
BACKENDS = {"bm25s": ("bm25", "bm25_search"), "disk": ("bm25_disk", "bm25_disk_search")}
MIB = 2 ** 20


def _median_seconds(repeats: int, fn) -> float:
    times = []
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def _libraries(backend: str) -> None:
    """Import what the backend imports lazily (bm25s and scipy; numba and the kernel), so that the RSS before the
    measured work holds the libraries, as the plan leaves them out."""
    if backend == "bm25s":
        import bm25s  # noqa: F401
        import Stemmer  # noqa: F401
    else:
        from hopscotch.retriever.index.bm25 import kernel  # noqa: F401


def stage_bm25(cfg, folder: Path) -> dict:
    """bm25s: ``BM25Index.build`` + ``save`` (what ``bm25-index --backend bm25s`` runs)."""
    _libraries("bm25s")
    out = folder / "bm25"
    shutil.rmtree(out, ignore_errors=True)
    base = peak_rss_mib()
    t0 = time.perf_counter()
    BM25Index.build(read_corpus(folder / "corpus.jsonl"), show_progress=False).save(out)
    return {"build_seconds": time.perf_counter() - t0, "base_rss_mib": base, "peak_rss_mib": peak_rss_mib(),
            "disk_bytes": folder_bytes(out)}


def stage_bm25_disk(cfg, folder: Path) -> dict:
    """The disk backend: ``build_disk_index`` with its default options (what ``bm25-index --backend disk`` runs)."""
    _libraries("disk")
    out = folder / "bm25_disk"
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(partial_folder(out), ignore_errors=True)
    base = peak_rss_mib()
    t0 = time.perf_counter()
    meta = build_disk_index(read_corpus(folder / "corpus.jsonl", unique=False), out, "bench",
                            DiskBuildOptions(show_progress=False), log=lambda _: None)
    return {"build_seconds": time.perf_counter() - t0, "base_rss_mib": base, "peak_rss_mib": peak_rss_mib(),
            "disk_bytes": folder_bytes(out), "num_terms": meta["num_terms"], "num_postings": meta["num_postings"],
            "postings_bytes": folder_bytes(out, "postings.*") + folder_bytes(out, "blocks.*")}


def _search_stage(cfg, folder: Path, name: str) -> dict:
    texts = [q.text for q in read_queries(Path(cfg.work) / "queries.jsonl")]
    _libraries("bm25s" if name == "bm25" else "disk")
    base = peak_rss_mib()
    t0 = time.perf_counter()
    index = load_bm25_index(folder / name)
    load_s = time.perf_counter() - t0
    index.search(texts[:8], k=cfg.k, threads=cfg.threads)  # warm-up (and the disk kernel's compile cache)
    seconds = _median_seconds(cfg.repeats, lambda: index.search(texts, k=cfg.k, threads=cfg.threads))
    return {"load_seconds": load_s, "search_seconds": seconds, "qps": len(texts) / seconds, "base_rss_mib": base,
            "peak_rss_mib": peak_rss_mib(), "threads": cfg.threads}


def stage_bm25_search(cfg, folder: Path) -> dict:
    return _search_stage(cfg, folder, "bm25")


def stage_bm25_disk_search(cfg, folder: Path) -> dict:
    return _search_stage(cfg, folder, "bm25_disk")


# -- the plan beside the measurements ------------------------------------------------------------------

def bm25_plan_checks(result: dict, check) -> list[dict]:
    """The plan's disk and RAM of each backend at each measured size (``check``: :func:`.scale._check`)."""
    out = []
    for size in sorted(int(s) for s in result["sizes"]):
        st = result["sizes"][str(size)]
        avg = st["corpus"]["avg_doc_bytes"]
        plan = plan_bm25(size, avg)
        for backend, (build, search) in BACKENDS.items():
            if build not in st:
                continue
            b = st[build]
            out += [check(size, f"BM25 {backend} index folder", plan[backend]["disk"], b["disk_bytes"], "bytes"),
                    check(size, f"BM25 {backend} build RAM", plan[backend]["build_ram"],
                          (b["peak_rss_mib"] - b["base_rss_mib"]) * MIB, "bytes")]
            if search in st:
                s = st[search]
                out.append(check(size, f"BM25 {backend} search RAM", plan[backend]["search_ram"],
                                 (s["peak_rss_mib"] - s["base_rss_mib"]) * MIB, "bytes"))
    return out


# -- the report's section ------------------------------------------------------------------------------

def _qps(result: dict, size: str, backend: str) -> float | None:
    stage = result["sizes"][size].get(BACKENDS[backend][1])
    return None if stage is None else stage["qps"]


def bm25_table(result: dict) -> str:
    rows = []
    for backend, (build, search) in BACKENDS.items():
        for size in sorted(result["sizes"], key=int):
            st = result["sizes"][size]
            if build not in st:
                continue
            b, s = st[build], st.get(search, {})
            ref = _qps(result, size, "bm25s")
            ratio = f"{s['qps'] / ref:,.1f}x" if s and ref and backend != "bm25s" else "-"
            rows.append([backend, f"{int(size):,}", f"{b['build_seconds']:,.1f}",
                         f"{b['peak_rss_mib']:,.0f} / {s.get('peak_rss_mib', 0):,.0f}",
                         f"{b['disk_bytes'] / MIB:,.1f}", f"{s['qps']:,.0f}" if s else "-", ratio])
    return md_table(["backend", "documents", "build s", "peak RSS MiB (build / search)", "disk MiB", "q/s",
                     "q/s vs bm25s"], rows)


def bm25_findings(result: dict) -> list[str]:
    """The acceptance figures: disk / bm25s q/s at each size both ran, and each backend's q/s fall between sizes."""
    sizes = sorted(result["sizes"], key=int)
    lines = []
    for size in sizes:
        a, b = _qps(result, size, "disk"), _qps(result, size, "bm25s")
        if a and b:
            lines.append(f"at {int(size):,} documents the disk backend answers {a / b:,.1f}x bm25s's q/s "
                         f"({a:,.0f} vs {b:,.0f})")
    for backend in BACKENDS:
        pts = [(int(s), _qps(result, s, backend)) for s in sizes if _qps(result, s, backend)]
        for (n0, q0), (n1, q1) in zip(pts, pts[1:]):
            lines.append(f"{backend}: q/s falls {q0 / q1:,.1f}x from {n0:,} to {n1:,} documents")
    return lines


def _plan_table(checks: list[dict]) -> str:
    rows = [[f"{c['size']:,}", c["what"], f"{c['predicted'] / MIB:,.1f} MiB", f"{c['measured'] / MIB:,.1f} MiB",
             f"{c['ratio']:.2f}", "ok" if c["within"] else "**off by more than 25%**"] for c in checks]
    return md_table(["documents", "item", "plan", "measured", "measured / plan", ""], rows)


def render_bm25_section(result: dict, command: str, note: str = "") -> str:
    cfg = result["config"]
    checks = [c for c in result["plan"] if c["what"].startswith("BM25 ")]
    sizes = ", ".join(f"{int(s):,}" for s in sorted(result["sizes"], key=int))
    lines = [START, "## BM25 cost curves: bm25s and the disk backend", "",
             f"Measured with `scripts/bench_scale.py` at {sizes} documents (the corpus and queries of the section "
             f"above; one process per stage; q/s the median of {cfg['repeats']} runs of {result['setup']['queries']} "
             f"queries at k={cfg['k']} on {cfg['threads']} thread(s), query analysis and docid lookup included). "
             f"bm25s runs up to {cfg.get('bm25s_max', 0):,} documents (its score matrix lives in RAM).", "",
             *([note, ""] if note else []), bm25_table(result), "",
             *[f"* {line}" for line in bm25_findings(result)], "",
             "`hopscotch bm25-index --plan` at the same sizes (`plan_bm25`, with the corpus's mean document bytes); "
             "RAM is what the stage added to its process (peak RSS less the peak before it; for the disk backend's "
             "search that is the pages of the memory-mapped postings its queries touched).", "",
             _plan_table(checks) if checks else "(no plan checks)", "",
             "Command:", "", "```", command, "```", END]
    return "\n".join(lines)


def write_bm25_section(result: dict, doc, command: str, note: str = "", after: str | None = None) -> str:
    """Put the BM25 section into ``doc`` between its markers (when they are missing: right after the line
    ``after``, the dense section's end marker, else at the end)."""
    section = render_bm25_section(result, command, note)
    text = Path(doc).read_text() if Path(doc).is_file() else ""
    if START in text and END in text:
        head, rest = text.split(START, 1)
        text = head + section + rest.split(END, 1)[1]
    elif after and after in text:
        head, rest = text.split(after, 1)
        text = head + after + "\n\n" + section + rest
    else:
        text = text.rstrip("\n") + ("\n\n" if text else "") + section + "\n"
    with atomic_write(doc) as fh:
        fh.write(text)
    return f"BM25 section written to {doc}"
