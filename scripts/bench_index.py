"""Benchmark: IVF-PQ against exact Flat search over 1,000,000 clustered 384-d vectors (Hopscotch's index path).

Each stage runs in its own process (whole-process wall time and peak RSS are recorded):

1. ``data``   draw the vectors and write them as a Hopscotch index folder (float16 shards + manifest);
2. ``build``  train and build the IVF-PQ index with :func:`hopscotch.retriever.index.faiss_index.build_faiss_index`;
3. ``search`` load each index with :class:`hopscotch.retriever.index.faiss_index.ShardedFaissIndex` and time 1,000 queries at
   k=100 (median of ``--repeats`` runs), Flat first, as the reference for recall@100.

The vectors (:func:`hopscotch_experiments.benchmarks.vectors.clustered_vectors`) are not plain Gaussian:
cluster centres and within-cluster offsets are drawn along a random rotation with a power-law spectrum
(eigenvalue i ~ i^-0.8, like sentence embeddings, whose variance concentrates in a few dozen directions),
cluster sizes follow a Zipf law, and everything is L2-normalised. Queries are fresh draws from the same
process. recall@100 is :func:`hopscotch.retriever.evaluation.ann_recall.recall_at` (FAISS's -1 padding is
never a hit; the denominator is Flat's neighbours).

    flock /tmp/hopscotch-heavy.lock .venv/bin/python scripts/bench_index.py            # ~6 minutes on 2 cores
    .venv/bin/python scripts/bench_index.py --docs 100000 --specs IVF256,PQ64           # quick look
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

from hopscotch_experiments.benchmarks.common import add_run_options, folder_bytes, md_table, peak_rss_mib, run_json
from hopscotch_experiments.benchmarks.vectors import clustered_vectors
from hopscotch.retriever.evaluation.ann_recall import recall_at
from hopscotch.retriever.index.faiss_spec import auto_spec


def stage_data(args) -> dict:
    from hopscotch.retriever.index.docstore import build_docid_lookup
    from hopscotch.retriever.index.encode import write_shard
    from hopscotch.retriever.index.layout import IndexMeta
    from hopscotch.retriever.io.corpus import Document

    out = Path(args.work) / "index"
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    for shard, x in enumerate(clustered_vectors(args.docs, args.dim, args.clusters, seed=0, chunk=args.shard_size)):
        docs = [Document(f"v{shard * args.shard_size + i}", "", "") for i in range(len(x))]
        write_shard(out, shard, docs, x, docstore=False, seconds=0.0)
    meta = IndexMeta(model="synthetic", model_path="", max_length=None, dim=args.dim, num_docs=args.docs,
                     num_shards=-(-args.docs // args.shard_size), shard_size=args.shard_size, docstore=False)
    build_docid_lookup(out, meta, show_progress=False)
    meta.save(out)
    queries = next(clustered_vectors(args.queries, args.dim, args.clusters, seed=1, chunk=args.queries))
    np.save(Path(args.work) / "queries.npy", queries)
    return {"seconds": time.perf_counter() - t0, "peak_rss_mib": peak_rss_mib()}


def stage_build(args) -> dict:
    from hopscotch.retriever.index.faiss_index import build_faiss_index, index_name

    out = Path(args.work) / "index"
    t0 = time.perf_counter()
    build_faiss_index(out, args.spec, layout="merged", train_size=args.train_size, show_progress=False)
    name = index_name(args.spec, "merged")
    return {"seconds": time.perf_counter() - t0, "peak_rss_mib": peak_rss_mib(),
            "index_bytes": folder_bytes(out / "faiss" / name), "shard_bytes": folder_bytes(out / "shards")}


def stage_search(args) -> dict:
    from hopscotch.retriever.index.faiss_index import ShardedFaissIndex, index_name

    out = Path(args.work) / "index"
    queries = np.load(Path(args.work) / "queries.npy")
    name = None if args.spec == "Flat" else index_name(args.spec, "merged")
    t0 = time.perf_counter()
    index = ShardedFaissIndex.load(out, name=name)
    load_s = time.perf_counter() - t0
    results = []
    settings = [(None, 1)] if args.spec == "Flat" else [tuple(map(int, s.split(":"))) for s in args.settings]
    for nprobe, refine in settings:
        index.search(queries[:8], 100, nprobe=nprobe, refine=refine)  # warm-up: refine's float16 copy loads here
        times = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            _, rows = index.search(queries, 100, nprobe=nprobe, refine=refine)
            times.append(time.perf_counter() - t)
        results.append({"nprobe": nprobe, "refine": refine, "seconds": float(np.median(times)),
                        "qps": len(queries) / float(np.median(times))})
        np.save(Path(args.work) / f"rows_{args.spec.replace(',', '_')}_{nprobe}_{refine}.npy", rows)
    return {"load_seconds": load_s, "peak_rss_mib": peak_rss_mib(), "results": results}


def run_stage(stage: str, args, spec: str | None = None) -> dict:
    cmd = [sys.executable, __file__, "--stage", stage, "--work", args.work, "--docs", str(args.docs),
           "--dim", str(args.dim), "--clusters", str(args.clusters), "--queries", str(args.queries),
           "--shard-size", str(args.shard_size), "--repeats", str(args.repeats), "--spec", spec or "Flat",
           "--settings", *args.settings] + (["--train-size", str(args.train_size)] if args.train_size else [])
    out, seconds = run_json(cmd, what=f"stage {stage}")
    out["process_seconds"] = seconds
    print(f"[{stage} {spec or ''}] {json.dumps(out)}", file=sys.stderr, flush=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--stage", choices=["data", "build", "search"])
    p.add_argument("--docs", type=int, default=1_000_000)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--clusters", type=int, default=4096)
    p.add_argument("--queries", type=int, default=1000)
    p.add_argument("--shard-size", type=int, default=250_000)
    p.add_argument("--specs", nargs="+", default=["IVF2048,PQ64", "IVF2048,PQ192x4fsr", "IVF2048,PQ384x4fsr"],
                   help="FAISS specs to build and time against Flat (the last is what --spec auto builds at 1M)")
    p.add_argument("--spec", help=argparse.SUPPRESS)  # one spec, for a stage process
    p.add_argument("--train-size", type=int)
    p.add_argument("--settings", nargs="+", default=["8:1", "8:2", "16:2", "8:4", "16:4", "16:8"],
                   help="nprobe:refine pairs to time")
    add_run_options(p, "/tmp/hopscotch-bench-index")
    p.add_argument("--keep", action="store_true", help="keep the work folder")
    args = p.parse_args()
    import faiss
    faiss.omp_set_num_threads(args.threads)
    if args.stage:
        fn = {"data": stage_data, "build": stage_build, "search": stage_search}[args.stage]
        print(json.dumps(fn(args)))
        return
    os.makedirs(args.work, exist_ok=True)
    data = run_stage("data", args)
    flat = run_stage("search", args, spec="Flat")
    truth = np.load(Path(args.work) / "rows_Flat_None_1.npy")
    flat_qps = flat["results"][0]["qps"]
    summary = {"docs": args.docs, "dim": args.dim, "threads": args.threads, "queries": args.queries,
               "data": data, "flat": flat, "specs": {}}
    auto, auto_search = auto_spec(args.docs, args.dim)
    summary["auto"] = {"spec": auto, "search": auto_search}
    print(f"\n--spec auto at {args.docs:,} vectors of d={args.dim}: {auto} {auto_search}")
    print(f"\n{args.docs:,} vectors, d={args.dim}, {args.threads} threads, {args.queries} queries, k=100; Flat: "
          f"{flat_qps:,.0f} q/s (load {flat['load_seconds']:.1f}s, peak RSS {flat['peak_rss_mib']:,.0f} MiB)")
    for spec in args.specs:
        build = run_stage("build", args, spec=spec)
        ivf = run_stage("search", args, spec=spec)
        rows = []
        for r in ivf["results"]:
            got = np.load(Path(args.work) / f"rows_{spec.replace(',', '_')}_{r['nprobe']}_{r['refine']}.npy")
            rows.append({**r, "recall@100": recall_at(got, truth), "speedup": r["qps"] / flat_qps})
        summary["specs"][spec] = {"build": build, "search": {**ivf, "results": rows}}
        print(f"\n{spec}: build {build['seconds']:.1f}s, peak RSS {build['peak_rss_mib']:,.0f} MiB, index "
              f"{build['index_bytes'] / 2**20:,.1f} MiB on disk (shards {build['shard_bytes'] / 2**20:,.1f} MiB); "
              f"search peak RSS {ivf['peak_rss_mib']:,.0f} MiB")
        print(md_table(["nprobe", "refine", "q/s", "x Flat", "recall@100 vs Flat"],
                       [[r["nprobe"], r["refine"], f"{r['qps']:,.0f}", f"{r['speedup']:.1f}x", f"{r['recall@100']:.3f}"]
                        for r in rows]))
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2))
    if not args.keep:
        shutil.rmtree(args.work, ignore_errors=True)


if __name__ == "__main__":
    main()
