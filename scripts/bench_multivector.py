"""Cost of late interaction against single vectors: encode speed, index bytes per document, search speed.

    .venv/bin/python scripts/bench_multivector.py --sv RUN/final --mv MV_RUN/final [--docs 1000] [--queries 200]
        [--repeats 3] [--work /tmp/bench_mv]

On the first ``--docs`` paragraphs of the shared HotpotQA corpus and ``--queries`` HotpotQA IRCoT steps:

* **index**: whole-process ``hopscotch index`` wall time (median of ``--repeats`` fresh builds) for the single-vector
  model (Flat) and the multi-vector model (token shards + codec + compressed tokens + inverted file);
* **bytes per document** on disk: the single-vector shard embeddings and FAISS file; the multi-vector compressed
  index (``mv/``), and the raw float16 token vectors kept for rebuilds;
* **search**: queries per second in-process (models loaded once; median of ``--repeats``) for single-vector Flat,
  the multi-vector full index, and MaxSim reranking of BM25's top 100 (token cache seeded from the index).

Prints a markdown table (the one in docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from itertools import islice
from pathlib import Path

from hopscotch_experiments.benchmarks.common import folder_bytes, md_table, shared_data_dir, timed

ROOT = Path(__file__).resolve().parents[1]
HOP = [sys.executable, "-m", "hopscotch.retriever.cli"]


def build(model: str, corpus: Path, out: Path) -> float:
    return timed([*HOP, "index", "--corpus", str(corpus), "--model", model, "--out", str(out), "--overwrite",
                  "--batch-size", "32"])


def qps(searcher, queries: list[str], repeats: int) -> float:
    searcher.search_batch(queries[:4], 10)  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        searcher.search_batch(queries, 10)
        times.append(time.perf_counter() - t0)
    return len(queries) / statistics.median(times)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sv", required=True)
    p.add_argument("--mv", required=True)
    p.add_argument("--data", default=str(shared_data_dir(ROOT)))
    p.add_argument("--docs", type=int, default=1000)
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--work", default="/tmp/bench_mv")
    args = p.parse_args(argv)
    from hopscotch.retriever.io.common import read_jsonl, write_jsonl
    from hopscotch.retriever.searchers import build_searcher
    from hopscotch.retriever.searchers.rerank import MultiVectorReranker, RerankedSearcher

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    src = Path(args.data) / "hotpotqa_ircot"
    corpus = work / "corpus.jsonl"
    write_jsonl(corpus, [doc for _, doc in islice(read_jsonl(src / "corpus.jsonl"), args.docs)])
    queries = [q["text"] for _, q in islice(read_jsonl(src / "queries.jsonl"), args.queries)]
    seconds = {}
    for label, model in (("single-vector", args.sv), ("multi-vector", args.mv)):
        seconds[label] = [build(model, corpus, work / label) for _ in range(args.repeats)]
        print(f"{label}: index builds {seconds[label]}", file=sys.stderr)
    sv_dir, mv_dir = work / "single-vector", work / "multi-vector"
    meta = json.loads((mv_dir / "index.json").read_text())["multi_vector"]
    subprocess.run([*HOP, "bm25-index", "--corpus", str(corpus), "--out", str(work / "bm25"), "--overwrite"],
                   check=True, capture_output=True)
    sv = build_searcher("dense", index=str(sv_dir))
    mv = build_searcher("dense", index=str(mv_dir))
    reranker = MultiVectorReranker(args.mv, depth=100, cache_dir=work / "cache")
    reranker.seed_cache(mv_dir)
    rr = RerankedSearcher(build_searcher("bm25", bm25=str(work / "bm25"), corpus=str(corpus)), reranker)
    speed = {"single-vector Flat": qps(sv, queries, args.repeats), "multi-vector full index": qps(mv, queries, args.repeats),
             "BM25 top 100 + MaxSim rerank": qps(rr, queries, args.repeats)}
    n = args.docs
    rows = [
        ("index build, whole process (s, median)", f"{statistics.median(seconds['single-vector']):.1f}",
         f"{statistics.median(seconds['multi-vector']):.1f}"),
        ("documents per second (build)", f"{n / statistics.median(seconds['single-vector']):.1f}",
         f"{n / statistics.median(seconds['multi-vector']):.1f}"),
        ("bytes per document: searched index", f"{folder_bytes(sv_dir, 'faiss/**/*') / n:,.0f} (Flat)",
         f"{folder_bytes(mv_dir / 'mv') / n:,.0f} (codes + {meta['nbits']}-bit residuals + IVF)"),
        ("bytes per document: stored vectors", f"{folder_bytes(sv_dir / 'shards', '*.emb.npy') / n:,.0f} (float16)",
         f"{folder_bytes(mv_dir / 'shards', '*.tok.npy') / n:,.0f} (float16 tokens, {meta['tokens_per_doc']} a doc)"),
    ]
    print(md_table(["measure", "single-vector (MiniLM, 384-d)", "multi-vector (MiniLM, 128-d tokens)"], rows))
    print()
    print(md_table(["search (in-process, models loaded, 10 hits)", f"queries/s (median of {args.repeats})"],
                   [(k, f"{v:.1f}") for k, v in speed.items()]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
