"""How fast a cross-encoder reranks on this machine: pairs a second at the pair lengths a recipe may choose.

    .venv/bin/python scripts/bench_cross_encoder.py [--model minilm] [--lengths 256,512] [--pairs 128]
        [--batch-size 32] [--threads 2] [--repeats 2]

Pairs are real agent traffic: each Tongyi-DeepResearch search call of the shared qampari_tongyi steps (its query and
the reasoning before it: thousands of words, cut from the left to the query side) with each of its returned
snippets (doc_snippets.jsonl), so the pairs fill their budget as a reranker's would. For each total length L the
model is built with a query side of L/2 tokens and the document the rest (model.query_max_len = passage_max_len =
L/2; a new, untrained head: speed does not depend on the weights) and scores the same pairs with Hopscotch's
length-sorted batches (``CrossEncoderModel.score``) and with sentence-transformers' ``CrossEncoder.predict`` (its
own character-length sort); the best of ``--repeats``. Prints a markdown table (the one in docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from hopscotch_experiments.benchmarks.common import md_table, shared_data_dir

ROOT = Path(__file__).resolve().parents[1]


def agent_pairs(n: int) -> tuple[list[str], list[str], list[str]]:
    """``(queries, reasonings, documents)`` of the first ``n`` (call, returned snippet) pairs."""
    from hopscotch.retriever.io.common import read_jsonl

    data = shared_data_dir(ROOT) / "qampari_tongyi"
    snippets = {str(row["docid"]): row["text"] for _, row in read_jsonl(data / "doc_snippets.jsonl")}
    queries, reasonings, docs = [], [], []
    for _, step in read_jsonl(data / "agent_search_steps.jsonl"):
        query = step.get("search_query")
        query = query if isinstance(query, str) else " ".join(q for q in query or [] if isinstance(q, str))
        if not query.strip():
            continue  # a call without a query (an invalid one the agent retried)
        for docid in step.get("retrieved_docids") or []:
            if str(docid) in snippets and len(docs) < n:
                queries.append(query)
                reasonings.append(step.get("reasoning") or "")
                docs.append(snippets[str(docid)])
        if len(docs) >= n:
            break
    return queries, reasonings, docs


def main(argv=None) -> list[list]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--lengths", default="256,512", help="pair lengths (tokens), comma-separated")
    parser.add_argument("--pairs", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    import torch

    from hopscotch.retriever.model.cross_encoder import build_cross_encoder_model

    torch.set_num_threads(args.threads)
    queries, reasonings, docs = agent_pairs(args.pairs)
    rows = []
    for length in (int(x) for x in args.lengths.split(",")):
        model = build_cross_encoder_model(args.model, query_max_len=length // 2, passage_max_len=length // 2,
                                          device="cpu")
        sides = model.format_queries(queries, reasonings, reasoning_aware=True)
        tokens = model.pair_lengths(sides, docs)
        ours, theirs = [], []
        for _ in range(args.repeats):
            start = time.perf_counter()
            model.score(sides, docs, batch_size=args.batch_size)
            ours.append(time.perf_counter() - start)
            start = time.perf_counter()
            model.st.predict(list(zip(sides, docs)), batch_size=args.batch_size)
            theirs.append(time.perf_counter() - start)
        rows.append([length, len(docs), round(sum(tokens) / len(tokens)), round(len(docs) / min(ours), 1),
                     round(len(docs) / min(theirs), 1)])
    print(md_table(["pair tokens (max)", "pairs", "mean tokens", "ours pairs/s", "CrossEncoder.predict pairs/s"],
                   rows))
    print(f"\n{args.threads} threads, batch {args.batch_size}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    return rows


if __name__ == "__main__":
    main()
