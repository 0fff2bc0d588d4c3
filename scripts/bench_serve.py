"""Benchmark: the search service under concurrent load (real HTTP, ``requests`` clients, one process).

Starts :func:`hopscotch.retriever.serving.server.make_server` over a dense index (``--index``), or a BM25
index alone (``--bm25 DIR --corpus FILE``: the HTTP layer's own cost, with a fast searcher), on a free
loopback port and sends ``--requests`` searches from ``--threads`` client threads (each with its own
keep-alive session), the queries taken round-robin from a query file. Reports errors, requests/second,
p50 / p95 / p99 latency and how many queries the batcher put into each search call; repeats
``--repeats`` times, median.

    D=../shared/data/hotpotqa_ircot
    hopscotch index --corpus $D/corpus.jsonl --model minilm --out /tmp/hp/dense --max-length 256
    flock /tmp/hopscotch-heavy.lock .venv/bin/python scripts/bench_serve.py --index /tmp/hp/dense \\
        --queries $D/queries.jsonl
    hopscotch bm25-index --corpus $D/corpus.jsonl --out /tmp/hp/bm25
    .venv/bin/python scripts/bench_serve.py --bm25 /tmp/hp/bm25 --corpus $D/corpus.jsonl --queries $D/queries.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

import numpy as np


def load(server, queries: list[str], total: int, threads: int, hits: int) -> dict:
    import requests

    latencies, errors, lock = [], [], threading.Lock()
    per_thread = total // threads

    def worker(tid: int):
        session = requests.Session()
        for i in range(per_thread):
            q = queries[(tid * per_thread + i) % len(queries)]
            t0 = time.perf_counter()
            try:
                resp = session.get(server.url + "/v1/default/search", params={"query": q, "hits": hits}, timeout=120)
                ok = resp.status_code == 200 and len(resp.json()["candidates"]) == hits
                err = None if ok else f"{resp.status_code}: {resp.text[:200]}"
            except requests.RequestException as exc:
                err = repr(exc)
            with lock:
                latencies.append(time.perf_counter() - t0)
                if err:
                    errors.append(err)

    batcher = server.service.batchers["default"]
    calls0, queries0 = batcher.stats["calls"], batcher.stats["queries"]
    pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    start = time.perf_counter()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    wall = time.perf_counter() - start
    p50, p95, p99 = np.percentile(latencies, [50, 95, 99]) * 1000
    calls = batcher.stats["calls"] - calls0
    return {"requests": len(latencies), "errors": len(errors), "first_errors": errors[:3],
            "requests_per_second": len(latencies) / wall, "p50_ms": p50, "p95_ms": p95, "p99_ms": p99,
            "queries_per_encoder_call": (batcher.stats["queries"] - queries0) / max(calls, 1)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--index", help="dense index folder (hopscotch index)")
    p.add_argument("--bm25", help="instead of --index: a BM25 index folder (hopscotch bm25-index), served alone")
    p.add_argument("--corpus", help="with --bm25: the corpus the documents are read from")
    p.add_argument("--queries", required=True, help="queries file (JSONL or TSV)")
    p.add_argument("--requests", type=int, default=1000)
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--hits", type=int, default=10)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--torch-threads", type=int, default=2)
    p.add_argument("--json", help="write the summary here")
    args = p.parse_args()
    if bool(args.index) == bool(args.bm25) or (args.bm25 and not args.corpus):
        p.error("give --index DIR, or --bm25 DIR with --corpus FILE")

    import torch

    from hopscotch.retriever.io.queries import read_queries
    from hopscotch.retriever.searchers import build_searcher
    from hopscotch.retriever.serving.server import make_server, serve_in_thread

    torch.set_num_threads(args.torch_threads)
    queries = [q.text for q in read_queries(args.queries)]
    if args.bm25:
        searcher = build_searcher("bm25", bm25=args.bm25, corpus=args.corpus)
        what = f"BM25 index {args.bm25} ({len(searcher.index.docids):,} documents)"
    else:
        searcher = build_searcher("dense", index=args.index)
        what = f"{args.index} ({searcher.meta.num_docs:,} documents, model {searcher.meta.model})"
    server = make_server({"default": searcher}, port=0)
    serve_in_thread(server)
    load(server, queries, 2 * args.threads, args.threads, args.hits)  # warm-up
    runs = [load(server, queries, args.requests, args.threads, args.hits) for _ in range(args.repeats)]
    server.shutdown_and_close()
    keys = ("requests_per_second", "p50_ms", "p95_ms", "p99_ms", "queries_per_encoder_call")
    med = {k: float(np.median([r[k] for r in runs])) for k in keys}
    errors = sum(r["errors"] for r in runs)
    print(f"{args.requests} requests x {args.repeats} from {args.threads} threads against {what}, "
          f"hits={args.hits}; median:")
    print(f"errors {errors}; {med['requests_per_second']:.0f} req/s; p50 {med['p50_ms']:.1f} ms, "
          f"p95 {med['p95_ms']:.1f} ms, p99 {med['p99_ms']:.1f} ms; {med['queries_per_encoder_call']:.1f} "
          "queries per search call")
    if args.json:
        Path(args.json).write_text(json.dumps({"median": med, "errors": errors, "runs": runs}, indent=2))
    if errors:
        print("first errors:", runs[0]["first_errors"], file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
