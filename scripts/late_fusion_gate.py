"""Late fusion by reasoning length (issue 9): nDCG@10 of ``w * q_variant + (1 - w) * q_query`` for every w,
per dev set and per bucket of reasoning-context words, on the tune and test questions of the ablation's sets.

    .venv/bin/python scripts/late_fusion_gate.py --work /tmp/hopscotch-ablation --model /tmp/agent_run/final \
        [--variant reasoning_tail:128] [--sets hotpotqa,musique,world,tongyi]

Needs the ablation's sets and trained indexes under ``--work`` (``scripts/agent_ablation.py --trained``
builds them). The words counted are the whole reasoning context (all the thinking so far), what the
dense searcher's ``--query-mix-max-words`` gate counts. Prints the tables recorded in docs/benchmarks.md
("Long reasoning: late fusion with a word gate").

A thin driver: the scores and the tables are :mod:`hopscotch_experiments.ablations.late_fusion_gate`.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/hopscotch-ablation"))
    ap.add_argument("--model", required=True, help="the trained model the ablation indexed with")
    ap.add_argument("--variant", default="reasoning_tail:128")
    ap.add_argument("--sets", default="hotpotqa,musique,world,tongyi")
    args = ap.parse_args(argv)
    from hopscotch_experiments.ablations.late_fusion_gate import report

    for line in report(args.work, args.sets.split(","), args.model, args.variant):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
