"""Reasoning-aware BM25's speed against plain BM25 on the same index and queries (queries per second, medians).

    # the dev sets' indexes (the agent ablation's --work)
    .venv/bin/python scripts/bench_bm25_expansion.py --work /tmp/hopscotch-ablation [--sets tongyi_question,hotpotqa]
    # any index folder (e.g. the 1M-document cost-curve corpus's disk index) with real Tongyi calls and their thinking
    .venv/bin/python scripts/bench_bm25_expansion.py --bm25 /tmp/hopscotch-bench-scale/1000000/bm25_disk \
        --calls 200 --shape accumulated [--setting 'NAME=FLAGS' ...]

Settings: plain BM25, the default expansion, the earlier documented raw bags, and each ``--setting`` (the expansion
flags of ``hopscotch search --bm25 --reasoning``). One process; every setting in turn, ``--repeats`` rounds after a
warm-up; median q/s and the ratio to plain in the same rounds. A thin driver of
:mod:`hopscotch_experiments.benchmarks.bm25_expansion`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hopscotch_experiments.benchmarks.bm25_expansion import SETTINGS, measure, table, tongyi_calls
from hopscotch_experiments.benchmarks.common import shared_data_dir

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", default="/tmp/hopscotch-ablation", help="the agent ablation's cache folder")
    parser.add_argument("--sets", default="tongyi_turn,tongyi_question,world_long,hotpotqa")
    parser.add_argument("--bm25", help="an index folder to search instead of the dev sets' (with --calls)")
    parser.add_argument("--calls", type=int, default=200, help="with --bm25: Tongyi calls searched")
    parser.add_argument("--shape", choices=("accumulated", "turn"), default="accumulated",
                        help="with --bm25: the calls' reasoning, all the thinking so far or the call's own turn")
    parser.add_argument("--setting", action="append", default=[], metavar="NAME=FLAGS",
                        help="another expansion to time (its flags as search takes them)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    from hopscotch.retriever.index.bm25 import load_bm25_index
    from hopscotch.retriever.io.queries import read_queries

    settings = dict(SETTINGS)
    for item in args.setting:
        name, _, flags = item.partition("=")
        settings[name.strip()] = flags
    if args.bm25:
        index = load_bm25_index(args.bm25)
        queries = tongyi_calls(shared_data_dir(ROOT) / "qampari_tongyi" / "agent_search_steps.jsonl", args.calls,
                               args.shape)
        print("\n".join(table(measure(index, queries, settings, args.repeats), queries, len(index.docids))))
        return 0
    from hopscotch_experiments.ablations.ablation_runs import build_indexes
    from hopscotch_experiments.agent_data.eval_sets import build_sets

    work = Path(args.work)
    for name, es in build_sets(work, [s.strip() for s in args.sets.split(",") if s.strip()]).items():
        paths = es.write(work / "sets" / name)
        index = load_bm25_index(build_indexes(work, es.index_name or name, es.corpus, {})["bm25"])
        queries = list(read_queries(paths["queries"]))
        print(f"## {name}")
        print("\n".join(table(measure(index, queries, settings, args.repeats), queries, len(index.docids))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
