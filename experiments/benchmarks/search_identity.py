"""Search runs before and after a refactor, byte for byte: the same ``hopscotch search`` commands on small
dev-set-shaped inputs, run by two installs (e.g. main's and a branch's), compared with ``cmp``.

The inputs are built once (by the reference install) from the shared data: the HotpotQA IRCoT corpus with a
BM25 index and a bundled-MiniLM FAISS index; HotpotQA questions (plain), IRCoT steps (question + the chain of
thought so far as reasoning) and Tongyi-DeepResearch search calls on QAMPARI (the agent's query + its thinking)
over their own snippet corpus. Each searcher (BM25, dense, hybrid) runs plain and ``--reasoning``.
"""

from __future__ import annotations

import filecmp
import json
import subprocess
from itertools import islice
from pathlib import Path


def _write_jsonl(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def _agent_steps(steps_file: Path, n: int):
    for line in steps_file.open():
        row = json.loads(line)
        query = row["search_query"]
        for i, text in enumerate(query if isinstance(query, list) else [query]):
            if not (text or "").strip():
                continue  # an empty call: nothing to search
            yield {"_id": f"{row['query_id']}_{n}_{i}", "text": text, "reasoning": row.get("reasoning") or ""}
        n += 1


def build_inputs(hopscotch: str, data: Path, inputs: Path, queries: int) -> None:
    """Query files, BM25 and dense indexes under ``inputs`` (skipped when already there)."""
    hotpot, qampari = data / "hotpotqa_ircot", data / "qampari_tongyi"
    if not (inputs / "qampari_corpus.jsonl").exists():
        with (hotpot / "queries.jsonl").open() as f:
            _write_jsonl(inputs / "hotpot_questions.jsonl",
                         ({"_id": r["_id"], "text": r["text"]} for r in map(json.loads, islice(f, queries))))
        with (hotpot / "cot_steps.jsonl").open() as f:
            _write_jsonl(inputs / "hotpot_steps.jsonl",
                         ({"_id": f"{r['qid']}_{r['step']}", "text": r["question"], "reasoning": r["cumulative_cot"]}
                          for r in map(json.loads, islice(f, queries))))
        _write_jsonl(inputs / "qampari_steps.jsonl", islice(_agent_steps(qampari / "agent_search_steps.jsonl", 0), queries))
        with (qampari / "doc_snippets.jsonl").open() as f:
            _write_jsonl(inputs / "qampari_corpus.jsonl",
                         ({"_id": r["docid"], "title": "", "text": r["text"]} for r in map(json.loads, f)))
    for name, corpus in (("hotpot", hotpot / "corpus.jsonl"), ("qampari", inputs / "qampari_corpus.jsonl")):
        if not (inputs / f"{name}_bm25").exists():
            subprocess.run([hopscotch, "bm25-index", "--corpus", str(corpus), "--out", str(inputs / f"{name}_bm25")], check=True)
        if not (inputs / f"{name}_dense").exists():
            subprocess.run([hopscotch, "index", "--corpus", str(corpus), "--model", "minilm",
                            "--out", str(inputs / f"{name}_dense")], check=True)


def search_commands(inputs: Path) -> dict[str, list[str]]:
    """Run name -> ``hopscotch search`` arguments (without ``--out``)."""
    out = {}
    for corpus, sets in (("hotpot", ("hotpot_questions", "hotpot_steps")), ("qampari", ("qampari_steps",))):
        bm25, dense = str(inputs / f"{corpus}_bm25"), str(inputs / f"{corpus}_dense")
        for queries in sets:
            for searcher, flags in (("bm25", ["--bm25", bm25]), ("dense", ["--index", dense]),
                                    ("hybrid", ["--bm25", bm25, "--index", dense])):
                base = ["search", "--queries", str(inputs / f"{queries}.jsonl"), "--k", "100", *flags]
                out[f"{queries}.{searcher}"] = base
                if queries != "hotpot_questions":
                    out[f"{queries}.{searcher}.reasoning"] = [*base, "--reasoning"]
    return out


def run_all(hopscotch: str, inputs: Path, runs: Path) -> None:
    runs.mkdir(parents=True, exist_ok=True)
    for name, args in search_commands(inputs).items():
        subprocess.run([hopscotch, *args, "--out", str(runs / f"{name}.trec")], check=True)


def compare(reference: Path, candidate: Path) -> list[tuple[str, bool]]:
    """``(run name, bit-identical)`` for every run file of ``reference``."""
    return [(p.stem, (candidate / p.name).exists() and filecmp.cmp(p, candidate / p.name, shallow=False))
            for p in sorted(reference.glob("*.trec"))]
