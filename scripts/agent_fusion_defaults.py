"""Choosing the CLI's fusion defaults by the selection rule (real agent calls decide, every other set guards), over
the lists ``search --bm25 --index --reasoning`` fuses.

    .venv/bin/python scripts/agent_fusion_defaults.py --work /tmp/hopscotch-ablation [--split tune] [--top 12]
        [--reasoning --trained DIR]   # the lists `search --reasoning` fuses: reasoning-aware BM25 + dense defaults

Reads the runs ``scripts/agent_ablation.py --trained DIR`` cached under ``--work`` (``runs/<set>.bm25.trec``,
``runs/<set>.trained.default.trec``) and fuses them as ``hopscotch search --fusion`` does (depth 100, k 100)
with every setting of ``tune-fusion``'s grid: interpolation (min-max and z-score) at BM25 weights 0, 0.1, ...,
1, RRF, and adaptive fusion (a BM25 weight per query from the two lists' standouts and agreement,
:mod:`hopscotch.retriever.searchers.adaptive_fusion`). The rule (:mod:`hopscotch.retriever.evaluation.selection`):
the best mean tune nDCG@10 over the objective sets (the Tongyi calls in a harness's shape) among the settings that
lose significantly (p < 0.05, delta < -0.01) to neither list on any guard set. ``--split test`` only reports (the
defaults are never chosen on it): the pick against each set's two lists, paired tests.

A thin driver: the grid, the table and the report are :mod:`hopscotch_experiments.ablations.fusion_defaults`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hopscotch_experiments.agent_data.eval_sets import GUARDS, OBJECTIVE


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", default="/tmp/hopscotch-ablation", help="the ablation's cache folder")
    parser.add_argument("--split", choices=("tune", "test"), default="tune")
    parser.add_argument("--sets", default=",".join(OBJECTIVE + GUARDS),
                        help="dev sets (each must be in the ablation's cache)")
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
