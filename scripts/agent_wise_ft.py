"""Choosing ``train.wise_ft_alpha`` (issue 9): a sweep of WiSE-FT mixes of one fine-tune with its starting
model over the agent dev sets, picked on the tune questions; regenerates its section of docs/benchmarks.md.

    bash scripts/train_agent_retriever.sh /tmp/agent_ft train.wise_ft_alpha=1     # the un-mixed fine-tune
    .venv/bin/python scripts/agent_wise_ft.py --finetuned /tmp/agent_ft/final --work /tmp/hopscotch-ablation \\
        [--alphas 0,0.3,0.5,0.7,1] [--sets hotpotqa,musique,world,tongyi,tongyi_pages] [--no-docs]

Each mix is what training with ``train.wise_ft_alpha=A`` saves (``model/weight_merge.py``, the same code),
written to ``WORK/wise_ft/a<A>``; it is indexed and searched as ``hopscotch index/search --model M
--reasoning`` (the model's recorded defaults) and ``--query-input query`` with the ablation's cached sets
(``scripts/agent_ablation.py``; delete a file under WORK to redo it). The chosen alpha has the best mean
nDCG@10 of the defaults over the sets' tune questions (ties: the larger alpha, the lesser change); test
questions only report it, each cell with its 95% CI and the paired randomisation p against alpha 1.

A thin driver: the sweep and its docs section are :mod:`hopscotch_experiments.ablations.wise_ft`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from hopscotch_experiments.ablations.ablation_report import add_report_flags


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--finetuned", required=True, help="a fine-tune trained with train.wise_ft_alpha=1")
    parser.add_argument("--start", default="minilm", help="the model it started from (default: bundled MiniLM)")
    parser.add_argument("--alphas", default="0,0.3,0.5,0.7,1", help="comma-separated alphas in [0, 1]")
    parser.add_argument("--work", default="/tmp/hopscotch-ablation", help="cache folder (sets, indexes, runs)")
    parser.add_argument("--sets", default="hotpotqa,musique,world,tongyi,tongyi_pages", help="dev sets to run")
    add_report_flags(parser, threads_help=None)
    args = parser.parse_args(argv)
    alphas = sorted({float(a) for a in args.alphas.split(",") if a.strip()})
    if not alphas or not all(0 <= a <= 1 for a in alphas):
        parser.error(f"--alphas: expected numbers in [0, 1], got {args.alphas!r}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    from hopscotch_experiments.ablations.ablation_report import update_section
    from hopscotch_experiments.ablations.wise_ft import END, START, render, sweep, to_json
    from hopscotch.retriever.io.common import write_json

    torch.set_num_threads(args.threads)
    result = sweep(Path(args.finetuned).resolve(), args.start, alphas, Path(args.work),
                   [s.strip() for s in args.sets.split(",") if s.strip()])
    section = render(result)
    print(section)
    print(f"chosen: train.wise_ft_alpha={result['chosen']:g}")
    if args.json:
        write_json(args.json, to_json(result))
    if not args.no_docs:
        docs = Path(args.docs)
        update_section(docs, section, START, END)
        print(f"updated {docs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
