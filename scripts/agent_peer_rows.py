"""Our single-vector agent recipe against the sentence-transformers peer on the same tuples (issue 34, item 1), on the
question-level dev sets; regenerates its section of docs/benchmarks.md.

    DATA_ONLY=1 bash scripts/train_agent_retriever.sh /tmp/tu/run                       # tuples, dev sets, clean/
    .venv/bin/python scripts/agent_trajectory_use.py --data /tmp/tu/run/data --work /tmp/tu/work   # ours (cached)
    .venv/bin/python scripts/st_single_vector_peer.py --data /tmp/tu/run/data --out /tmp/sv/peer   # the peer
    .venv/bin/python scripts/agent_peer_rows.py --ours /tmp/tu/work/models/trajectory-use/final \\
        --peer /tmp/sv/peer/final --work /tmp/tu/work

Indexes and searches tongyi_question, tongyi_pages_question and HotpotQA with both models (query only and
``--reasoning``) and the untrained MiniLM, tune and test questions, with paired tests of ours against the peer.
Everything is cached under WORK. A thin driver of :mod:`hopscotch_experiments.ablations.peer_rows`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ours", required=True, help="our trained model folder")
    parser.add_argument("--ours-label", default="trajectory-use",
                        help="its name in WORK's cache files (another name for another model of ours)")
    parser.add_argument("--peer", required=True, help="the peer's model folder (OUT/final of st_single_vector_peer.py)")
    parser.add_argument("--work", default="/tmp/hopscotch-trajectory-use", help="indexes and runs (a cache)")
    parser.add_argument("--sets", default="tongyi_question,tongyi_pages_question,hotpotqa")
    parser.add_argument("--docs", default=str(ROOT / "docs" / "benchmarks.md"), help="markdown file to update")
    parser.add_argument("--no-docs", action="store_true", help="print only")
    parser.add_argument("--json", help="write every number here")
    parser.add_argument("--threads", type=int, default=2, help="torch threads of the searches")
    args = parser.parse_args(argv)
    for flag, path in (("--ours", args.ours), ("--peer", args.peer)):
        if not Path(path).is_dir():
            parser.error(f"{flag} {path}: no such model folder")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("WANDB_MODE", "disabled")
    import torch

    from hopscotch_experiments.ablations.ablation_report import publish
    from hopscotch_experiments.ablations.peer_rows import END, START, measure_peer_rows, render, summarize, to_json

    torch.set_num_threads(args.threads)
    names = [s.strip() for s in args.sets.split(",") if s.strip()]
    summary = summarize(measure_peer_rows(str(Path(args.ours).resolve()), str(Path(args.peer).resolve()),
                                          Path(args.work), names, args.ours_label))
    section = render(summary, "python scripts/agent_peer_rows.py --ours OURS --peer PEER --work WORK")
    publish(section, to_json(summary), args.json, None if args.no_docs else args.docs, START, END)
    return 0


if __name__ == "__main__":
    sys.exit(main())
