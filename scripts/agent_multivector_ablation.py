"""Late interaction on the agent dev sets (issue 23): multi-vector rows beside BM25 and the single-vector model.

    .venv/bin/python scripts/agent_multivector_ablation.py --work /tmp/hopscotch-ablation --trained RUN/final \\
        --mv MV_RUN/final [--peer PEER/final] [--sets ...] [--json out.json] [--no-docs]

``--work`` is ``scripts/agent_ablation.py``'s cache folder (its dev sets, BM25 indexes and single-vector runs are
reused, or built when missing). Rows, each through the CLI in-process (``hopscotch index`` / ``search``):

* the multi-vector model (``--mv``, ``scripts/train_agent_retriever.sh --multi-vector``): its full index
  (PLAID-style, ``hopscotch index --model MV``) searched query-only and with ``--reasoning``; reranking BM25's top
  100 (``--rerank-model``) query-only, with ``--reasoning`` and with late fusion of the two (``--rerank-query-mix
  w``, w tuned on the tune questions); reranking the single-vector default hybrid's top 100; and its full index
  fused with BM25 (``--fusion`` not given);
* the untrained multi-vector MiniLM (random 384->128 projection) reranking BM25's top 100;
* the sentence-transformers peer (``--peer``, ``scripts/st_multivector_peer.py``) reranking BM25's top 100.

Runs cover the test questions (late fusion also the tune ones). Default sets: those whose labels no retriever
produced, HotpotQA and MuSiQue (``tongyi`` and ``tongyi_pages`` are pseudo-qrels of a query-only retriever, and
``tongyi_pages``' pages are cut at the model's 160 tokens: ``--sets`` adds them).
Rerank caches are seeded from each model's full index (``MultiVectorReranker.seed_cache``: the same vectors), so
no document is encoded twice. Cells: nDCG@10 on test with its 95% CI and the paired randomisation p against the
single-vector model's ``--reasoning`` defaults. Index and search wall times are recorded (2 CPU cores).

A thin driver: the runs, the table and the docs section are
:mod:`hopscotch_experiments.ablations.multivector_ablation`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", default="/tmp/hopscotch-ablation")
    parser.add_argument("--trained", required=True, help="the single-vector agent model (train_agent_retriever.sh)")
    parser.add_argument("--mv", required=True, help="the multi-vector agent model (--multi-vector)")
    parser.add_argument("--peer", help="the sentence-transformers peer (scripts/st_multivector_peer.py)")
    parser.add_argument("--sets", default="hotpotqa,musique,world,world_long,tongyi_utility",
                        help="dev sets (default: those whose labels no retriever produced, and HotpotQA/MuSiQue)")
    parser.add_argument("--no-base", action="store_true", help="skip the untrained multi-vector row")
    parser.add_argument("--json")
    parser.add_argument("--docs", default=str(ROOT / "docs" / "benchmarks.md"))
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from hopscotch_experiments.ablations.ablation_report import update_section
    from hopscotch_experiments.ablations.multivector_ablation import END, START, base_model, run_ablation
    from hopscotch.retriever.io.common import write_json

    work = Path(args.work)
    models = {"mv": str(Path(args.mv).resolve())} | ({} if args.no_base else {"mv_base": base_model(work)})
    if args.peer:
        models["peer"] = str(Path(args.peer).resolve())
    result = run_ablation(work, [s for s in args.sets.split(",") if s], models, str(Path(args.trained).resolve()))
    print(result["section"])
    if args.json:
        write_json(args.json, {k: result[k] for k in ("table", "by_w", "best_w", "times")})
    if not args.no_docs:
        update_section(Path(args.docs), result["section"], START, END)
    return 0


if __name__ == "__main__":
    sys.exit(main())
