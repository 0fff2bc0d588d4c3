"""Benchmark: what opening a disk BM25 folder costs with its checks (docs/benchmarks.md, "BM25 index checks on
open"), on synthetic folders of the real layout. See :mod:`hopscotch_experiments.benchmarks.bm25_open`.

    .venv/bin/python scripts/bench_bm25_open.py --docs 1000000 --terms 1000000 --postings 54500000   # ~20 s, 450 MB
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from hopscotch_experiments.benchmarks.bm25_open import time_open, write_synthetic_disk_folder


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--docs", type=int, default=1_000_000)
    p.add_argument("--terms", type=int, default=1_000_000)
    p.add_argument("--postings", type=int, default=54_500_000, help="about 54.5 a document on the cost-curve corpus")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--work", help="folder to write the index into (default: a temporary one, removed after)")
    args = p.parse_args()
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="hopscotch-bm25-open."))
    try:
        write_synthetic_disk_folder(work / "index", args.docs, args.terms, args.postings)
        r = time_open(work / "index", args.repeats)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{r['docs']:,} documents, {r['terms']:,} terms, {r['postings']:,} postings (median of {args.repeats}, "
          f"page cache warm): open with its checks {r['open_s']:.3f} s; the checks with every posting read "
          f"{r['whole_postings_s']:.3f} s")


if __name__ == "__main__":
    main()
