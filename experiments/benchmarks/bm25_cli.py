"""Where ``hopscotch search --bm25`` spends its time next to bare bm25s (issue 37, item 3): one corpus of the
cost-curve benchmark's documents (:mod:`.scale.data`), its questions, both BM25 backends, and the same queries
timed as

* the whole command, ``hopscotch search --bm25 DIR`` (a fresh process: interpreter, imports, index load, query
  analysis, search, the run file), for each backend;
* bare bm25s in a fresh process (``import bm25s``, ``BM25.load``, ``bm25s.tokenize``, ``retrieve``), the reference;
* in one warm process, step by step: bm25s's ``retrieve`` alone (tokenized), ``BM25Index.search`` (our analyzer and
  the hits as ``(docid, score)``), ``BM25Searcher.search_batch`` (query parsing, expansion check), and the
  command's loop (``iter_search`` and ``RunWriter``); and the disk backend's ``search``.

Each figure is the median of ``repeats`` runs (the in-process ones after a warm-up).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from hopscotch_experiments.benchmarks.common import md_table
from hopscotch_experiments.benchmarks.scale.data import SentencePool, write_corpus, write_queries

from hopscotch.retriever.cli import main
from hopscotch.retriever.index.bm25 import load_bm25_index
from hopscotch.retriever.io.queries import read_queries
from hopscotch.retriever.io.runs import RunWriter
from hopscotch.retriever.searchers.base import iter_search
from hopscotch.retriever.searchers.bm25 import BM25Searcher

BARE = """
import sys, time
t0 = time.perf_counter()
import bm25s, Stemmer
from hopscotch.retriever.io.queries import read_queries
texts = [q.text for q in read_queries(sys.argv[2])]
model = bm25s.BM25.load(sys.argv[1])
tokens = bm25s.tokenize(texts, stopwords="en", stemmer=Stemmer.Stemmer("english"), return_ids=False,
                        show_progress=False)
model.retrieve([[t for t in q if t in model.vocab_dict] for q in tokens], k=int(sys.argv[3]), show_progress=False)
print(time.perf_counter() - t0)
"""


def _median(repeats: int, fn) -> float:
    out = []
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def prepare(work: Path, sources, query_sources, docs: int, queries: int) -> dict:
    """The corpus, the queries and both backends' folders under ``work`` (made once)."""
    work.mkdir(parents=True, exist_ok=True)
    corpus, qfile = work / f"corpus_{docs}.jsonl", work / f"queries_{queries}.jsonl"
    if not corpus.is_file():
        write_corpus(SentencePool(sources), docs, corpus)
    if not qfile.is_file():
        write_queries(query_sources, queries, qfile)
    folders = {}
    for backend in ("bm25s", "disk"):
        folders[backend] = work / f"{backend}_{docs}"
        if not (folders[backend] / "hopscotch_bm25.json").is_file():
            main(["bm25-index", "--corpus", str(corpus), "--out", str(folders[backend]), "--backend", backend])
    return {"corpus": corpus, "queries": qfile, **folders}


def measure(files: dict, k: int = 100, repeats: int = 3) -> dict:
    """Every figure of the module doc, in seconds (``n``: the number of queries)."""
    env = dict(os.environ)
    hopscotch = [sys.executable, "-m", "hopscotch.retriever.cli"]
    out: dict = {}
    scratch = files["queries"].parent / "run.trec"
    for backend in ("bm25s", "disk"):
        cmd = [*hopscotch, "search", "--queries", str(files["queries"]), "--bm25", str(files[backend]), "--k", str(k),
               "--out", str(scratch), "--overwrite"]
        subprocess.run(cmd, check=True, env=env, capture_output=True)  # warm the page cache and the kernel cache
        out[f"cli_{backend}"] = _median(repeats, lambda c=cmd: subprocess.run(c, check=True, env=env,
                                                                              capture_output=True))
    bare = [sys.executable, "-c", BARE, str(files["bm25s"]), str(files["queries"]), str(k)]
    t0 = time.perf_counter()
    inner = [float(subprocess.run(bare, check=True, env=env, capture_output=True, text=True).stdout)
             for _ in range(max(1, repeats))]
    out["bare_process"] = (time.perf_counter() - t0) / max(1, repeats)
    out["bare_in_script"] = statistics.median(inner)

    queries = list(read_queries(files["queries"]))
    texts = [q.text for q in queries]
    index = load_bm25_index(files["bm25s"])
    model = index.model
    tokens = [[t for t in q if t in model.vocab_dict] for q in index.tokenize_queries(texts)]
    searcher = BM25Searcher(index)
    disk = load_bm25_index(files["disk"])

    def loop(s):
        with RunWriter(scratch, tag="bench") as w:
            for qid, hits in iter_search(s, queries, k, 256):
                w.write(qid, hits)

    steps = {"retrieve": lambda: model.retrieve(tokens, k=k, show_progress=False),
             "index_search": lambda: index.search(texts, k=k),
             "search_batch": lambda: searcher.search_batch(texts, k),
             "command_loop": lambda: loop(searcher),
             "disk_search": lambda: disk.search(texts, k=k, threads=1),
             "disk_command_loop": lambda: loop(BM25Searcher(disk))}
    for name, fn in steps.items():
        fn()
        out[name] = _median(repeats, fn)
    out["n"] = len(texts)
    return out


def report(result: dict) -> str:
    """The figures as a Markdown table (seconds and q/s)."""
    n = result["n"]
    what = [("cli_bm25s", "`hopscotch search --bm25` (bm25s folder), whole process"),
            ("cli_disk", "`hopscotch search --bm25` (disk folder), whole process"),
            ("bare_process", "bare bm25s script, whole process"),
            ("bare_in_script", "bare bm25s script: imports + load + tokenize + retrieve (no interpreter start)"),
            ("retrieve", "in process: bm25s `retrieve` (tokenized queries)"),
            ("index_search", "in process: `BM25Index.search` (analyzer, hits as (docid, score))"),
            ("search_batch", "in process: `BM25Searcher.search_batch`"),
            ("command_loop", "in process: the command's loop (`iter_search` + `RunWriter`)"),
            ("disk_search", "in process: disk backend `search` (1 thread)"),
            ("disk_command_loop", "in process: the command's loop over the disk backend")]
    rows = [[label, f"{result[key]:.3f}", f"{n / result[key]:,.0f}"] for key, label in what if key in result]
    return md_table(["step", "seconds", "q/s"], rows)


def run(work: Path, sources, query_sources, docs: int, queries: int, k: int, repeats: int) -> dict:
    files = prepare(work, sources, query_sources, docs, queries)
    result = {**measure(files, k, repeats), "docs": docs, "k": k}
    (work / "bm25_cli.json").write_text(json.dumps(result, indent=2))
    return result
