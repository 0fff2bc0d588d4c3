"""Benchmark: where ``hopscotch search --bm25`` loses to bare bm25s (issue 37, item 3), step by step, on documents
and questions of the cost-curve benchmark (docs/benchmarks.md, "BM25 backends"). See
:mod:`hopscotch_experiments.benchmarks.bm25_cli`.

    .venv/bin/python scripts/bench_bm25_cli.py --docs 20000 --queries 200     # ~1 min
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hopscotch_experiments.benchmarks.bm25_cli import report, run
from hopscotch_experiments.benchmarks.common import shared_data_dir
from hopscotch_experiments.benchmarks.scale.data import DEFAULT_QUERY_SOURCES, DEFAULT_SOURCES

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--docs", type=int, default=20_000)
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--k", type=int, default=100)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--work", default="/tmp/hopscotch-bench-bm25-cli")
    args = p.parse_args()
    data = shared_data_dir(ROOT)
    result = run(Path(args.work), [data / s for s in DEFAULT_SOURCES], [data / s for s in DEFAULT_QUERY_SOURCES],
                 args.docs, args.queries, args.k, args.repeats)
    print(f"{args.docs:,} documents, {result['n']} queries, k={args.k}, median of {args.repeats}")
    print(report(result))


if __name__ == "__main__":
    main()
