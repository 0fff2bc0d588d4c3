"""Evaluating search agents from their run files (BrowseComp-Plus layout).

Run records and tool names are read by :mod:`hopscotch.retriever.io.agent_runs`.

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

import os
import re

from hopscotch.retriever.errors import FormatError
from hopscotch.retriever.io.agent_runs import is_get_document_tool, is_search_tool, iter_run_records, tool_calls
from hopscotch.retriever.io.common import parse_nested

_DOCID_PATTERNS = (re.compile(r"<docid:\s*([^>\s]+)\s*>"), re.compile(r'"docid"\s*:\s*"([^"]+)"'),
                   re.compile(r"'docid'\s*:\s*'([^']+)'"))


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
        name = step.get("tool_name")
        if is_search_tool(name) and isinstance(step.get("output"), str):
            if not step["output"].lstrip().lower().startswith("error"):
                for pattern in _DOCID_PATTERNS:
                    shown.update(pattern.findall(step["output"]))
        elif is_get_document_tool(name):
            args = parse_nested(step.get("arguments"))
            if isinstance(args, dict) and args.get("docid") is not None:
                ok = not str(step.get("output") or "").lstrip().lower().startswith("error")
                if ok:
                    shown.add(str(args["docid"]))
    return shown


def search_calls(record: dict) -> int:
    counts = parse_nested(record.get("tool_call_counts"))
    if isinstance(counts, dict) and counts:
        return int(sum(v for k, v in counts.items() if is_search_tool(k)))
    return sum(1 for s in tool_calls(record) if is_search_tool(s.get("tool_name")))


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
