"""The agent-retrieval ablation (issue 9): query input variants x models, late fusion, BM25 and the tuned
hybrid, on four dev sets of held-out questions; regenerates the table in docs/benchmarks.md and a plot.

    .venv/bin/python scripts/agent_ablation.py --work /tmp/hopscotch-ablation [--trained /tmp/agent_run/final]
        [--json ablation.json] [--sets hotpotqa,musique,world,tongyi,tongyi_pages] [--no-docs]

Dev sets: :mod:`hopscotch_experiments.agent_data.eval_sets` (test = held-out questions of
:mod:`hopscotch_experiments.agent_data.splits`; the Tongyi set's qrels are pseudo-labels). Everything runs through
the CLI (``hopscotch index``, ``bm25-index``, ``search``, ``tune-fusion``) in-process; indexes and runs are
cached under ``--work`` (delete a file to redo it), so every number can be reproduced with the printed
commands. Tuned on the ``tune`` questions only (each source's dev questions, which training never sees): each
model's default variant (the reasoning variant with the best mean nDCG@10 over the tune slices), the
late-fusion weight ``w`` (one per model, same criterion) and the BM25 + dense fusion (``hopscotch tune-fusion
--dev-qids``, per set and model). Cells: nDCG@10 on test with its 95% CI, and the paired randomisation p
against the same model's query-only row (BM25: against base query-only).

A thin driver: the ablation is :mod:`hopscotch_experiments.ablations.agent_ablation` (its runs
``.ablation_runs``, its table, docs section and plot ``.ablation_report``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from hopscotch_experiments.agent_data.eval_sets import SET_NAMES

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", default="/tmp/hopscotch-ablation", help="cache folder (sets, indexes, runs)")
    parser.add_argument("--trained", help="a trained model folder (e.g. /tmp/agent_run/final)")
    parser.add_argument("--sets", default=",".join(SET_NAMES), help="dev sets to run")
    parser.add_argument("--json", help="write every number here")
    parser.add_argument("--docs", default=str(ROOT / "docs" / "benchmarks.md"), help="markdown file to update")
    parser.add_argument("--plot", default=str(ROOT / "docs" / "agent_ablation.png"), help="PNG plot to write")
    parser.add_argument("--no-docs", action="store_true", help="print only; write neither docs nor plot")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--full-base", action="store_true",
                        help="with --trained: every variant, late fusion and tuning for the base model too (by "
                             "default the base model gets its query-only and `--reasoning` default rows)")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import torch

    from hopscotch_experiments.ablations.ablation_report import plot, render_table, update_section
    from hopscotch_experiments.ablations.agent_ablation import run_ablation
    from hopscotch.retriever.io.common import write_json

    torch.set_num_threads(args.threads)
    models = {"base": "minilm"} | ({"trained": str(Path(args.trained).resolve())} if args.trained else {})
    command = "python scripts/agent_ablation.py" + (" --trained DIR" if args.trained else "")
    result = run_ablation(Path(args.work), [s.strip() for s in args.sets.split(",") if s.strip()], models,
                          full_base=args.full_base)
    result["command"] = command
    section = render_table(result)
    print(section)
    if args.json:
        write_json(args.json, result)
    if not args.no_docs:
        docs = Path(args.docs)
        update_section(docs, section)
        print(f"updated {docs}")
        print(plot(result, Path(args.plot)))
    return 0


if __name__ == "__main__":
    t0 = time.perf_counter()
    code = main()
    print(f"total {time.perf_counter() - t0:.0f}s", file=sys.stderr)
    sys.exit(code)
