"""``hopscotch bm25-index --corpus PATH --out DIR``: build a bm25s index (English stemming + stopwords)."""

from __future__ import annotations

import time


def register(sub) -> None:
    p = sub.add_parser("bm25-index", help="build a BM25 index over a corpus",
                       description="Build a BM25 (bm25s, Lucene scoring) index over a corpus and save it.")
    p.add_argument("--corpus", required=True, help="corpus JSONL/parquet file, BEIR folder or shard folder")
    p.add_argument("--out", required=True, help="index folder to write")
    p.add_argument("--k1", type=float, default=1.5, help="BM25 term-frequency saturation k1")
    p.add_argument("--b", type=float, default=0.75, help="BM25 length normalisation b")
    p.add_argument("--stemmer", default="english", help="PyStemmer language, or 'none'")
    p.add_argument("--stopwords", default="en", help="bm25s stopword list, or 'none'")
    p.set_defaults(func=run)


def run(args) -> int:
    from hopscotch.retriever.index.bm25 import BM25Index
    from hopscotch.retriever.io.corpus import read_corpus

    t0 = time.perf_counter()
    index = BM25Index.build(read_corpus(args.corpus), k1=args.k1, b=args.b,
                            stemmer=None if args.stemmer == "none" else args.stemmer,
                            stopwords=None if args.stopwords == "none" else args.stopwords)
    index.save(args.out)
    print(f"bm25 index of {len(index.docids):,} documents written to {args.out} "
          f"in {time.perf_counter() - t0:.1f}s")
    return 0
