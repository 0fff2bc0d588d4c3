"""Reasoning-aware BM25's defaults by maximin over the dev sets no retriever bounded (tune questions only).

    .venv/bin/python scripts/bm25_expansion_grid.py --work /tmp/hopscotch-ablation [--sets a,b,...] [--json OUT]

Prints the grid (reasoning text x query weight) ranked by its worst per-set tune gain over plain BM25, the
maximin pick, and the pick on the held-out test questions (paired tests, q/s). A thin driver of
:mod:`hopscotch_experiments.ablations.bm25_expansion_grid`; the BM25 indexes are the agent ablation's (``--work``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hopscotch_experiments.agent_data.eval_sets import SET_NAMES


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", default="/tmp/hopscotch-ablation", help="cache folder (sets, indexes)")
    parser.add_argument("--sets", default=",".join(SET_NAMES), help="dev sets (call-level ones are reported only)")
    parser.add_argument("--json", help="write the pick here")
    parser.add_argument("--variants", help="comma-separated reasoning variants (default: the module's grid)")
    parser.add_argument("--weights", help="comma-separated query weights (default: the module's grid)")
    args = parser.parse_args(argv)
    from hopscotch_experiments.ablations.bm25_expansion_grid import QUERY_WEIGHTS, VARIANTS, report
    from hopscotch.retriever.io.common import write_json

    variants = [v.strip() for v in args.variants.split(",")] if args.variants else VARIANTS
    weights = [float(w) for w in args.weights.split(",")] if args.weights else QUERY_WEIGHTS
    lines, pick = report(Path(args.work), [s.strip() for s in args.sets.split(",") if s.strip()], variants, weights)
    print("\n".join(lines))
    if args.json:
        write_json(args.json, {"pick": pick, "lines": lines})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
