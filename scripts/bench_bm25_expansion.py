"""Reasoning-aware BM25's speed against plain BM25 on the same index and queries (queries per second, medians).

    .venv/bin/python scripts/bench_bm25_expansion.py --work /tmp/hopscotch-ablation [--sets tongyi_question,hotpotqa]
        [--repeats 5]

For each dev set (its BM25 index from the agent ablation's ``--work``, built if missing): every query searched at
k = 100 plainly (``hopscotch search --bm25``) and expanded with its reasoning at the defaults (``--reasoning``),
``--repeats`` times each, alternating; prints the median q/s of each, the ratio, the mean words of reasoning
and the part of the expanded query's time spent choosing the reasoning text. One process, one thread
(bm25s's own retrieval is single-threaded here); the work is the searcher's ``search_batch``, as the CLI calls it.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", default="/tmp/hopscotch-ablation", help="the agent ablation's cache folder")
    parser.add_argument("--sets", default="tongyi_question,tongyi_pages_question,world_long,hotpotqa")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    from hopscotch_experiments.agent_data.eval_sets import build_sets
    from hopscotch_experiments.ablations.ablation_runs import build_indexes
    from hopscotch.retriever.io.queries import read_queries
    from hopscotch.retriever.model.query_input import ReasoningContext
    from hopscotch.retriever.searchers.bm25 import BM25Searcher
    from hopscotch.retriever.searchers.bm25_expansion import DEFAULT_BM25_EXPANSION

    work = Path(args.work)
    print(f"reasoning-aware BM25 defaults: {DEFAULT_BM25_EXPANSION.describe()}; k = 100; {args.repeats} repeats")
    print("| set | queries | docs | reasoning words (mean) | plain q/s | --reasoning q/s | ratio | text choice share |")
    print("|---|---|---|---|---|---|---|---|")
    for name, es in build_sets(work, [s.strip() for s in args.sets.split(",") if s.strip()]).items():
        paths = es.write(work / "sets" / name)
        searcher = BM25Searcher(build_indexes(work, es.index_name or name, es.corpus, {})["bm25"])
        queries = list(read_queries(paths["queries"]))
        texts, contexts = [q.text for q in queries], [ReasoningContext.of(q) for q in queries]
        times = {"plain": [], "reasoning": []}
        for _ in range(args.repeats):
            for mode in times:
                t0 = time.perf_counter()
                searcher.search_batch(texts, 100, contexts, reasoning_aware=mode == "reasoning")
                times[mode].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for q, c in zip(texts, contexts):
            DEFAULT_BM25_EXPANSION.text_parts(q, c)
        choice = time.perf_counter() - t0
        qps = {m: len(queries) / statistics.median(v) for m, v in times.items()}
        words = sum(len(str(c or "").split()) for c in contexts) / len(contexts)
        print(f"| {name} | {len(queries)} | {len(searcher.index.docids):,} | {words:,.0f} | {qps['plain']:,.0f} | "
              f"{qps['reasoning']:,.0f} | {qps['reasoning'] / qps['plain']:.2f} | "
              f"{choice / statistics.median(times['reasoning']):.0%} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
