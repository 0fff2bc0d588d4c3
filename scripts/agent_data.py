"""Trace files for training on agent traffic (issue 9), built from the shared data's *train* questions.

``python scripts/agent_data.py OUT_DIR`` writes, deterministically (same bytes on every run; each file
written under a temporary name and renamed, so a killed run leaves no half file):

* ``hotpot_traces.jsonl``: the IRCoT ``cot_steps.jsonl`` rows of HotpotQA's train questions (unchanged).
* ``musique_traces.jsonl``: MuSiQue's ``subquestion_pairs.jsonl`` of its train questions as generic
  traces, one step per hop: query = the hop's sub-question with ``#k`` replaced by hop k's answer;
  reasoning = the question, then each earlier hop as ``{sub-question} Answer: {answer}.``;
  current_reasoning = what the previous hop added (the question at hop 1); prior_queries = the earlier
  sub-questions; prior_results = the previous hop's paragraph; gold_docids = the hop's own paragraph.
* ``tongyi_traces.jsonl`` + ``tongyi_qrels.tsv``: the Tongyi-DeepResearch search steps of the 9 train
  trajectories (valid calls only), read with DR-Synth's ``tongyi`` reader (so the context fields are the
  same), as generic traces whose ``gold_docids`` are **distillation labels**: the top
  :data:`TONGYI_TOP` documents the agent's own retriever returned for that call (``retrieved_docids``).
  DR-Synth's lexical oracle then picks, among them, the one the step query matches best as the positive.
  The qrels file lists, per question, every document any of its calls returned: DR-Synth never draws a
  hard negative from them (QAMPARI questions have many answers; another call's result is likely relevant).

The world (seed 13, 3,000 documents, 300 questions; first 220 questions = train) is built by
``hopscotch world`` and labelled with ``--max-questions 220`` in ``scripts/train_agent_retriever.sh``.
Splits: ``scripts/agent_splits.py``.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent_splits import data_dir, splits

#: documents of each Tongyi call (the agent retriever's top) that become the step's gold documents
TONGYI_TOP = 3


def _write(path: Path, lines: list[str]) -> int:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(lines), encoding="utf-8")
    os.replace(tmp, path)
    return len(lines)


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def hotpot_traces(out: Path) -> int:
    train = set(splits("hotpotqa_ircot")["train"])
    src = data_dir() / "hotpotqa_ircot" / "cot_steps.jsonl"
    lines = [line + "\n" for line in src.read_text(encoding="utf-8").splitlines()
             if line.strip() and str(json.loads(line)["qid"]) in train]
    return _write(out, lines)


def _resolve(subquestion: str, answers: dict[int, str]) -> str:
    """``Who was the first president of #1 ?`` -> ``... of American Psychological Association?``"""
    text = re.sub(r"#(\d+)", lambda m: answers.get(int(m.group(1)), m.group(0)), subquestion)
    return re.sub(r"\s+([?.,])", r"\1", " ".join(text.split()))


def musique_traces(out: Path) -> int:
    root = data_dir() / "musique_hipporag"
    train = splits("musique_hipporag")["train"]
    corpus = {str(d["_id"]): d for d in _jsonl(root / "corpus.jsonl")}
    hops: dict[str, list[dict]] = {}
    for row in _jsonl(root / "subquestion_pairs.jsonl"):
        hops.setdefault(str(row["qid"]), []).append(row)
    lines = []
    for qid in train:  # questions in the order of queries.jsonl, hops in order
        rows = sorted(hops.get(qid, []), key=lambda r: int(r["hop"]))
        answers: dict[int, str] = {}
        said, asked, previous = [rows[0]["question"].strip()] if rows else [], [], None
        for row in rows:
            query = _resolve(row["subquestion"], answers)
            prior = None
            if previous is not None and previous in corpus:
                doc = corpus[previous]
                prior = [{"title": doc.get("title") or "", "snippet": doc.get("text") or ""}]
            lines.append(json.dumps({
                "question_id": qid, "step": int(row["hop"]), "reasoning": "\n".join(said), "query": query,
                "current_reasoning": said[-1], "prior_queries": list(asked), "prior_results": prior,
                "gold_docids": [str(row["positive"])]}, ensure_ascii=False) + "\n")
            answers[int(row["hop"])] = str(row["subanswer"]).strip()
            said.append(f"{query} Answer: {answers[int(row['hop'])]}.")
            asked.append(query)
            previous = str(row["positive"])
    return _write(out, lines)


def tongyi_traces(out: Path, qrels_out: Path) -> int:
    from hopscotch.data_synth.trace_readers import read_tongyi
    from hopscotch.retriever.io.common import read_jsonl

    src = data_dir() / "qampari_tongyi" / "agent_search_steps.jsonl"
    train = set(splits("qampari_tongyi")["train"])
    rows = {lineno: obj for lineno, obj in read_jsonl(src, "a Tongyi search step")}
    returned: dict[str, list[str]] = {}
    lines = []
    for step in read_tongyi(((n, o) for n, o in rows.items() if str(o["query_id"]) in train), src):
        obj = rows[int(step.source.rsplit(":", 1)[1])]
        docids = [str(d) for d in obj.get("retrieved_docids") or []]
        for d in docids:
            if d not in returned.setdefault(step.question_id, []):
                returned[step.question_id].append(d)
        if step.failed or not step.query or not docids:
            continue
        lines.append(json.dumps({
            "question_id": step.question_id, "step": step.step, "reasoning": step.reasoning, "query": step.query,
            "current_reasoning": step.current_reasoning, "prior_queries": list(step.prior_queries or ()),
            "prior_results": list(step.prior_results) if step.prior_results is not None else None,
            "gold_docids": docids[:TONGYI_TOP]}, ensure_ascii=False) + "\n")
    qrels = ["query-id\tcorpus-id\tscore\n"] + [f"{q}\t{d}\t1\n" for q, ds in returned.items() for d in ds]
    _write(qrels_out, qrels)
    return _write(out, lines)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python scripts/agent_data.py OUT_DIR", file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    counts = {"hotpot_traces.jsonl": hotpot_traces(out / "hotpot_traces.jsonl"),
              "musique_traces.jsonl": musique_traces(out / "musique_traces.jsonl"),
              "tongyi_traces.jsonl": tongyi_traces(out / "tongyi_traces.jsonl", out / "tongyi_qrels.tsv")}
    for name, n in counts.items():
        print(f"{out / name}: {n} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
