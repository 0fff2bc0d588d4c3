"""A reranker's first-stage weight (``--rerank-first-weight``) chosen by the selection rule, and the reranked
pipeline's depth/quality table; regenerates its section of docs/benchmarks.md (one per reranker kind).

    bash scripts/train_agent_retriever.sh --reranker /tmp/rr                  # a cross-encoder
    .venv/bin/python scripts/agent_rerank_weight.py --model /tmp/rr/final --label ce --work WORK [--depth 20]
    RECIPE=recipes/minilm_agent_multivector.yaml bash scripts/train_agent_retriever.sh /tmp/mv   # a multi-vector one
    .venv/bin/python scripts/agent_rerank_weight.py --model /tmp/mv/final --label mv --depth 100 --work WORK

Reranks reasoning-aware BM25's top ``--depth`` on every dev set once (W = 0: the reranker's own scores, cached under
WORK), derives every weight and shallower depth from those scores, picks the weight on the tune questions by the
selection rule and prints the test table. A thin driver of :mod:`hopscotch_experiments.ablations.rerank_weight`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from hopscotch_experiments.ablations.ablation_report import add_report_flags
from hopscotch_experiments.ablations.rerank_weight import SETS, WEIGHTS


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="a multi-vector or cross-encoder model folder")
    parser.add_argument("--depth", type=int, default=20, help="candidates reranked (the table's deepest row)")
    parser.add_argument("--label", default="ce", help="the model's name in WORK's cache files")
    parser.add_argument("--work", default="/tmp/hopscotch-ablation", help="indexes and runs (a cache)")
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--weights", default=",".join(f"{w:g}" for w in WEIGHTS))
    add_report_flags(parser)
    args = parser.parse_args(argv)
    if not Path(args.model).is_dir():
        parser.error(f"--model {args.model}: no such model folder")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("WANDB_MODE", "disabled")
    import torch

    from hopscotch_experiments.ablations.ablation_report import publish
    from hopscotch_experiments.ablations.rerank_weight import choose, markers, measure, render

    torch.set_num_threads(args.threads)
    measured = measure(str(Path(args.model).resolve()), Path(args.work),
                       [s.strip() for s in args.sets.split(",") if s.strip()], args.label, args.depth)
    selection, _ = choose(measured, [float(w) for w in args.weights.split(",")])
    section = render(measured, selection, f"python scripts/agent_rerank_weight.py --model M --label {args.label} "
                                          f"--depth {args.depth} --work WORK")
    publish(section, {"selection": selection.record(depth=args.depth), "kind": measured["kind"]}, args.json,
            None if args.no_docs else args.docs, *markers(measured["kind"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
