"""Trajectory-use labels against today's Tongyi labels (issue 34), on the question-level dev sets; regenerates its
section of docs/benchmarks.md.

    DATA_ONLY=1 bash scripts/train_agent_retriever.sh /tmp/tu/run          # tuples + dev sets + decontamination
    .venv/bin/python scripts/agent_trajectory_use.py --data /tmp/tu/run/data --work /tmp/tu/work \\
        [train.max_steps=100 train.threads=1 ...] [--no-docs] [--json F]

Trains ``recipes/minilm_agent.yaml`` twice on ``DATA/clean`` (the Tongyi file: top3 = ``tongyi_tuples.jsonl``,
trajectory-use = ``tongyi_use_tuples.jsonl``; everything else, the seed and the KEY=VALUE overrides the same) into
``WORK/models/<arm>``, then indexes and searches tongyi_question, tongyi_pages_question and HotpotQA with each model
(query only and ``--reasoning``) and the untrained MiniLM (query only), tune and test questions, with paired tests.
Everything is cached under WORK (delete a file to redo it). A thin driver of
:mod:`hopscotch_experiments.ablations.trajectory_use`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from hopscotch_experiments.ablations.ablation_report import add_report_flags

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True,
                        help="OUT/data of DATA_ONLY=1 bash scripts/train_agent_retriever.sh OUT")
    parser.add_argument("--work", default="/tmp/hopscotch-trajectory-use", help="models, indexes, runs (a cache)")
    parser.add_argument("--recipe", default=str(ROOT / "recipes" / "minilm_agent.yaml"))
    parser.add_argument("--sets", default="tongyi_question,tongyi_pages_question,hotpotqa")
    add_report_flags(parser)
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="recipe overrides, the same for both arms")
    args = parser.parse_args(argv)
    missing = [p for p in ("clean", "eval/specs.txt") if not (Path(args.data) / p).exists()]
    if missing:
        parser.error(f"--data {args.data}: no {missing[0]} (run DATA_ONLY=1 bash scripts/train_agent_retriever.sh OUT "
                     "and pass OUT/data)")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("WANDB_MODE", "disabled")
    import torch

    from hopscotch_experiments.ablations.ablation_report import publish
    from hopscotch_experiments.ablations.trajectory_use import ARMS, END, START, measure, render, summarize, to_json
    from hopscotch_experiments.ablations.trajectory_use import train_arm

    work, data = Path(args.work), Path(args.data)
    models = {"base": "minilm"}
    for arm in ARMS:
        models[arm] = str(train_arm(data, arm, work / "models" / arm, args.recipe, args.overrides).resolve())
    torch.set_num_threads(args.threads)
    summary = summarize(measure(models, work, [s.strip() for s in args.sets.split(",") if s.strip()]))
    command = ("python scripts/agent_trajectory_use.py --data OUT/data --work WORK "
               + " ".join(args.overrides)).strip()
    section = render(summary, command)
    publish(section, to_json(summary), args.json, None if args.no_docs else args.docs, START, END)
    return 0


if __name__ == "__main__":
    sys.exit(main())
