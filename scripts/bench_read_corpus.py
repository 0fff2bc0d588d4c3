#!/usr/bin/env python
"""Peak memory of streaming a 1,000,000-line corpus JSONL: count it, and cut it into shards.

Each measurement runs in a fresh process; peak RSS comes from ``getrusage(RUSAGE_CHILDREN)``.
Usage: .venv/bin/python scripts/bench_read_corpus.py [--lines 1000000] [--keep FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

from hopscotch_experiments.benchmarks.common import peak_rss_mib

COUNT = """
import sys
from hopscotch.retriever.io.corpus import count_documents
print(count_documents(sys.argv[1]))
"""
SHARD = """
import json, os, sys
from hopscotch.retriever.io.common import atomic_write
from hopscotch.retriever.io.corpus import read_corpus
out, size = sys.argv[2], int(sys.argv[3])
os.makedirs(out, exist_ok=True)
shard, fh, ctx, n = 0, None, None, 0
for i, doc in enumerate(read_corpus(sys.argv[1])):
    if i % size == 0:
        if ctx: ctx.__exit__(None, None, None)
        ctx = atomic_write(os.path.join(out, f"part_{shard:05d}.jsonl")); fh = ctx.__enter__(); shard += 1
    fh.write(json.dumps(doc.to_beir()) + "\\n"); n += 1
if ctx: ctx.__exit__(None, None, None)
print(n, shard)
"""


def make_corpus(path: str, lines: int) -> None:
    rng = random.Random(0)
    words = [f"w{i}" for i in range(5000)]
    with open(path, "w") as fh:
        for i in range(lines):
            text = " ".join(rng.choices(words, k=rng.randint(40, 120)))
            fh.write(json.dumps({"_id": f"d{i}", "title": f"title {i}", "text": text}) + "\n")


def run_measured(code: str, *args: str) -> tuple[float, float, str]:
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True)
    elapsed = time.perf_counter() - t
    return elapsed, peak_rss_mib(children=True), proc.stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--keep", help="reuse / keep the generated corpus at this path")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="hopscotch-bench-")
    corpus = args.keep or os.path.join(tmp, "corpus.jsonl")
    if not os.path.exists(corpus):
        make_corpus(corpus, args.lines)
    size_mb = os.path.getsize(corpus) / 2**20
    # RUSAGE_CHILDREN is a max over all children so far: measure the lighter job first
    t_count, rss_count, out_count = run_measured(COUNT, corpus)
    t_shard, rss_shard, out_shard = run_measured(SHARD, corpus, os.path.join(tmp, "shards"), "100000")
    print(f"corpus: {args.lines:,} lines, {size_mb:.0f} MiB")
    print(f"count : {out_count} docs in {t_count:.1f}s, peak RSS {rss_count:.0f} MiB")
    print(f"shard : {out_shard.split()[0]} docs -> {out_shard.split()[1]} shards in {t_shard:.1f}s, "
          f"peak RSS (max of both runs) {rss_shard:.0f} MiB")
    ok = max(rss_count, rss_shard) < 1024
    print("PASS: under 1 GiB" if ok else "FAIL: over 1 GiB")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
