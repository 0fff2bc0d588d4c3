"""The report of the cost-curve benchmark (:mod:`.run`): a Markdown section (tables of what was measured and of the
plan beside it) written between markers into ``docs/scaling.md`` (appended when the markers are missing), and a
log-log PNG of the curves (matplotlib's object API on an Agg canvas, as :mod:`hopscotch.retriever.evaluation
.discovery_plot`; matplotlib is in the ``dev`` extra, and without it the section says so instead).
"""

from __future__ import annotations

import os
from pathlib import Path

from hopscotch_experiments.benchmarks.common import md_table
from hopscotch_experiments.benchmarks.scale.bm25 import write_bm25_section

from hopscotch.retriever.io.common import atomic_write

START, END = "<!-- scale-bench:start -->", "<!-- scale-bench:end -->"
KINDS = ("BM25", "BM25 disk", "Flat", "IVF-PQ", "multi-vector")
COLORS = {"BM25": "tab:blue", "BM25 disk": "tab:purple", "Flat": "tab:orange", "IVF-PQ": "tab:green",
          "multi-vector": "tab:red"}
#: the kinds of the dense section's table (BM25 has a section of its own: :mod:`.bm25`)
DENSE_KINDS = ("Flat", "IVF-PQ", "multi-vector")
MIB = 2 ** 20


def _num(x, fmt: str = ",.0f") -> str:
    return "-" if x is None else format(x, fmt)


def _bm25_point(st: dict, build: str, search: str, n: int) -> dict:
    return {"docs": n, "encode_s": None, "build_s": st[build]["build_seconds"], "build_rss": st[build]["peak_rss_mib"],
            "search_rss": st[search]["peak_rss_mib"] if search in st else None, "disk": st[build]["disk_bytes"],
            "qps": st[search]["qps"] if search in st else None, "recall": None}


def curves(result: dict) -> dict[str, list[dict]]:
    """Per index kind, one point per size it ran at: docs, encode_s, build_s, build_rss, search_rss, disk, qps,
    recall."""
    out: dict[str, list[dict]] = {kind: [] for kind in KINDS}
    for size in sorted(result["sizes"], key=int):
        st, n = result["sizes"][size], int(size)
        if "bm25" in st:
            out["BM25"].append(_bm25_point(st, "bm25", "bm25_search", n))
        if "bm25_disk" in st:
            out["BM25 disk"].append(_bm25_point(st, "bm25_disk", "bm25_disk_search", n))
        if "encode" in st:
            enc = st["encode"]
            out["Flat"].append({"docs": n, "encode_s": enc["encode_seconds"], "build_s": enc["finalize_seconds"],
                                "build_rss": enc["peak_rss_mib"], "search_rss": st["flat_search"]["peak_rss_mib"],
                                "disk": enc["disk"]["total"] - enc["disk"]["faiss"], "qps": st["flat_search"]["qps"],
                                "recall": 1.0, "vs_bare": st.get("flat_bare", {}).get("ratio")})
            # IVF-PQ is built over the Flat index's vectors: no encode of its own
            out["IVF-PQ"].append({"docs": n, "encode_s": None, "build_s": st["ivf_build"]["build_seconds"],
                                  "build_rss": st["ivf_build"]["peak_rss_mib"],
                                  "search_rss": st["ivf_search"]["peak_rss_mib"],
                                  "disk": st["ivf_build"]["index_bytes"], "qps": st["ivf_search"]["qps"],
                                  "recall": st["ivf_search"]["recall"], "spec": st["ivf_build"]["spec"]})
        if "mv_build" in st:
            mv, ms = st["mv_build"], st["mv_search"]
            out["multi-vector"].append({"docs": n, "encode_s": mv["encode_seconds"], "build_s": mv["build_seconds"],
                                        "build_rss": mv["peak_rss_mib"], "search_rss": ms["peak_rss_mib"],
                                        "disk": mv["disk"]["total"], "qps": ms["qps"], "recall": ms.get("recall")})
    return out


def measured_table(result: dict) -> str:
    rows = []
    for kind, points in curves(result).items():
        if kind not in DENSE_KINDS:
            continue
        for p in points:
            name = f"IVF-PQ `{p['spec']}`" if kind == "IVF-PQ" else kind
            encode = "(Flat's)" if kind == "IVF-PQ" else _num(p["encode_s"], ",.1f")
            rows.append([name, f"{p['docs']:,}", encode, _num(p["build_s"], ",.1f"),
                         f"{_num(p['build_rss'])} / {_num(p['search_rss'])}", _num(p["disk"] / MIB, ",.1f"),
                         _num(p["qps"]), _num(p.get("vs_bare"), ".2f"), _num(p["recall"], ".3f")])
    rows.sort(key=lambda r: (DENSE_KINDS.index(r[0].split(" ")[0]) if r[0].split(" ")[0] in DENSE_KINDS else 1,
                             int(r[1].replace(",", ""))))
    return md_table(["index", "documents", "encode s", "build s", "peak RSS MiB (build / search)", "disk MiB",
                     "q/s", "search time / bare FAISS Flat", "recall@k vs exact"], rows)


def dense_findings(result: dict) -> list[str]:
    """The Flat acceptance figure at each size ``flat_bare`` ran at: ``ShardedFaissIndex``'s search time over a
    bare FAISS ``IndexFlatIP``'s on the same vectors, queries and ``k`` (one process, interleaved), and over the
    bare index run with the same BLAS settings (what the shards and their merge cost)."""
    lines = []
    for size in sorted(result["sizes"], key=int):
        b = result["sizes"][size].get("flat_bare")
        if not b:
            continue
        shards = result["sizes"][size].get("encode", {}).get("shards")
        where = f"`ShardedFaissIndex`, {shards} shard(s)" if shards else "`ShardedFaissIndex`"
        lines.append(f"at {int(size):,} documents Flat search ({where}) takes {b['ratio']:.2f}x the time of a bare "
                     "FAISS `IndexFlatIP` over the same vectors "
                     f"({b['ours_qps']:,.0f} vs {b['qps']:,.0f} q/s, one process, interleaved) and "
                     f"{b['ratio_tuned']:.2f}x that of the bare index run with the same BLAS settings "
                     f"({b['tuned_qps']:,.0f} q/s); top-k agreement {b['agreement']:.3f}")
    return lines


def plan_table(result: dict) -> str:
    rows = []
    for c in result["plan"]:
        scale, unit = (MIB, "MiB") if c["unit"] == "bytes" else (1, "s")
        rows.append([f"{c['size']:,}", c["what"], f"{c['predicted'] / scale:,.1f} {unit}",
                     f"{c['measured'] / scale:,.1f} {unit}", f"{c['ratio']:.2f}",
                     "ok" if c["within"] else "**off by more than 25%**"])
    return md_table(["documents", "item", "plan", "measured", "measured / plan", ""], rows)


def plot_curves(result: dict, path: str | os.PathLike) -> str:
    """A 2 x 3 panel PNG (log-log; recall on a linear axis) at ``path``, written atomically; says what it did."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        return f"no plot: matplotlib is not installed ({exc}); pip install 'hopscotch[dev]'"

    data = curves(result)
    plans = _plan_points(result)
    fig = Figure(figsize=(12, 7), dpi=100)
    FigureCanvasAgg(fig)
    panels = [("encode_s", "encode seconds", True), ("build_s", "build seconds", True),
              ("disk", "bytes on disk", True), ("build_rss", "peak RSS of the build, MiB", True),
              ("qps", f"queries/s at k={result['config']['k']}", True), ("recall", "recall@k vs exact", False)]
    for i, (key, label, log_y) in enumerate(panels):
        ax = fig.add_subplot(2, 3, i + 1)
        for kind, points in data.items():
            pts = [(p["docs"], p[key]) for p in points if p.get(key) is not None]
            if pts:
                ax.plot(*zip(*pts), marker="o", color=COLORS[kind], label=kind)
            plan = plans.get((kind, key), [])
            if plan:
                ax.plot(*zip(*plan), linestyle="--", marker="x", color=COLORS[kind], alpha=0.7)
        ax.set_xscale("log")
        if log_y:
            ax.set_yscale("log")
        ax.set_xlabel("documents")
        ax.set_title(label, fontsize=10)
        ax.grid(alpha=0.3, which="both")
    handles = [fig.axes[0].plot([], [], marker="o", color=COLORS[k], label=k)[0] for k in KINDS]
    handles.append(fig.axes[0].plot([], [], linestyle="--", marker="x", color="gray", label="plan")[0])
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=9)
    fig.suptitle("Measured cost curves (solid) and hopscotch index --plan (dashed)", fontsize=11)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    with atomic_write(path, "wb") as fh:
        fig.savefig(fh, format="png")
    return f"plot written to {path}"


def _plan_points(result: dict) -> dict:
    """Plan predictions to draw beside the curves: disk of each index, encode time."""
    what = {"dense index folder": ("Flat", "disk"), "multi-vector index folder": ("multi-vector", "disk"),
            "encode time": ("Flat", "encode_s")}
    out: dict = {}
    for c in result["plan"]:
        for prefix, target in what.items():
            if c["what"].startswith(prefix):
                out.setdefault(target, []).append((c["size"], c["predicted"]))
        if c["what"].endswith(" index file"):
            out.setdefault(("IVF-PQ", "disk"), []).append((c["size"], c["predicted"]))
    return out


def _names(paths) -> str:
    """``folder/file`` of each path, for the text."""
    return ", ".join(f"`{Path(p).parent.name}/{Path(p).name}`" for p in paths)


def render_section(result: dict, command: str, png_name: str | None, plot_note: str = "", note: str = "") -> str:
    cfg, setup = result["config"], result["setup"]
    sizes = sorted(int(s) for s in result["sizes"] if "encode" in result["sizes"][s])
    dense_plan = {"plan": [c for c in result["plan"] if not c["what"].startswith("BM25 ")]}
    off = [c for c in dense_plan["plan"] if not c["within"]]
    first = result["sizes"][str(sizes[0])] if sizes else {}
    corpus = first.get("corpus", {})
    lines = [START, "## Measured cost curves", "",
             f"Measured with `scripts/bench_scale.py` at {', '.join(f'{n:,}' for n in sizes)} documents "
             f"(one process per stage, {cfg['threads']} thread(s) each: wall time and peak RSS are the stage's own; "
             f"q/s the median of {cfg['repeats']} runs of {setup['queries']} queries at k={cfg['k']}).",
             "",
             "* **Documents**: real sentences recombined (`hopscotch_experiments.benchmarks.scale.data`): each "
             f"document is 2-6 sentences drawn from the {corpus.get('pool_sentences', 0):,} sentences of "
             f"{corpus.get('pool_paragraphs', 0):,} paragraphs of {_names(cfg['sources'])}, titled after its first "
             f"sentence's paragraph ({corpus.get('avg_doc_bytes', 0):,.0f} bytes a JSONL line). No document repeats "
             "another, so exact top-k lists are not sets of ties; topical coherence within a document is not real. "
             f"Queries: the first {setup['queries']} questions of {_names(cfg['query_sources'])}.",
             f"* **Encoder**: `{cfg['model']}` at max length {cfg['max_length']} (`minilmN`: all-MiniLM-L6-v2's first "
             "N of 6 layers, its own weights, 384-d). Encode seconds are this model's on this machine; build time, "
             "search speed, disk and RAM do not depend on the weights (only on the 384 dimensions and, for the "
             "multi-vector index, the token count); recall does, through how the vectors spread.",
             f"* **Indexes**: (BM25, both backends: the next section); Flat (the float16 shards of `hopscotch index`, "
             "loaded as "
             f"`IndexFlatIP`; its build column is the docid lookup and manifest after encoding); IVF-PQ "
             f"`{cfg['ivf_spec']}` (`auto`: what `--spec auto` builds above its Flat cut-off, IVF(2 sqrt N),PQ384x4fsr "
             "with N/39 at most lists, at every size here), merged layout, searched at "
             + (f"nprobe {cfg['nprobe']}, refine {cfg['refine']}" if cfg.get("nprobe") is not None else
                "`--spec auto`'s defaults (nprobe 1/16 of the lists, at least 8; refine 4)")
             + ", recall against Flat; multi-vector "
             f"({cfg['mv_dim']}-d tokens, {cfg['mv_nbits']}-bit residuals, up to {cfg['multivector_max']:,} "
             f"documents), searched at nprobe {cfg['mv_nprobe']}, {cfg['mv_candidates']} candidates, recall against "
             "exact MaxSim over the stored float16 token vectors. Peak RSS includes the interpreter, libraries and "
             "the loaded model; q/s is the index's with the query vectors already encoded (BM25: with tokenisation).",
             "", *([note, ""] if note else []), measured_table(result), ""]
    findings = dense_findings(result)
    if findings:
        lines += [*[f"* {line}" for line in findings], "",
                  "The bare reference (stage `flat_bare`) loads the same float16 shards into one FAISS `IndexFlatIP` "
                  "with FAISS's own settings and times it interleaved with `ShardedFaissIndex` in one process. "
                  "FAISS 1.15 takes its sequential kernel while queries x dimensions < 128,000 (below 334 queries at "
                  "384 dimensions), which reads every vector from RAM once per query; `ShardedFaissIndex` runs "
                  "its BLAS kernel in wide blocks instead (`faiss_flat.flat_blas_settings`).", ""]
    if png_name:
        lines += [f"![cost curves]({png_name})", ""]
    if plot_note:
        lines += [plot_note, ""]
    lines += ["### The plan beside the measurements", "",
              "`hopscotch index --plan` at the same sizes (`plan_index`: Flat, shards layout, and the IVF spec, "
              "merged; `plan_multi_vector` with the first 200 documents' token count), with the corpus's mean "
              "document bytes for the docstore. RAM is what the stage's work added to its process (peak RSS less "
              "the peak before it, after a warm-up batch where a model is loaded), as the plan leaves out the "
              "interpreter, the libraries and the model; the encode time is predicted from the rate measured at the "
              "smallest size. Disk is the plan's exact arithmetic (bytes a document plus fixed costs). For RAM the "
              "plan counts the arrays an index and its build hold; it leaves out transient copies (a shard converted "
              "to float32 while loading, float16 pages mapped while building, the copies k-means and the residual "
              "codec make) and the allocator's own overhead. Those are most of the memory at small sizes, so read "
              "the ratios at the largest size: where one is off there, the plan is missing a term.", "",
              plan_table(dense_plan), ""]
    lines.append(f"{len(off)} of {len(dense_plan['plan'])} predictions are off by more than 25%." if off else
                 "Every prediction is within 25% of the measurement.")
    lines += ["", "Command:", "", "```", command, "```", END]
    return "\n".join(lines)


def write_scale_report(result: dict, doc: str | os.PathLike, png: str | os.PathLike | None, command: str,
                       note: str = "") -> str:
    """Draw the PNG (when ``png``) and put the dense section (when the run encoded) and the BM25 section
    (:mod:`.bm25`, when it built a BM25 index) into ``doc`` between their markers (appended when missing),
    ``note`` (when given) above their tables; what it did."""
    said = []
    if any("encode" in st for st in result["sizes"].values()):
        plot_note = plot_curves(result, png) if png else ""
        drawn = bool(png) and plot_note.startswith("plot written")
        name = os.path.relpath(png, Path(doc).parent) if drawn else None
        section = render_section(result, command, name, "" if drawn else plot_note, note)
        text = Path(doc).read_text() if Path(doc).is_file() else ""
        if START in text and END in text:
            head, rest = text.split(START, 1)
            text = head + section + rest.split(END, 1)[1]
        else:
            text = text.rstrip("\n") + ("\n\n" if text else "") + section + "\n"
        with atomic_write(doc) as fh:
            fh.write(text)
        said.append(f"{plot_note + '; ' if plot_note else ''}section written to {doc}")
    if any("bm25" in st or "bm25_disk" in st for st in result["sizes"].values()):
        said.append(write_bm25_section(result, doc, command, note, after=END))
    return "; ".join(said) or "nothing measured: no section written"
