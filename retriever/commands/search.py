"""``hopscotch search``: BM25, dense or hybrid retrieval for a query file, written as a TREC run.

    hopscotch search --queries PATH --out RUN [--bm25 DIR] [--index DIR [--model M]] [--reasoning]
                     [--query-input VARIANT] [--instruction TEXT] [--k K] [--fusion interp|rrf|adaptive] [--alpha A]
    hopscotch search --queries PATH --out RUN --url http://HOST:PORT [--name NAME] [--token T]
    hopscotch search --queries PATH --out RUN --bm25-url http://HOST/v1/NAME --index DIR [--bm25-token T]
                     [--remote-timeout S] ...     (hybrid whose BM25 half is a Pyserini-compatible endpoint)
    ... [--rerank-model M [--rerank-depth N] [--rerank-cache DIR] [--rerank-query-mix W] [--rerank-windows N]]

With ``--reasoning`` the dense encoder sees ``{instruction}Reasoning: {text or 'Empty'}\\n\\nQuery:
{query}``, ``text`` built from each query's context fields (``reasoning``, ``current_reasoning``,
``prior_queries``, ``prior_results``) by the query input variant: the trained model's own (recorded in its
``hopscotch_config.json``), else ``reasoning``; ``--query-input VARIANT`` overrides it (and implies
``--reasoning``; ``--query-input query`` is the plain query). Without either, ``{instruction}{query}``. With
``--reasoning`` BM25 expands the query with terms of its reasoning (``--bm25-reasoning``, ``--bm25-query-weight``,
``--bm25-terms``, ``--bm25-reasoning-weight``, ``--bm25-k3``: :mod:`hopscotch.retriever.searchers.bm25_expansion`);
without it BM25 matches the query text alone. With both ``--bm25`` and ``--index`` the lists are fused
(``--fusion``). Every reasoning default was chosen by the selection rule of
:mod:`hopscotch.retriever.evaluation.selection` (real agent calls decide, other sets guard).
``--bm25-url`` in place of ``--bm25`` takes the BM25 list from a Pyserini-compatible REST endpoint (the cmass ClimbMix
service, ``hopscotch serve``; :mod:`hopscotch.retriever.searchers.remote_bm25`).
The searcher flags belong to the backends (:mod:`hopscotch.retriever.searchers.registry`); the backend is
``--searcher-type`` or the one the flags select. ``--rerank-model`` (a multi-vector model; every backend takes
it, as ``serve`` and ``replay`` do) reranks the first stage's top ``--rerank-depth`` by MaxSim
(:mod:`hopscotch.retriever.searchers.rerank`). The run is written by
:class:`hopscotch.retriever.io.runs.RunWriter`.
"""

from __future__ import annotations

import sys
import time

from hopscotch.retriever.commands.arg_groups import add_k_flag, add_output_flags, add_reasoning_flag, arg_paths
from hopscotch.retriever.commands.flag_types import clamp_k, positive_int
from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.outputs import check_outputs
from hopscotch.retriever.io.progress import progress
from hopscotch.retriever.io.queries import read_queries
from hopscotch.retriever.io.runs import RunWriter
from hopscotch.retriever.searchers import add_searcher_arguments, iter_search, searcher_from_args
from hopscotch.retriever.searchers.harness import read_template


def register(sub) -> None:
    p = sub.add_parser("search", help="retrieve for a query file (BM25, dense or hybrid) into a TREC run",
                       description="Retrieve the top-k documents for every query with BM25, a dense index or "
                                   "both fused (or a remote hopscotch serve), and write a TREC run.")
    p.add_argument("--queries", required=True, help="queries JSONL (with optional 'reasoning') or TSV")
    add_output_flags(p, "TREC run file to write", required=True, what="run file")
    add_reasoning_flag(p, "encode queries reasoning-aware from their 'reasoning' (and other context) fields, in "
                          "the model's query input variant (see --query-input)")
    add_k_flag(p, default=100, help="documents per query (more than the index holds: all of them, with a note)")
    p.add_argument("--batch-size", type=positive_int, default=256, help="queries encoded and searched per step")
    p.add_argument("--tag", default="hopscotch", help="run tag (6th TREC column)")
    # --searcher-type, --bm25, --index, --model, --fusion, ... (each backend's own), --rerank-model, --rerank-depth, ...
    add_searcher_arguments(p)
    p.set_defaults(func=run)


def run(args) -> int:
    if args.k <= 0 or args.batch_size <= 0:
        raise UsageError("--k and --batch-size must be positive")
    guard = check_outputs(vars(args), outputs=[args.out], ignore=("batch_size", "rerank_cache"),
                          inputs=arg_paths(args, "queries", "bm25", "corpus", "index", "model", "fusion_config",
                                           "rerank_model"))
    queries = [read_template(q) for q in read_queries(args.queries)]  # a query in AgentIR's template: its reasoning
    if not queries:
        raise UsageError(f"{args.queries}: no queries")
    if getattr(args, "query_input", None):
        args.reasoning = True  # the dense searcher makes 'query' plain
    if args.reasoning and not any(q.reasoning or q.current_reasoning or q.prior_queries or q.prior_results
                                  for q in queries):
        print(f"hopscotch search: note: no query in {args.queries} has a 'reasoning' (or other context) field; "
              "every query is encoded with 'Reasoning: Empty'", file=sys.stderr)
    if args.reasoning:
        queries = [q.with_reasoning() for q in queries]
    # without --reasoning only a query written in the reasoning template carries one (read back above)
    searcher = searcher_from_args(args, reasoning=any(q.reasoning_aware for q in queries))  # with --rerank-model: the first stage's top --rerank-depth reranked
    k = clamp_k("search", args.k, searcher)
    vector = searcher.vector_stage  # under a reranker, the first stage's; a hybrid's vector half
    if args.reasoning and vector is not None:
        print(f"hopscotch search: query input: {vector.query_input}", file=sys.stderr)
    if vector is not None and vector.meta.reasoning_aware and not args.reasoning:
        print(f"hopscotch search: note: {args.index} was built for reasoning-aware queries; add --reasoning "
              "to use the template", file=sys.stderr)
    stage = searcher.rerank_stage
    if stage is not None:
        fused = "" if stage.late_fusion is None else f", query mix {stage.late_fusion:g}"
        depth = max(k, stage.depth) if stage.widens_with_k else min(k, stage.depth)
        print(f"hopscotch search: reranking the top {depth} {stage.describe()} with {args.rerank_model} "
              f"(query input {stage.query_input}{fused})", file=sys.stderr)
    t0 = time.perf_counter()
    with RunWriter(args.out, tag=args.tag) as out, progress(total=len(queries), desc=f"search ({searcher.name})",
                                                            unit="query") as bar:
        for qid, hits in iter_search(searcher, queries, k, args.batch_size):
            out.write(qid, hits)
            bar.update(1)
    guard.finish()
    print(f"{len(queries)} queries searched ({searcher.name}) in {time.perf_counter() - t0:.1f}s; "
          f"run written to {args.out}")
    return 0
