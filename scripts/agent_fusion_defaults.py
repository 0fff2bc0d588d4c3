"""Choosing the CLI's fusion defaults by a rule that never loses (issue 22): the maximin setting over the agent
dev sets' tune questions, BM25 + the trained model's ``search --reasoning`` defaults.

    .venv/bin/python scripts/agent_fusion_defaults.py --work /tmp/hopscotch-ablation [--split tune] [--top 12]
        [--reasoning --trained DIR]   # the lists `search --reasoning` fuses: reasoning-aware BM25 + dense defaults

Reads the runs ``scripts/agent_ablation.py --trained DIR`` cached under ``--work`` (``runs/<set>.bm25.trec``,
``runs/<set>.trained.default.trec``) and fuses them as ``hopscotch search --fusion`` does (depth 100, k 100)
with every setting of ``tune-fusion``'s grid: interpolation (min-max and z-score) at BM25 weights 0, 0.1, ...,
1, RRF, and adaptive fusion (a BM25 weight per query from the two lists' standouts and agreement,
:mod:`hopscotch.retriever.searchers.adaptive_fusion`). For each setting and set: its nDCG@10 minus the
better component's (the better of BM25 and dense *on that set*). The rule: the default is the setting whose
worst per-set delta is largest (:func:`~hopscotch.retriever.searchers.fusion_tuning.maximin`), not the best
mean, because a mean over sets where the dense model is the stronger half trusts the weaker list on traffic
where BM25 is. Every set votes: the pseudo-qrel Tongyi sets favour the agent's dense retriever, which is
exactly the list a maximin default must not lose to there, and the sets with exact or utility labels are
the ones where BM25 can be the stronger half. ``--split test`` only reports (the defaults are never chosen on
it), with the paired test of each default against each set's better component.

A thin driver: the grid, the table and the report are :mod:`hopscotch_experiments.ablations.fusion_defaults`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hopscotch_experiments.agent_data.eval_sets import SET_NAMES


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", default="/tmp/hopscotch-ablation", help="the ablation's cache folder")
    parser.add_argument("--split", choices=("tune", "test"), default="tune")
    parser.add_argument("--sets", default=",".join(SET_NAMES), help="dev sets (each must be in the ablation's cache)")
    parser.add_argument("--top", type=int, default=12, help="rows to print (the defaults are always printed)")
    parser.add_argument("--reasoning", action="store_true",
                        help="fuse what `search --bm25 --index --reasoning` fuses: reasoning-aware BM25 and the trained "
                             "model's --reasoning defaults at today's defaults (runs/<set>.bm25r.<tag>.trec and "
                             "runs/<set>.trained.default.<tag>.trec of the ablation; --trained names the model)")
    parser.add_argument("--trained", help="with --reasoning: the trained model folder the ablation ran")
    args = parser.parse_args(argv)
    from hopscotch_experiments.ablations.fusion_defaults import report

    sets = [s.strip() for s in args.sets.split(",") if s.strip()]
    runs = {}
    if args.reasoning:
        from hopscotch_experiments.ablations.agent_ablation import defaults_tag, expansion_tag

        if not args.trained:
            parser.error("--reasoning needs --trained DIR (its recorded defaults name the dense runs)")
        runs = {"sparse_run": f"bm25r.{expansion_tag()}",
                "dense_run": f"trained.default.{defaults_tag(str(Path(args.trained).resolve()))}"}
    for line in report(Path(args.work), args.split, sets, args.top, **runs):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
