"""The demo's stages as plain functions (part of the CLI, so it may import ``data_synth``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

METRICS = ["ndcg@10", "recall@100"]


def _world(out: Path, docs: int, questions: int, seed: int) -> Path:
    from data_synth.world import build_world, write_world

    world_dir = out / "world"
    if not (world_dir / "world.json").exists():
        stats = write_world(build_world(seed=seed, docs=docs, questions=questions), world_dir)
        print(f"world: {stats['documents']} documents, {stats['questions']} questions, "
              f"{stats['trace_steps']} trace steps")
    else:
        print(f"world: reusing {world_dir}")
    return world_dir


def _bm25_run(world_dir: Path, out: Path) -> Path:
    from retriever.bm25 import BM25Index
    from retriever.formats import read_corpus, read_queries, write_run

    run_path = out / "runs" / "bm25.trec"
    if run_path.exists():
        return run_path
    index_dir = out / "bm25"
    if not (index_dir / "docids.txt").exists():
        BM25Index.build(read_corpus(world_dir / "corpus.jsonl"), show_progress=False).save(index_dir)
    index = BM25Index.load(index_dir)
    queries = list(read_queries(world_dir / "queries.jsonl"))
    hits = index.search([q.text for q in queries], k=100)
    write_run(run_path, {q.qid: dict(h) for q, h in zip(queries, hits)}, tag="bm25")
    return run_path


def _dense_run(world_dir: Path, out: Path, model: str, name: str) -> Path:
    from retriever.dense import DenseEncoder, exact_search
    from retriever.formats import read_corpus, read_queries, write_run

    run_path = out / "runs" / f"{name}.trec"
    if run_path.exists():
        return run_path
    docs = list(read_corpus(world_dir / "corpus.jsonl"))
    enc = DenseEncoder(model, max_length=256)
    emb_path = out / f"{name}.docs.npy"
    if emb_path.exists():
        doc_emb = np.load(emb_path)
    else:
        doc_emb = enc.encode_documents(docs)
        np.save(emb_path, doc_emb)
    queries = list(read_queries(world_dir / "queries.jsonl"))
    scores, rows = exact_search(doc_emb, enc.encode_queries([q.text for q in queries]), k=100)
    run = {q.qid: {docs[j].docid: float(s) for s, j in zip(scores[i], rows[i]) if j >= 0}
           for i, q in enumerate(queries)}
    write_run(run_path, run, tag=name)
    return run_path


def run_demo(out: Path, docs: int, questions: int, seed: int, model: str, stage) -> str:
    from retriever.evaluate import evaluate, format_table
    from retriever.formats import read_qrels, read_run, write_json

    out.mkdir(parents=True, exist_ok=True)
    stage("world")
    world_dir = _world(out, docs, questions, seed)
    stage("BM25")
    runs = {"bm25": _bm25_run(world_dir, out)}
    stage(f"dense ({model})")
    runs[f"dense-{model}"] = _dense_run(world_dir, out, model, "dense-base")
    stage("evaluate")
    qrels = read_qrels(world_dir / "qrels.tsv")
    results = [(name, evaluate(read_run(path), qrels, METRICS)) for name, path in runs.items()]
    write_json(out / "results.json", {name: r.mean for name, r in results})
    return format_table(results, METRICS)
