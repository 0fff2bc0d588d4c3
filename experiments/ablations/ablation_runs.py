"""The runs every ablation shares, cached under a work folder (delete a file to redo it).

Indexes and searches go through the CLI in-process (``hopscotch bm25-index``, ``index``, ``search``), each
command echoed to stderr so every number can be reproduced; hybrids are fused in-process from two cached
runs, as ``hopscotch search --bm25 ... --index ... --depth K`` fuses them; late-fusion runs use the dense
searcher's own late fusion with the two query encodings computed once.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from hopscotch.retriever.cli import main
from hopscotch.retriever.evaluation.metrics import evaluate
from hopscotch.retriever.io.runs import read_run, write_run
from hopscotch.retriever.searchers import build_searcher
from hopscotch.retriever.searchers.fusion import default_settings
from hopscotch.retriever.searchers.fusion_tuning import fuse_runs

K = 100   # depth of every run (and of the fused lists)
WEIGHTS = tuple(i / 10 for i in range(11))   # the late-fusion weights w tuned over


def run_cli(*argv) -> None:
    """``hopscotch ARGV`` in-process, echoed to stderr; a nonzero exit code is a :class:`SystemExit`."""
    argv = [str(a) for a in argv]
    print("$ hopscotch " + " ".join(argv), file=sys.stderr, flush=True)
    code = main(argv)
    if code != 0:
        raise SystemExit(f"hopscotch {' '.join(argv)} failed with exit code {code}")


def build_indexes(work: Path, name: str, corpus: Path, models: dict[str, str]) -> dict[str, Path]:
    """``{"bm25": folder, label: folder...}``: the BM25 index of ``corpus`` and a dense index per model (redone
    when the folder's ``.done`` marker names another model)."""
    out = {"bm25": work / "idx" / f"{name}.bm25"}
    if not (out["bm25"] / "docids.txt").exists():
        run_cli("bm25-index", "--corpus", corpus, "--out", out["bm25"])
    for label, model in models.items():
        out[label] = work / "idx" / f"{name}.{label}"
        done = out[label] / ".done"
        if not done.exists() or done.read_text().strip() != str(model):
            run_cli("index", "--corpus", corpus, "--model", model, "--out", out[label], "--batch-size", 32,
                    "--shard-size", 5000, "--overwrite")
            done.write_text(model + "\n")
    return out


def search(run: Path, paths: dict, *flags) -> Path:
    """``run``: ``hopscotch search --queries paths["queries"] --k K FLAGS``, written once (delete it to redo)."""
    if not run.exists():
        tmp = run.with_suffix(".part")
        run_cli("search", "--queries", paths["queries"], "--k", K, "--out", tmp, *flags)
        tmp.rename(run)
    return run


def late_fusion_runs(index: Path, model: str, variant: str, queries: list, gate: int | None = None,
                     encoder=None, weights=WEIGHTS, k: int = K) -> tuple[dict, object]:
    """``{w: {qid: {docid: score}}}`` of ``w * q_variant + (1 - w) * q_query`` for every w in ``weights``,
    and the encoder used: the dense searcher's own late fusion with the two encodings computed once, its
    passage windows and, with ``gate``, its word gate (longer contexts are searched with the query alone at
    every w): what ``--query-mix w [--query-mix-max-words gate]`` searches with."""
    aware = [q.with_reasoning() for q in queries]
    emb = {}
    for w in (1.0, 0.0):
        searcher = build_searcher("dense", index=index, model=model, query_input=variant, late_fusion=w,
                                  late_fusion_max_words=gate, encoder=encoder)
        encoder = searcher.encoder
        emb[w] = searcher.query_embeddings(aware)
    runs = {}
    for w in weights:
        ranked = searcher.search_embeddings(w * emb[1.0] + (1 - w) * emb[0.0], k)
        runs[w] = {q.qid: dict(hits) for q, hits in zip(queries, ranked)}
    return runs, encoder


def evaluate_ndcg(run: dict, qrels: dict, qids: list[str]):
    """nDCG@10 of ``run`` on ``qids`` (a query the run lacks scores 0)."""
    return evaluate({q: run.get(q, {}) for q in qids}, {q: qrels[q] for q in qids}, ["ndcg@10"])


def file_safe(variant: str) -> str:
    """A query-input variant as a file-name part (``reasoning_tail:128`` -> ``reasoning_tail128``)."""
    return variant.replace(":", "")


def fused(run: Path, sparse: Path, dense: Path, settings, qids: list[str]) -> Path:
    """``run``: ``settings`` applied to the cached BM25 and dense runs (each cut to depth K), as
    ``hopscotch search --bm25 ... --index ... --depth K`` fuses them; written once (delete it to redo)."""
    if not run.exists():
        tmp = run.with_suffix(".part")
        write_run(tmp, fuse_runs(read_run(sparse), read_run(dense), settings, qids, k=K, depth=K), tag="hybrid")
        tmp.rename(run)
    return run


def fusion_settings(method: str | None):
    """The settings ``--fusion METHOD`` applies (None: ``--fusion`` not given)."""
    return default_settings(method)


def settings_tag(method: str | None) -> str:
    """A file-name tag of the settings ``--fusion METHOD`` (None: no --fusion) applies today, so that a run
    cached under --work is redone when a default moves."""
    settings = fusion_settings(method)
    return hashlib.sha256(json.dumps(settings.to_json(), sort_keys=True).encode()).hexdigest()[:8]
