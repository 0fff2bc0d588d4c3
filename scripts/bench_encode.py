"""Benchmark: the sharded encoder against ``SentenceTransformer.encode`` (same model, texts, batch size).

Both run in fresh processes, interleaved, ``--repeats`` times each; the table gives the median
documents/second of the timed call and of the whole process (imports and model load included):

* ``hopscotch``: :func:`hopscotch.retriever.index.encode.encode_corpus` from the corpus file to finished float16 shards
  (reading, encoding, writing shards, docid lookup and manifest all inside the timed call; the model is
  loaded before it, as the peer's is);
* ``sentence-transformers``: ``model.encode(texts, batch_size=B, normalize_embeddings=True)`` on texts
  already in memory (the same ``title + " " + text`` strings), so the peer is timed on less work.

The embeddings of the two are compared at the end (cosine of every pair).

    flock /tmp/hopscotch-heavy.lock .venv/bin/python scripts/bench_encode.py        # ~5 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

from hopscotch_experiments.benchmarks.common import add_run_options, md_table, run_json, shared_data_dir

ROOT = Path(__file__).resolve().parents[1]


def run_hopscotch(args) -> dict:
    from hopscotch.retriever.index.encode import EncodeOptions, encode_corpus
    from hopscotch.retriever.model.dense_encoder import DenseEncoder

    out = Path(args.work) / "index"
    shutil.rmtree(out, ignore_errors=True)
    encoder = DenseEncoder(args.model, max_length=args.max_length, batch_size=args.batch_size, device="cpu")
    t0 = time.perf_counter()
    result = encode_corpus(args.corpus_file, args.model, out,
                           EncodeOptions(shard_size=args.shard_size, batch_size=args.batch_size,
                                         max_length=args.max_length, show_progress=False,
                                         precision=args.precision), encoder=encoder)
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "docs": result.meta.num_docs}


def run_st(args) -> dict:
    from hopscotch.retriever.io.corpus import read_corpus
    from hopscotch.retriever.model.loading import load_sentence_transformer
    from hopscotch.retriever.model.query_template import format_document

    texts = [format_document(d.title, d.text) for d in read_corpus(args.corpus_file)]
    model = load_sentence_transformer(args.model, device="cpu", max_length=args.max_length)
    import torch

    t0 = time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):  # the same autocast as ours
        emb = model.encode(texts, batch_size=args.batch_size, normalize_embeddings=True, convert_to_numpy=True,
                           show_progress_bar=False)
    seconds = time.perf_counter() - t0
    np.save(Path(args.work) / "st.npy", emb)
    return {"seconds": seconds, "docs": len(texts)}


def child(args) -> None:
    import torch

    torch.set_num_threads(args.threads)
    fn = run_hopscotch if args.which == "hopscotch" else run_st
    print(json.dumps(fn(args)))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", default=str(shared_data_dir(ROOT) / "hotpotqa_ircot" / "corpus.jsonl"))
    p.add_argument("--docs", type=int, default=1000, help="first N documents of the corpus")
    p.add_argument("--model", default="minilm")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--max-length", type=int, default=256)
    p.add_argument("--shard-size", type=int, default=500)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                   help="bf16: both encoders under CPU bfloat16 autocast (ours: --precision bf16)")
    add_run_options(p, "/tmp/hopscotch-bench-encode")
    p.add_argument("--which", choices=["hopscotch", "st"], help=argparse.SUPPRESS)
    p.add_argument("--corpus-file", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.which:
        return child(args)

    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    corpus_file = work / "corpus.jsonl"
    with open(args.corpus) as src, open(corpus_file, "w") as dst:
        for i, line in enumerate(src):
            if i >= args.docs:
                break
            dst.write(line)
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    base = [sys.executable, __file__, "--corpus-file", str(corpus_file), "--model", args.model, "--batch-size",
            str(args.batch_size), "--max-length", str(args.max_length), "--shard-size", str(args.shard_size),
            "--threads", str(args.threads), "--work", str(work), "--precision", args.precision]
    timings = {"hopscotch": [], "st": []}
    for rep in range(args.repeats):
        for which in ("hopscotch", "st") if rep % 2 == 0 else ("st", "hopscotch"):
            out, wall = run_json(base + ["--which", which], env=env, what=which)
            timings[which].append({**out, "process_seconds": wall})
            print(f"[{which} #{rep}] {out['docs'] / out['seconds']:.1f} docs/s in the call, "
                  f"{wall:.1f}s whole process", file=sys.stderr, flush=True)

    from hopscotch.retriever.index.layout import IndexMeta, load_shard_embeddings

    meta = IndexMeta.load(work / "index")
    ours = np.concatenate([np.asarray(load_shard_embeddings(work / "index", s), np.float32)
                           for s in range(meta.num_shards)])
    st = np.load(work / "st.npy")
    cos = np.sum(ours * st, axis=1) / np.linalg.norm(ours, axis=1) / np.linalg.norm(st, axis=1)
    n = timings["st"][0]["docs"]
    med = {k: float(np.median([n / t["seconds"] for t in v])) for k, v in timings.items()}
    med_proc = {k: float(np.median([t["process_seconds"] for t in v])) for k, v in timings.items()}
    summary = {"docs": n, "model": args.model, "precision": args.precision, "batch_size": args.batch_size,
               "max_length": args.max_length,
               "threads": args.threads, "docs_per_second": med, "process_seconds": med_proc,
               "ratio": med["hopscotch"] / med["st"], "min_cosine": float(cos.min()), "runs": timings}
    print(f"\n{n} documents, {args.model}, {args.precision}, batch {args.batch_size}, max length {args.max_length}, "
          f"{args.threads} threads, median of {args.repeats}")
    print(md_table(["encoder", "docs/s (timed call)", "whole process (s)"],
                   [["hopscotch encode_corpus (sharded, to disk)", f"{med['hopscotch']:.1f}", f"{med_proc['hopscotch']:.1f}"],
                    ["SentenceTransformer.encode (in memory)", f"{med['st']:.1f}", f"{med_proc['st']:.1f}"]]))
    print(f"ratio {summary['ratio']:.2f}x; embeddings agree to cosine >= {cos.min():.5f}")
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
