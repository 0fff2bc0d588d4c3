"""``hopscotch search``: BM25, dense or hybrid retrieval for a query file, written as a TREC run.

    hopscotch search --queries PATH --out RUN [--bm25 DIR] [--index DIR [--model M]] [--reasoning]
                     [--instruction TEXT] [--k K] [--fusion rrf|interp] [--alpha A] [--rrf-k 60]

With ``--reasoning`` the dense encoder sees ``{instruction}Reasoning: {reasoning or 'Empty'}\\n\\nQuery:
{query}`` built from each query's ``reasoning`` field; without it, ``{instruction}{query}``. BM25 always
matches the query text. With both ``--bm25`` and ``--index`` the lists are fused (``--fusion``, default rrf).
"""

from __future__ import annotations

import sys
import time


def register(sub) -> None:
    p = sub.add_parser("search", help="retrieve for a query file (BM25, dense or hybrid) into a TREC run",
                       description="Retrieve the top-k documents for every query with BM25, a dense index or "
                                   "both fused, and write a TREC run.")
    p.add_argument("--queries", required=True, help="queries JSONL (with optional 'reasoning') or TSV")
    p.add_argument("--out", required=True, help="TREC run file to write")
    p.add_argument("--bm25", help="BM25 index folder (hopscotch bm25-index)")
    p.add_argument("--index", help="dense index folder (hopscotch index)")
    p.add_argument("--model", help="query encoder (default: the model recorded in --index)")
    p.add_argument("--reasoning", action="store_true", help="encode queries reasoning-aware from their "
                                                            "'reasoning' field")
    p.add_argument("--instruction", help="prefix of every encoded query (default: a trained model's own "
                                         "instruction, else none)")
    p.add_argument("--k", type=int, default=100, help="documents per query")
    p.add_argument("--fusion", choices=["rrf", "interp"], help="how BM25 and dense lists are fused (default rrf)")
    p.add_argument("--alpha", type=float, default=1.0, help="interp: weight of the normalised BM25 score "
                                                            "(score = alpha * bm25 + dense)")
    p.add_argument("--rrf-k", type=float, default=60.0, help="rrf: the constant k in 1 / (k + rank)")
    p.add_argument("--depth", type=int, default=1000, help="hybrid: candidates from each list before fusing")
    p.add_argument("--nprobe", type=int, help="IVF lists probed per query")
    p.add_argument("--ef-search", type=int, help="HNSW search breadth")
    p.add_argument("--refine", type=int, default=1, help="re-score k*R approximate hits exactly from the shards")
    p.add_argument("--faiss", dest="faiss_name", help="which FAISS index of --index (default: the last built)")
    p.add_argument("--batch-size", type=int, default=256, help="queries encoded and searched per step")
    p.add_argument("--tag", default="hopscotch", help="run tag (6th TREC column)")
    p.set_defaults(func=run)


def build_from_args(args):
    """The searcher the flags describe (shared with ``hopscotch serve``)."""
    from hopscotch.retriever.errors import UsageError
    from hopscotch.retriever.searchers import build_searcher

    if not args.bm25 and not args.index:
        raise UsageError("give --bm25 DIR, --index DIR, or both (hybrid)")
    if args.model and not args.index:
        raise UsageError("--model encodes queries for a dense index: add --index DIR")
    kind = "hybrid" if args.bm25 and args.index else ("bm25" if args.bm25 else "dense")
    if kind != "hybrid" and getattr(args, "fusion", None):
        raise UsageError("--fusion needs both --bm25 and --index")
    return build_searcher(kind, bm25=args.bm25, index=args.index, model=args.model,
                          fusion=getattr(args, "fusion", None) or "rrf", alpha=args.alpha, rrf_k=args.rrf_k,
                          depth=getattr(args, "depth", 1000), instruction=args.instruction, nprobe=args.nprobe,
                          ef_search=args.ef_search, refine=args.refine, faiss_name=args.faiss_name)


def run(args) -> int:
    from tqdm.auto import tqdm

    from hopscotch.retriever.errors import UsageError
    from hopscotch.retriever.io.common import atomic_write
    from hopscotch.retriever.io.queries import read_queries
    from hopscotch.retriever.io.runs import ranked
    from hopscotch.retriever.searchers.base import iter_search

    if args.k <= 0 or args.batch_size <= 0:
        raise UsageError("--k and --batch-size must be positive")
    queries = list(read_queries(args.queries))
    if not queries:
        raise UsageError(f"{args.queries}: no queries")
    if args.reasoning and not any(q.reasoning for q in queries):
        print(f"hopscotch search: note: no query in {args.queries} has a 'reasoning' field; every query is "
              "encoded with 'Reasoning: Empty'", file=sys.stderr)
    searcher = build_from_args(args)
    meta = getattr(getattr(searcher, "dense", searcher), "meta", None)
    if meta is not None and meta.reasoning_aware and not args.reasoning:
        print(f"hopscotch search: note: {args.index} was built for reasoning-aware queries; add --reasoning "
              "to use the template", file=sys.stderr)
    t0 = time.perf_counter()
    with atomic_write(args.out) as fh, tqdm(total=len(queries), desc=f"search ({searcher.name})",
                                            unit="query") as bar:
        for qid, hits in iter_search(searcher, queries, args.k, args.reasoning, args.batch_size):
            for rank, (docid, score) in enumerate(ranked(dict(hits)), start=1):
                fh.write(f"{qid} Q0 {docid} {rank} {score:.6f} {args.tag}\n")
            bar.update(1)
    print(f"{len(queries)} queries searched ({searcher.name}) in {time.perf_counter() - t0:.1f}s; "
          f"run written to {args.out}")
    return 0
