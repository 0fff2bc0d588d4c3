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

import os
import sys
from pathlib import Path

def main(argv=None) -> int:
    from hopscotch_experiments.ablations.ablation_report import peer_rows_args

    args = peer_rows_args(__doc__.split("\n")[0], "the peer's model folder (OUT/final of st_single_vector_peer.py)",
                          argv, ours_label="trajectory-use")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("WANDB_MODE", "disabled")
    import torch

    from hopscotch_experiments.ablations.ablation_report import publish
    from hopscotch_experiments.ablations.peer_rows import END, START, measure_peer_rows, render, summarize, to_json

    torch.set_num_threads(args.threads)
    summary = summarize(measure_peer_rows(args.ours, args.peer, Path(args.work), args.sets, args.ours_label))
    section = render(summary, "python scripts/agent_peer_rows.py --ours OURS --peer PEER --work WORK")
    publish(section, to_json(summary), args.json, None if args.no_docs else args.docs, START, END)
    return 0


if __name__ == "__main__":
    sys.exit(main())
