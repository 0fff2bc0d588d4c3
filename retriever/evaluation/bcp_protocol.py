"""BrowseComp-Plus's metrics, as ``scripts_evaluation/evaluate_run.py`` (texttron/BrowseComp-Plus) computes them.

``hopscotch eval-agent --protocol bcp`` reproduces that script's summary offline, from the run files
and judgements already made (its vLLM judge is not run here):

* **runs**: the folder's ``run_*.json`` files (or a named JSONL file of runs). A run without a
  ``query_id``, or whose question is not in the qrels (the script's ground truth stand-in), is skipped
  and listed in ``skipped``; several runs of one question each count, as there.
* **Accuracy**: runs judged correct / all runs evaluated. A run that is not ``completed``, or whose last
  ``result`` item is not a non-empty ``output_text``, is never judged and counts as wrong; so does a
  judge parse error or (offline only) a missing judgement.
* **Recall**: per run, ``|set(retrieved_docids) & positives| / |positives|``, where the positives are
  every docid the qrels list for the question, whatever its grade (``load_qrel_data`` keeps every line);
  averaged (macro) over runs whose question has positives. ``retrieved_docids`` only: documents opened
  with ``get_document`` or found in tool outputs do not count.
* **avg_tool_stats**: per tool name, ``tool_call_counts`` summed over runs / runs evaluated (runs without
  counts add 0); ``search_calls`` is the sum of its search-tool entries.
* **Calibration Error**: :func:`calibration_error` over the judge's ``confidence`` (0..100) and
  correctness of runs judged without parse error that carry a confidence; computed only with at least
  100 such runs, else reported as 0.0 (``calibration_error_computed`` says which).
* **Citations**: for judged runs, ``[123]`` / ``[1, 2]`` / ``【123】`` docids (digits only) cited in
  the response, with precision / recall against the positives; summarised over runs that cite.

Fractions (``accuracy``, ``recall``, ``calibration_error``) are kept unrounded; ``summary`` repeats them
under the script's keys, in percent rounded to two decimals.
"""

from __future__ import annotations

import math
import os
import re
from collections import defaultdict

import numpy as np

from hopscotch.retriever.evaluation.agent_runs import Judgements, mean, pct
from hopscotch.retriever.io.agent_runs import final_response, is_search_tool, iter_run_records, tool_call_counts
from hopscotch.retriever.io.common import parse_nested
from hopscotch.retriever.io.docids import canonical_docid
from hopscotch.retriever.io.qrels import canonical_qrels

SOURCE = "texttron/BrowseComp-Plus scripts_evaluation/evaluate_run.py"
MIN_CALIBRATION_EXAMPLES = 100


def calibration_error(confidences: list[float], correct: list[bool], beta: int = 100) -> float:
    """RMS calibration error (a fraction) with BrowseComp-Plus's binning (from hendrycks/outlier-exposure).

    ``confidences`` are percentages (0..100). Examples are sorted by confidence (numpy's default
    ``argsort``) and cut into ``len // beta`` bins of ``beta`` examples, the last bin taking the rest;
    the error is ``sqrt(sum_b |b| / n * (mean confidence_b - accuracy_b) ** 2)`` over every bin *but the
    last*: the upstream loop runs ``range(len(bins) - 1)``, and this reproduces it (so with fewer than
    ``2 * beta`` examples the error is 0).
    """
    if len(confidences) != len(correct) or len(confidences) < beta:
        raise ValueError(f"need as many correctness flags as confidences, and at least beta={beta} of them")
    conf = np.asarray(confidences, dtype=float) / 100.0
    corr = np.asarray(correct, dtype=float)
    order = np.argsort(conf)
    conf, corr = conf[order], corr[order]
    n = len(conf)
    bins = [[i * beta, (i + 1) * beta] for i in range(n // beta)]
    bins[-1][1] = n
    total = 0.0
    for lo, hi in bins[:-1]:
        diff = abs(float(np.nanmean(conf[lo:hi])) - float(np.nanmean(corr[lo:hi])))
        total += (hi - lo) / n * diff ** 2
    return math.sqrt(total)


def cited_docids(response: str) -> list[str]:
    """Docids cited in a response as BrowseComp-Plus extracts them: digits in ``[...]`` or ``【...】``."""
    found: set[str] = set()
    for open_, close in (("\\[", "\\]"), ("【", "】")):
        singles = re.findall(f"{open_}(\\d+){close}", response)
        found.update(singles)
        for group in re.findall(f"{open_}([^{open_}{close}]*?){close}", response):
            if group not in singles:
                found.update(re.findall(r"\d+", group))
    return sorted(found)


def retrieved_docids(record: dict) -> set[str]:
    """``retrieved_docids`` as a set (flat list; ``{call: [docids]}`` items, as some clients write, flattened)."""
    value = parse_nested(record.get("retrieved_docids")) or []
    out: set[str] = set()
    for item in value if isinstance(value, list) else [value]:
        item = parse_nested(item)
        if isinstance(item, dict):
            for docids in item.values():
                docids = parse_nested(docids)
                out.update(str(d) for d in (docids if isinstance(docids, list) else [docids]))
        elif item is not None:
            out.add(str(item))
    return {canonical_docid(d) for d in out}


def _run_row(where: str, qid: str, record: dict, positives: set[str], judge: Judgements) -> dict:
    retrieved = retrieved_docids(record)
    completed = record.get("status") == "completed"
    response = final_response(record)
    judged = completed and response != ""
    found = judge.lookup(where, qid, record) if judged else None
    correct = found.correct if found is not None else None
    row = {
        "source": where, "query_id": qid, "status": record.get("status"), "is_completed": completed,
        "judged": judged, "judgement_found": found is not None, "correct": bool(correct),
        "parse_error": (found.parse_error or correct is None) if found is not None else True,
        "confidence": found.confidence if found is not None else None,
        "tool_call_counts": tool_call_counts(record),
        "retrieved": len(retrieved), "positives": len(positives),
        "recall": len(retrieved & positives) / len(positives) if positives else None,
        "cited_docids": None, "citation_precision": None, "citation_recall": None,
    }
    if judged:
        cited = cited_docids(response)
        row["cited_docids"] = cited
        if cited:
            hits = len(set(cited) & positives)
            row["citation_precision"] = hits / len(cited)
            row["citation_recall"] = hits / len(positives) if positives else 0.0
    return row


def evaluate_bcp(runs: str | os.PathLike, qrels: dict[str, dict[str, int]],
                 judgements: str | os.PathLike | None = None) -> dict:
    """BrowseComp-Plus's summary of a run folder (see the module doc for every definition)."""
    qrels = canonical_qrels(qrels)
    judge = Judgements(judgements)
    rows, skipped = [], []
    for where, record in iter_run_records(runs, layout="bcp"):
        qid = record.get("query_id")
        if not qid or str(qid) not in qrels:
            skipped.append({"source": where, "query_id": qid,
                            "reason": "no query_id" if not qid else "question not in the qrels"})
            continue
        rows.append(_run_row(where, str(qid), record, set(qrels[str(qid)]), judge))
    judge.check_matched([(r["source"], r["query_id"]) for r in rows + skipped])
    n = len(rows)
    tool_stats: dict[str, float] = defaultdict(float)
    for r in rows:
        for name, count in r["tool_call_counts"].items():
            tool_stats[name] += count
    avg_tool_stats = {name: total / n for name, total in tool_stats.items()}
    calib = [(r["confidence"], r["correct"]) for r in rows if not r["parse_error"] and r["confidence"] is not None]
    missing_confidence = sum(1 for r in rows if not r["parse_error"] and r["confidence"] is None)
    computed = len(calib) >= MIN_CALIBRATION_EXAMPLES
    calib_error = calibration_error(*zip(*calib)) if computed else 0.0
    recalls = [r["recall"] for r in rows if r["recall"] is not None]
    accuracy = sum(1 for r in rows if r["correct"]) / n if n else 0.0
    recall = float(np.mean(recalls)) if recalls else None
    citing = [r for r in rows if r["cited_docids"]]
    citations = {
        "responses_with_citations": len(citing), "total_responses": n,
        "coverage": len(citing) / n if n else 0.0,
        "avg_citations_per_response": mean([len(r["cited_docids"]) for r in citing]) or 0.0,
        "precision": mean([r["citation_precision"] for r in citing]) or 0.0,
        "recall": mean([r["citation_recall"] for r in citing]) or 0.0,
    }
    per_query = [{"query_id": r["query_id"], "correct": r["correct"],
                  "recall": None if r["recall"] is None else round(r["recall"] * 100.0, 2)} for r in rows]
    summary = {
        "Accuracy (%)": round(accuracy * 100.0, 2),
        "Recall (%)": None if recall is None else round(recall * 100.0, 2),
        "avg_tool_stats": avg_tool_stats,
        "Calibration Error (%)": round(calib_error * 100.0, 2),
        "per_query_metrics": per_query,
    }
    evaluated = {r["query_id"] for r in rows}
    return {
        "protocol": "bcp", "source": SOURCE, "judge": judge.label,
        "queries_expected": len(qrels), "queries_evaluated": n,
        "num_runs": n, "completed": sum(1 for r in rows if r["is_completed"]),
        "judged": sum(1 for r in rows if r["judged"]),
        "missing_judgements": sum(1 for r in rows if r["judged"] and not r["judgement_found"]),
        "accuracy": accuracy, "recall": recall, "runs_with_positives": len(recalls),
        "avg_tool_stats": avg_tool_stats,
        "search_calls": sum(v for k, v in avg_tool_stats.items() if is_search_tool(k)),
        "calibration_error": calib_error, "calibration_error_computed": computed,
        "calibration_examples": len(calib), "missing_judge_confidence": missing_confidence,
        "citations": citations, "summary": summary,
        "skipped": skipped, "queries_without_run": sorted(set(qrels) - evaluated),
        "per_run": rows,
    }


def format_bcp_report(report: dict) -> str:
    """The ``bcp`` report as printed lines (the script's summary lines, plus what was skipped)."""
    c = report["citations"]
    calib = (f"{100 * report['calibration_error']:.2f}% over {report['calibration_examples']} confidences"
             if report["calibration_error_computed"] else
             f"0.00% (not computed: {report['calibration_examples']} confidences, needs "
             f"{MIN_CALIBRATION_EXAMPLES})")
    lines = [
        f"protocol: bcp ({SOURCE}; judge: {report['judge'] or 'none'})",
        (f"evaluated {report['num_runs']} runs ({report['completed']} completed, {report['judged']} judgeable, "
        f"{report['missing_judgements']} without a judgement)"),
        f"Accuracy: {pct(report['accuracy'])} (incomplete, unjudged and unparsed runs count as wrong)",
        f"Recall: {pct(report['recall'])} (retrieved_docids, macro over {report['runs_with_positives']} runs)",
        f"Average Tool Calls: {report['avg_tool_stats']} (search: {report['search_calls']:.2f})",
        f"Calibration Error: {calib}",
        (f"Citations: {c['responses_with_citations']}/{c['total_responses']} responses ({pct(c['coverage'])}), "
        f"{c['avg_citations_per_response']:.2f} per citing response, precision {pct(c['precision'])}, "
        f"recall {pct(c['recall'])}"),
    ]
    if report["skipped"]:
        lines.append(f"skipped runs: {len(report['skipped'])} (no query_id, or question not in the qrels)")
    if report["queries_without_run"]:
        lines.append(f"questions in the qrels without a run: {len(report['queries_without_run'])} (not counted)")
    return "\n".join(lines)
