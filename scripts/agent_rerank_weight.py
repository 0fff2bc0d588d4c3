"""A reranker's first-stage weight (``--rerank-first-weight``) on the question-level dev sets, the multi-vector
reranker's (issue 34 item 2) or a cross-encoder's; regenerates its section of docs/benchmarks.md (one per kind).

    DATA_ONLY=1 bash scripts/train_agent_retriever.sh /tmp/tu/run             # tuples, dev sets, clean/
    RECIPE=recipes/minilm_agent_multivector.yaml bash scripts/train_agent_retriever.sh /tmp/mv   # the model
    .venv/bin/python scripts/agent_rerank_weight.py --model /tmp/mv/final --work /tmp/tu/work
    bash scripts/train_agent_retriever.sh --reranker /tmp/rr                  # a cross-encoder
    .venv/bin/python scripts/agent_rerank_weight.py --model /tmp/rr/final --label ce --work /tmp/tu/work [--depth 20]

Reranks reasoning-aware BM25's top 100 of tongyi_question, tongyi_pages_question and HotpotQA with the model at each
weight, tune and test questions, and picks the weight on tune. Everything is cached under WORK. A thin driver of
:mod:`hopscotch_experiments.ablations.rerank_weight`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from hopscotch_experiments.ablations.ablation_report import add_report_flags


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="a multi-vector or cross-encoder model folder")
    parser.add_argument("--depth", type=int, help="candidates reranked (default: 100 by MaxSim, a cross-encoder's own)")
    parser.add_argument("--label", default="mv", help="the model's name in WORK's cache files")
    parser.add_argument("--work", default="/tmp/hopscotch-trajectory-use", help="indexes and runs (a cache)")
    parser.add_argument("--sets", default="tongyi_question,tongyi_pages_question,hotpotqa")
    parser.add_argument("--weights", default="0,0.25,0.5,0.75")
    add_report_flags(parser)
    args = parser.parse_args(argv)
    if not Path(args.model).is_dir():
        parser.error(f"--model {args.model}: no such model folder")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("WANDB_MODE", "disabled")
    import torch

    from hopscotch_experiments.ablations.ablation_report import publish
    from hopscotch_experiments.ablations.rerank_weight import markers, measure, render, summarize, to_json

    torch.set_num_threads(args.threads)
    weights = [float(w) for w in args.weights.split(",")]
    measured = measure(str(Path(args.model).resolve()), Path(args.work),
                       [s.strip() for s in args.sets.split(",") if s.strip()], weights, args.label, args.depth)
    summary = summarize(measured)
    section = render(summary, "python scripts/agent_rerank_weight.py --model M --work WORK")
    publish(section, to_json(summary), args.json, None if args.no_docs else args.docs, *markers(summary["kind"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
