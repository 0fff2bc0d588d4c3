"""Benchmark: the disk BM25 backend against tantivy (a Lucene-class engine in Rust, block-WAND top-k) on the same terms.

Why the disk backend is ours and not an engine's (docs/benchmarks.md, "BM25 backends"): this script indexes the
same corpora with tantivy's Python bindings, fed the terms of our analyzer (space-joined, tantivy's whitespace
tokenizer, so both engines see identical terms), and times the same queries at k = 100 in one process: tantivy on
1 thread, tantivy on 2 Python threads (its search holds the GIL), the disk backend on 1 and 2 threads. With
``--scores`` it also compares the scores with the disk backend's over a qrels set (tantivy's BM25 is Lucene's: k1
1.2, b 0.75, document lengths quantised to one byte, and the (k1 + 1) factor Lucene dropped in 8.0; ours uses
exact lengths), and each engine's nDCG@10.

tantivy is not a dependency of Hopscotch: ``pip install tantivy`` first.

    python scripts/bench_bm25_tantivy.py --index /tmp/hopscotch-bench-scale/n100000 /tmp/hopscotch-bench-scale/n1000000
    python scripts/bench_bm25_tantivy.py --scores ../shared/data/hotpotqa_ircot --work /tmp/tv-hotpot
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import threading
import time
from pathlib import Path

K = 100


def build_tantivy(corpus: Path, out: Path, analyzer) -> tuple[object, float]:
    """A tantivy index of ``corpus``'s documents as our analyzer's terms (docid stored); (index, seconds)."""
    import tantivy

    from hopscotch.retriever.io.corpus import read_corpus
    from hopscotch.retriever.model.query_template import format_document

    sb = tantivy.SchemaBuilder()
    sb.add_text_field("body", stored=False, tokenizer_name="whitespace", index_option="freq")
    sb.add_text_field("docid", stored=True, tokenizer_name="raw")
    schema = sb.build()
    if (out / "meta.json").is_file():
        return tantivy.Index.open(str(out)), float("nan")
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    index = tantivy.Index(schema, path=str(out))
    t0 = time.perf_counter()
    writer = index.writer(heap_size=500_000_000, num_threads=1)
    for doc in read_corpus(corpus, unique=False):
        writer.add_document(tantivy.Document(body=" ".join(analyzer.terms(format_document(doc.title, doc.text))),
                                             docid=doc.docid))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    return index, time.perf_counter() - t0


def tantivy_queries(index, analyzer, texts: list[str]) -> list:
    import tantivy

    schema, q = index.schema, tantivy.Query
    out = []
    for text in texts:
        counts = analyzer.counts(text)
        parts = [(tantivy.Occur.Should, q.boost_query(q.term_query(schema, "body", t), float(n)) if n > 1
                  else q.term_query(schema, "body", t)) for t, n in counts.items()]
        out.append(q.boolean_query(parts))
    return out


def median_seconds(fn, repeats: int = 3) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def speed(folder: Path, queries: list[str], work: Path) -> dict:
    from hopscotch.retriever.index.bm25 import load_bm25_index

    ours = load_bm25_index(folder / "bm25_disk")
    index, build_s = build_tantivy(folder / "corpus.jsonl", work / f"tantivy_{folder.name}", ours.analyzer)
    searcher, tq = index.searcher(), tantivy_queries(index, ours.analyzer, queries)

    def tantivy_threads(n: int):
        step = -(-len(tq) // n)
        threads = [threading.Thread(target=lambda part=tq[i:i + step]: [searcher.search(x, K) for x in part])
                   for i in range(0, len(tq), step)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    row = {"documents": ours.num_docs, "tantivy build s": build_s}
    row["tantivy 1 thread"] = len(tq) / median_seconds(lambda: [searcher.search(x, K) for x in tq])
    row["tantivy 2 threads"] = len(tq) / median_seconds(lambda: tantivy_threads(2))
    for n in (1, 2):
        row[f"disk {n} thread{'s' * (n > 1)}"] = len(queries) / median_seconds(lambda n=n: ours.search(queries, K,
                                                                                                       threads=n))
    return row


def scores(data: Path, work: Path) -> None:
    """Ours (k1 1.2, b 0.75) against tantivy on a qrels set: score agreement and nDCG@10."""
    import numpy as np

    from hopscotch.retriever.evaluation.metrics import evaluate
    from hopscotch.retriever.index.bm25 import load_bm25_index
    from hopscotch.retriever.index.bm25.disk_build import DiskBuildOptions, build_disk_index
    from hopscotch.retriever.io.corpus import read_corpus
    from hopscotch.retriever.io.qrels import read_qrels
    from hopscotch.retriever.io.queries import read_queries

    folder = work / "disk_k1.2"
    if not (folder / "hopscotch_bm25.json").is_file():
        build_disk_index(read_corpus(data / "corpus.jsonl", unique=False), folder, "tantivy-comparison",
                         DiskBuildOptions(k1=1.2, b=0.75, show_progress=False), log=lambda line: None)
    ours = load_bm25_index(folder)
    index, _ = build_tantivy(data / "corpus.jsonl", work / "tantivy", ours.analyzer)
    searcher = index.searcher()
    queries = list(read_queries(data / "queries.jsonl"))
    texts = [q.text for q in queries]
    mine = ours.search(texts, K)
    theirs = []
    for x in tantivy_queries(index, ours.analyzer, texts):
        theirs.append([(searcher.doc(addr)["docid"][0], s) for s, addr in searcher.search(x, K).hits])
    rel, overlap = [], []
    for a, b in zip(mine, theirs):
        sa = dict(a)
        # tantivy keeps the (k1 + 1) factor of classic BM25 in the numerator (Lucene dropped it in 8.0; ranking
        # alike): compared with it divided out
        rel += [abs(s / 2.2 - sa[d]) / sa[d] for d, s in b if d in sa and sa[d] > 0]
        overlap.append(len({d for d, _ in a[:10]} & {d for d, _ in b[:10]}) / 10)
    qrels = read_qrels(data / "qrels.tsv")
    for name, hits in (("ours (exact lengths)", mine), ("tantivy (one-byte lengths)", theirs)):
        run = {q.qid: {d: float(s) for d, s in h} for q, h in zip(queries, hits)}
        print(f"{name}: nDCG@10 {evaluate(run, qrels, ['ndcg@10']).mean['ndcg@10']:.4f}")
    print(f"{len(queries)} queries: top-10 overlap {np.mean(overlap):.3f}; score difference on shared documents (tantivy's / (k1 + 1)): "
          f"median {np.median(rel):.2%}, 95th percentile {np.percentile(rel, 95):.2%}, max {np.max(rel):.2%}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--index", nargs="*", default=[], help="bench_scale size folders (nN/ with corpus.jsonl, bm25_disk/)")
    p.add_argument("--queries", default="/tmp/hopscotch-bench-scale/queries.jsonl")
    p.add_argument("--scores", help="a folder with corpus.jsonl, queries.jsonl, qrels.tsv")
    p.add_argument("--work", default="/tmp/hopscotch-bench-tantivy")
    args = p.parse_args()
    from hopscotch.retriever.io.queries import read_queries

    work = Path(args.work)
    if args.index:
        queries = [q.text for q in read_queries(args.queries)]
        rows = [speed(Path(f), queries, work) for f in args.index]
        print(f"{len(queries)} queries, k={K}, q/s (median of 3)")
        print("| " + " | ".join(rows[0]) + " |\n|" + "---|" * len(rows[0]))
        for r in rows:
            print("| " + " | ".join(f"{v:,.0f}" if isinstance(v, (int, float)) and v == v else "-" for v in r.values())
                  + " |")
        if len(rows) > 1:
            for key in ("tantivy 1 thread", "disk 1 thread", "disk 2 threads"):
                print(f"{key}: q/s falls {rows[-2][key] / rows[-1][key]:.1f}x from {rows[-2]['documents']:,} to "
                      f"{rows[-1]['documents']:,} documents")
    if args.scores:
        scores(Path(args.scores), work / "scores")


if __name__ == "__main__":
    main()
