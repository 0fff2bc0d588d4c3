"""Reasoning-aware BM25's defaults by the selection rule (real agent calls decide, every other set guards).

    .venv/bin/python scripts/bm25_expansion_grid.py --work /tmp/hopscotch-ablation [--sets a,b,...] [--json OUT]

Prints the rule's report (objective and every guard's delta and p for the pick and the runner-up), the grid on
the tune questions, and the pick and runner-up against plain BM25 on every set's test questions. A thin driver of
:mod:`hopscotch_experiments.ablations.bm25_expansion_grid`; the BM25 indexes are the agent ablation's (``--work``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hopscotch_experiments.ablations.bm25_expansion_grid import report
from hopscotch_experiments.agent_data.eval_sets import SET_NAMES
from hopscotch.retriever.io.common import write_json


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", default="/tmp/hopscotch-ablation", help="cache folder (sets, indexes, runs)")
    parser.add_argument("--sets", default=",".join(SET_NAMES), help="dev sets (call-level ones are reported only)")
    parser.add_argument("--json", help="write the pick's record and the report here")
    args = parser.parse_args(argv)
    lines, record = report(Path(args.work), [s.strip() for s in args.sets.split(",") if s.strip()])
    print("\n".join(lines))
    if args.json:
        write_json(args.json, {"pick": record, "lines": lines})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
