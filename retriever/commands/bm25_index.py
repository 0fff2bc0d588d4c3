"""``hopscotch bm25-index --corpus PATH --out DIR``: build a bm25s index (English stemming + stopwords)."""

from __future__ import annotations

import time
from pathlib import Path

#: what a BEIR corpus folder's reader takes from it (io.corpus.corpus_files); another folder is read whole
CORPUS_FILES = ("corpus.jsonl", "corpus.jsonl.gz", "corpus.parquet")

from hopscotch.retriever.commands.flag_types import non_negative_float, unit_interval


def register(sub) -> None:
    from hopscotch.retriever.commands.arg_groups import add_output_flags

    p = sub.add_parser("bm25-index", help="build a BM25 index over a corpus",
                       description="Build a BM25 (bm25s, Lucene scoring) index over a corpus and save it.")
    p.add_argument("--corpus", required=True, help="corpus JSONL/parquet file, BEIR folder or shard folder")
    add_output_flags(p, "index folder to write", required=True, what="index folder")
    p.add_argument("--k1", type=non_negative_float, default=1.5, help="BM25 term-frequency saturation k1 (>= 0)")
    p.add_argument("--b", type=unit_interval, default=0.75, help="BM25 length normalisation b (0..1)")
    p.add_argument("--stemmer", default="english", help="PyStemmer language, or 'none'")
    p.add_argument("--stopwords", default="en", help="bm25s stopword list, or 'none'")
    p.set_defaults(func=run)


def run(args) -> int:
    from hopscotch.retriever.index.bm25 import BM25Index
    from hopscotch.retriever.io.atomic import atomic_folder
    from hopscotch.retriever.io.corpus import read_corpus
    from hopscotch.retriever.io.outputs import Output, check_outputs, named_inputs

    guard = check_outputs(args, outputs=[Output(Path(args.out), folder=True)],
                          inputs=named_inputs(args.corpus, CORPUS_FILES))
    t0 = time.perf_counter()
    index = BM25Index.build(read_corpus(args.corpus), k1=args.k1, b=args.b,
                            stemmer=None if args.stemmer == "none" else args.stemmer,
                            stopwords=None if args.stopwords == "none" else args.stopwords)
    with atomic_folder(args.out) as build:  # killed: only a .NAME.*.tmp folder, removed by the next run
        index.save(build)
    guard.finish()
    print(f"bm25 index of {len(index.docids):,} documents written to {args.out} "
          f"in {time.perf_counter() - t0:.1f}s")
    return 0
