"""``hopscotch audit perturbation``: does the reasoning-aware searcher use the reasoning?

    hopscotch audit perturbation --queries Q.jsonl --qrels QRELS [--qids FILE] --index DIR [--model M] [--bm25 DIR]
                                 [--query-input VARIANT] [--query-mix W] ... [--metric ndcg@10] [--k K]
                                 [--truncate-words N] [--seed S] [--significance A] [--report PATH]

The same reasoning-aware search calls with the reasoning as given, dropped, truncated, its sentences shuffled and
swapped for another question's; any searcher the registry builds (dense, hybrid, a multi-vector index, reranked).
Conditions, test and verdict: :mod:`hopscotch.retriever.audit.perturbation`; a model that ignores the reasoning is
a ``warning`` (exit 0).
"""

from __future__ import annotations

import sys

from hopscotch.retriever.audit.perturbation import audit_perturbation
from hopscotch.retriever.commands.arg_groups import add_k_flag
from hopscotch.retriever.commands.audit.common import finish
from hopscotch.retriever.commands.flag_types import cutoff_int, metric_name, permutations_int, positive_int, seed_int
from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.qrels import read_qrels
from hopscotch.retriever.io.queries import read_queries
from hopscotch.retriever.searchers import add_searcher_arguments, searcher_from_args
from hopscotch.retriever.searchers.fusion_tuning import read_qid_list

HELP = "search with the reasoning dropped, truncated, shuffled and swapped: does the model use it?"
DESCRIPTION = ("Run the same reasoning-aware searches under five conditions of the reasoning and report the metric per "
               "condition with its 95% CI and the paired delta against the reasoning as given.")


def add_flags(p) -> None:
    p.add_argument("--queries", required=True, help="queries JSONL with 'reasoning' (and other context) fields")
    p.add_argument("--qrels", required=True, help="qrels (TSV, TREC or JSONL)")
    p.add_argument("--qids", metavar="FILE", help="search only these query ids (first field of each line)")
    p.add_argument("--metric", type=metric_name, default="ndcg@10", help="metric compared (default ndcg@10)")
    add_k_flag(p, type=cutoff_int, help="documents per query (default: the metric's cutoff)")
    p.add_argument("--truncate-words", type=positive_int, metavar="N",
                   help="the truncated condition keeps the last N words (default: the last half of each reasoning)")
    p.add_argument("--seed", type=seed_int, default=13, help="seed of the shuffles and of the swap cycle")
    p.add_argument("--significance", type=float, default=0.05, metavar="A",
                   help="significance level of the swap test (default 0.05)")
    p.add_argument("--permutations", type=permutations_int, default=10_000, help="randomisation test permutations")
    p.add_argument("--batch-size", type=positive_int, default=64, help="queries per search call")
    add_searcher_arguments(p)


def run(args) -> int:
    if not 0 < args.significance < 1:
        raise UsageError(f"--significance must lie strictly between 0 and 1, got {args.significance}")
    queries = list(read_queries(args.queries))
    if args.qids:
        wanted = set(read_qid_list(args.qids))
        queries = [q for q in queries if q.qid in wanted]
        if not queries:
            raise UsageError(f"--qids {args.qids}: none of its ids is in {args.queries}")
    qrels = read_qrels(args.qrels)
    searcher = searcher_from_args(args)

    def log(line: str) -> None:
        print(f"audit perturbation: {line}", file=sys.stderr)

    report = audit_perturbation(searcher, queries, qrels, metric=args.metric, k=args.k, seed=args.seed,
                                truncate_words=args.truncate_words, alpha=args.significance,
                                permutations=args.permutations, batch_size=args.batch_size, log=log)
    return finish(report, args)
