"""Our multi-vector recipe against the sentence-transformers multi-vector peer on the same tuples, reranking BM25's
top 100 on the question-level dev sets; regenerates its section of docs/benchmarks.md.

    DATA_ONLY=1 bash scripts/train_agent_retriever.sh /tmp/tu/run                                    # tuples, dev sets
    RECIPE=recipes/minilm_agent_multivector.yaml bash scripts/train_agent_retriever.sh /tmp/mv         # ours
    .venv/bin/python scripts/st_multivector_peer.py --data /tmp/tu/run/data --out /tmp/mvp --query-input reasoning
    .venv/bin/python scripts/agent_mv_peer_rows.py --ours /tmp/mv/final --peer /tmp/mvp/final --work /tmp/tu/work

Query-only and ``--reasoning`` rows, at the reranker's default first-stage weight and as a pure MaxSim reorder, tune
and test questions, with paired tests of ours against the peer. Everything is cached under WORK. A thin driver of
:mod:`hopscotch_experiments.ablations.mv_peer_rows`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

def main(argv=None) -> int:
    from hopscotch_experiments.ablations.ablation_report import peer_rows_args

    args = peer_rows_args(__doc__.split("\n")[0], "the peer's model folder (OUT/final of st_multivector_peer.py)", argv,
                          ours_label="mv")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("WANDB_MODE", "disabled")
    import torch

    from hopscotch_experiments.ablations.ablation_report import publish
    from hopscotch_experiments.ablations.mv_peer_rows import END, PEER, START, as_ours, measure, render, summarize, to_json

    torch.set_num_threads(args.threads)
    measured = measure({args.ours_label: args.ours, PEER: args.peer}, Path(args.work), args.sets)
    summary = summarize(as_ours(measured, args.ours_label))
    section = render(summary, "python scripts/agent_mv_peer_rows.py --ours OURS --peer PEER --work WORK")
    publish(section, to_json(summary), args.json, None if args.no_docs else args.docs, START, END)
    return 0


if __name__ == "__main__":
    sys.exit(main())
