"""``hopscotch audit ann-fidelity``: recall of an index's ANN against exact search on the real query vectors.

    hopscotch audit ann-fidelity --index DIR --queries Q.jsonl [--model M] [--reasoning] [--query-input V]
                                 [--faiss NAME] [--nprobe N] [--ef-search N] [--refine R] [--k 10,100]
                                 [--max-gap 0.05] [--min-recall 0.9] [--strict] [--max-queries N]
                                 [--controls N] [--seed S] [--report PATH]

Recall@k with 95% CIs on the real queries, sampled documents (the control) and random unit vectors:
:mod:`hopscotch.retriever.audit.ann_fidelity`. A warning (exit 0; exit 2 with ``--strict``) when the real
queries' recall is below the documents' by more than ``--max-gap`` or below ``--min-recall``.
"""

from __future__ import annotations

import argparse
import sys

from hopscotch.retriever.audit.ann_fidelity import AnnOptions, audit_ann_fidelity
from hopscotch.retriever.commands.arg_groups import add_k_flag, add_reasoning_flag
from hopscotch.retriever.commands.audit.common import finish
from hopscotch.retriever.commands.flag_types import positive_int, seed_int, unit_interval
from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.index.layout import IndexMeta

HELP = ("recall@k of an index's ANN against exact search on the real query vectors, beside document-derived and random "
        "vectors")
DESCRIPTION = ("Measure how much of the exact inner-product top-k the index's FAISS index finds for the real "
               "(reasoning-aware) query vectors of a queries file, for sampled document vectors (the control) and for "
               "random unit vectors.")


DEFAULT_KS = (10, 100)


def cutoffs(text: str) -> tuple[int, ...]:
    """``type=`` of ``--k``: comma-separated cutoffs >= 1 (``10,100``)."""
    try:
        ks = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers >= 1, got {text!r}") from None
    if not ks or ks[0] < 1:
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers >= 1, got {text!r}")
    return ks


def add_flags(p) -> None:
    p.add_argument("--index", required=True, help="a dense index folder (hopscotch index)")
    p.add_argument("--queries", required=True, help="queries JSONL (with optional 'reasoning') or TSV")
    p.add_argument("--model", help="query encoder (default: the model recorded in --index)")
    add_reasoning_flag(p, "encode the queries reasoning-aware, as 'hopscotch search --reasoning' does")
    p.add_argument("--query-input", metavar="VARIANT", help="the query input variant (implies --reasoning)")
    p.add_argument("--faiss", "--faiss-name", dest="faiss_name",
                   help="which FAISS index of --index (default: its default)")
    p.add_argument("--nprobe", type=positive_int, help="IVF lists probed per query")
    p.add_argument("--ef-search", type=positive_int, help="HNSW search breadth")
    p.add_argument("--refine", type=positive_int,
                   help="re-score k*R approximate hits exactly (default: the index's recorded one, else 1)")
    add_k_flag(p, type=cutoffs, default=DEFAULT_KS, help="recall cutoffs (default 10,100; each below the index's "
                                                        "documents)")
    p.add_argument("--max-gap", type=unit_interval, default=0.05,
                   help="the largest shortfall of real-query recall below the documents' that passes")
    p.add_argument("--min-recall", type=unit_interval, default=0.9,
                   help="the lowest real-query recall that passes (default 0.9)")
    p.add_argument("--strict", action="store_true", help="fail (exit 2) instead of warning")
    p.add_argument("--max-queries", type=positive_int, default=1000, help="real queries sampled when there are more")
    p.add_argument("--controls", type=positive_int,
                   help="documents and random vectors per control set (default: as many as real queries)")
    p.add_argument("--seed", type=seed_int, default=0, help="sampling seed")


def run(args) -> int:
    meta = IndexMeta.load(args.index)
    beyond = [k for k in args.k if k >= meta.num_docs]
    if beyond and args.k != DEFAULT_KS:  # a cutoff asked for that the index cannot measure
        raise UsageError(f"--k {beyond[0]}: {args.index} holds {meta.num_docs:,} documents, and recall@k against "
                         f"exact search needs k below that (at most {meta.num_docs - 1:,})")
    if beyond:
        print(f"hopscotch audit ann-fidelity: note: {args.index} holds {meta.num_docs:,} documents: recall@"
              f"{beyond[0]} is measured at {meta.num_docs - 1:,}", file=sys.stderr)
    opts = AnnOptions(faiss_name=args.faiss_name, nprobe=args.nprobe, ef_search=args.ef_search, refine=args.refine,
                      ks=args.k, max_gap=args.max_gap, min_recall=args.min_recall, strict=args.strict,
                      max_queries=args.max_queries, controls=args.controls, seed=args.seed)
    report = audit_ann_fidelity(args.index, args.queries, model=args.model, reasoning=args.reasoning, options=opts,
                                query_input=args.query_input)
    return finish(report, args)
