"""Evaluating search agents from their run files (BrowseComp-Plus layout).

A run record is one question's trajectory: ``{query_id, status, tool_call_counts, retrieved_docids,
result: [{type, tool_name, arguments, output}, ...]}``, one JSON object per ``*.json`` file or one per line
of a ``*.jsonl`` file. Nested fields may be JSON objects, JSON strings or Python-repr strings (some
published runs store them so); all three are read.

Per question this computes:

* **evidence recall**: the share of the question's relevant documents (qrels grade > 0) among the
  documents the agent was shown: ``retrieved_docids`` (a flat list, or ``{call: [docids]}`` items), the
  docids in search tool outputs (``<docid: X>`` / ``"docid": "X"``) and documents it fetched with a
  get-document call;
* **search calls**: ``tool_call_counts["search"]``, else the number of search tool calls in ``result``;
* **correct**: the judgement when the record carries one (``judge_result.correct``, ``correct``,
  ``is_correct`` or ``judgement``); accuracy is reported only over runs that carry one.

Example::

    report = evaluate_agent_runs("runs/", read_qrels("qrels.txt"))
    report["evidence_recall"], report["search_calls_per_question"], report["accuracy"]
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Iterator

from retriever.errors import FormatError, UsageError
from retriever.io.common import parse_nested, read_jsonl

SEARCH_TOOLS = {"search", "local_knowledge_base_retrieval", "retrieve", "web_search"}
GET_DOCUMENT_TOOLS = {"get_document", "get_doc", "open_document", "fetch_document"}
_DOCID_PATTERNS = (re.compile(r"<docid:\s*([^>\s]+)\s*>"), re.compile(r'"docid"\s*:\s*"([^"]+)"'),
                   re.compile(r"'docid'\s*:\s*'([^']+)'"))


def _tool_name(name: Any) -> str:
    name = (name or "").strip().lower()
    return name.rsplit(".", 1)[-1]  # "functions.search" -> "search"


def iter_run_records(path: str | os.PathLike) -> Iterator[tuple[str, dict]]:
    """Yield ``(where, record)`` for every run record in a folder (recursively) or file."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path}: no such run file or folder")
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.suffix in (".json", ".jsonl"))
    if not files:
        raise UsageError(f"{path}: no *.json or *.jsonl run files")
    for f in files:
        if f.suffix == ".jsonl":
            for lineno, obj in read_jsonl(f, "a run record object"):
                yield f"{f}:{lineno}", obj
        else:
            try:
                obj = json.loads(f.read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                raise FormatError(f, exc.lineno, "a JSON run record", exc.msg) from None
            if not isinstance(obj, dict):
                raise FormatError(f, 1, "a JSON object (one run record)", type(obj).__name__)
            yield str(f), obj


def shown_docids(record: dict) -> set[str]:
    """Every docid the agent saw: returned by searches or fetched by get-document calls."""
    shown: set[str] = set()
    retrieved = parse_nested(record.get("retrieved_docids")) or []
    for item in retrieved if isinstance(retrieved, list) else [retrieved]:
        item = parse_nested(item)
        if isinstance(item, dict):
            for docids in item.values():
                docids = parse_nested(docids)
                shown.update(str(d) for d in (docids if isinstance(docids, list) else [docids]))
        elif item is not None:
            shown.add(str(item))
    for step in tool_calls(record):
        name = _tool_name(step.get("tool_name"))
        if name in SEARCH_TOOLS and isinstance(step.get("output"), str):
            if not step["output"].lstrip().lower().startswith("error"):
                for pattern in _DOCID_PATTERNS:
                    shown.update(pattern.findall(step["output"]))
        elif name in GET_DOCUMENT_TOOLS:
            args = parse_nested(step.get("arguments"))
            if isinstance(args, dict) and args.get("docid") is not None:
                ok = not str(step.get("output") or "").lstrip().lower().startswith("error")
                if ok:
                    shown.add(str(args["docid"]))
    return shown


def tool_calls(record: dict) -> list[dict]:
    steps = parse_nested(record.get("result")) or []
    out = []
    for step in steps if isinstance(steps, list) else []:
        step = parse_nested(step)
        if isinstance(step, dict) and step.get("type") == "tool_call":
            out.append(step)
    return out


def search_calls(record: dict) -> int:
    counts = parse_nested(record.get("tool_call_counts"))
    if isinstance(counts, dict) and counts:
        return int(sum(v for k, v in counts.items() if _tool_name(k) in SEARCH_TOOLS))
    return sum(1 for s in tool_calls(record) if _tool_name(s.get("tool_name")) in SEARCH_TOOLS)


def judgement(record: dict) -> bool | None:
    """True / False when the record carries a judgement, else None."""
    judge = parse_nested(record.get("judge_result"))
    candidates = [judge.get("correct") if isinstance(judge, dict) else None,
                  record.get("correct"), record.get("is_correct"), record.get("judgement")]
    for value in candidates:
        if isinstance(value, bool):
            return value
        if isinstance(value, (int, float)) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in ("yes", "no", "true", "false", "correct", "incorrect"):
            return value.strip().lower() in ("yes", "true", "correct")
    return None


def evaluate_agent_runs(runs: str | os.PathLike, qrels: dict[str, dict[str, int]]) -> dict:
    """Evidence recall, search calls per question and (when judged) accuracy over a folder of runs."""
    per_run = []
    for where, record in iter_run_records(runs):
        qid = record.get("query_id", record.get("qid"))
        if qid is None:
            raise FormatError(where, None, "a run record with 'query_id'", f"keys {sorted(record)[:8]}")
        qid = str(qid)
        relevant = {d for d, g in qrels.get(qid, {}).items() if g > 0}
        shown = shown_docids(record)
        per_run.append({
            "source": where, "query_id": qid, "status": record.get("status"),
            "search_calls": search_calls(record), "shown_docs": len(shown),
            "relevant": len(relevant), "relevant_shown": len(shown & relevant),
            "evidence_recall": len(shown & relevant) / len(relevant) if relevant else None,
            "correct": judgement(record),
        })
    with_qrels = [r for r in per_run if r["evidence_recall"] is not None]
    judged = [r for r in per_run if r["correct"] is not None]
    mean = (lambda xs: sum(xs) / len(xs) if xs else None)
    return {
        "num_runs": len(per_run),
        "num_questions": len({r["query_id"] for r in per_run}),
        "completed": sum(1 for r in per_run if r["status"] == "completed"),
        "with_qrels": len(with_qrels),
        "evidence_recall": mean([r["evidence_recall"] for r in with_qrels]),
        "search_calls_per_question": mean([r["search_calls"] for r in per_run]),
        "shown_docs_per_question": mean([r["shown_docs"] for r in per_run]),
        "judged": len(judged),
        "accuracy": mean([1.0 if r["correct"] else 0.0 for r in judged]),
        "qrels_without_run": sorted(set(qrels) - {r["query_id"] for r in per_run}),
        "per_run": per_run,
    }


def format_report(report: dict) -> str:
    def pct(v):
        return "n/a" if v is None else f"{100 * v:.2f}%"

    lines = [
        f"runs: {report['num_runs']} ({report['num_questions']} questions, {report['completed']} completed)",
        f"evidence recall: {pct(report['evidence_recall'])} over {report['with_qrels']} runs with qrels",
        f"search calls per question: {report['search_calls_per_question']:.2f}",
        f"documents shown per question: {report['shown_docs_per_question']:.1f}",
        f"accuracy: {pct(report['accuracy'])}" + (f" over {report['judged']} judged runs" if report["judged"]
                                                  else " (no run carries a judgement)"),
    ]
    if report["qrels_without_run"]:
        lines.append(f"questions in the qrels without a run: {len(report['qrels_without_run'])}")
    return "\n".join(lines)
