"""Evaluating search agents from their run files: shared helpers and Hopscotch's own protocol (``hopscotch``).

Run records, their layouts and judge outputs are read by :mod:`hopscotch.retriever.io.agent_runs`.
The harnesses' own metric definitions are in :mod:`.bcp_protocol` (BrowseComp-Plus) and
:mod:`.cmass_protocol` (cmass); ``hopscotch eval-agent --protocol`` picks one (default ``hopscotch``).

The ``hopscotch`` protocol, per run:

* **evidence recall**: the share of the question's relevant documents (qrels grade > 0) among every
  document the agent was shown: ``retrieved_docids`` (a flat list, or ``{call: [docids]}`` items), cmass's
  ``surfaced_docids`` / ``previewed_docids`` / ``opened_docids``, each successful search call's
  ``details.retrievedDocids`` / ``previewedDocids`` and the docids in its output (``<docid: X>``,
  ``"docid": "X"``, ``docid=X``), and documents opened with a get-document / read_document call.
  Broader than the harnesses' recall (BrowseComp-Plus: ``retrieved_docids`` only; cmass: previewed);
* **search calls**: search tool calls (``tool_call_counts``, else counted in ``result``); **document
  calls**: get-document / read_document calls, counted the same way;
* **accuracy**: over the runs whose outcome is known: judged completed runs, plus incomplete runs
  (``status`` present and not ``completed``), which count as wrong whatever their judgement, as both
  harnesses count them. Completed runs without a judgement are left out; accuracy is None when no run
  carries a judgement. (Earlier versions left incomplete runs out too.)

Judgements come from the records (``judge_result.correct``, ``correct``, ...) or, with ``judgements=``,
from a judge's output. Docids of runs and qrels pass through ``canonical_docid``.

Example (not run: it needs a folder of agent runs)::

    report = evaluate_agent_runs("runs/", read_qrels("qrels.txt"))
    report["evidence_recall"], report["search_calls_per_question"], report["accuracy"]
"""

from __future__ import annotations

import os
from pathlib import Path

from hopscotch.retriever.errors import FormatError, UsageError
from hopscotch.retriever.io.agent_runs import (
    Judgement,
    docid_field,
    is_get_document_tool,
    is_search_tool,
    iter_run_records,
    judgement_from,
    opened_docid,
    output_docids,
    read_judgements,
    step_details,
    step_failed,
    tool_call_counts,
    tool_calls,
)
from hopscotch.retriever.io.common import parse_nested
from hopscotch.retriever.io.docids import canonical_docid
from hopscotch.retriever.io.qrels import canonical_qrels

__all__ = ["Judgements", "evaluate_agent_runs", "format_report", "iter_run_records", "judgement",
           "mean", "parse_nested", "query_id_of", "search_calls", "shown_docids"]


def mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def query_id_of(where: str, record: dict) -> str:
    """The record's ``query_id`` (or ``qid``) as a string; a record without one is a :class:`FormatError`."""
    qid = record.get("query_id", record.get("qid"))
    if qid is None:
        raise FormatError(where, None, "a run record with 'query_id'", f"keys {sorted(record)[:8]}")
    return str(qid)


def _is_json_file(where: str) -> bool:
    return where.endswith(".json")


class Judgements:
    """Where answer judgements come from: a judge's output (``path``) or, without one, the run records.

    A judge file's entry is matched to a run by the run file it names (``json_path``), else by query id.
    :attr:`label` is what the evaluation manifest records: the judge file's path, ``"run"`` when records
    carried judgements, or None.
    """

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = path
        self.found = 0
        self._by_stem: dict[str, Judgement] = {}
        self._by_qid: dict[str, list[Judgement]] = {}
        for j in read_judgements(path) if path is not None else []:
            if j.run_stem:
                self._by_stem[j.run_stem] = j
            if j.query_id is not None:
                self._by_qid.setdefault(j.query_id, []).append(j)

    def lookup(self, where: str, qid: str, record: dict) -> Judgement | None:
        if self.path is None:
            found = judgement_from(record)
        else:
            found = self._by_stem.get(Path(where).stem) if _is_json_file(where) else None
            if found is None:
                candidates = self._by_qid.get(qid, [])
                if len({(j.correct, j.confidence, j.parse_error) for j in candidates}) > 1:
                    raise UsageError(f"{self.path}: several different judgements for query {qid} and none names "
                                     f"the run file {where}")
                found = candidates[0] if candidates else None
        self.found += found is not None
        return found

    def check_matched(self, runs) -> None:
        """With a judge file: a :class:`UsageError` when none of its judgements names one of ``runs``
        (``(where, query_id)`` pairs, every record read) by run file or query id: judgements of other runs
        would read as accuracy 0% (or n/a), not as a mix-up."""
        if self.path is None:
            return
        runs = list(runs)
        if not any(Path(where).stem in self._by_stem or str(qid) in self._by_qid for where, qid in runs):
            count = len(set(self._by_qid) | set(self._by_stem))
            example = next(iter(self._by_qid), next(iter(self._by_stem), None))
            raise UsageError(f"--judgements {self.path}: none of its judgements ({count} queries or run files, e.g. "
                             f"{example!r}) matches one of the {len(runs)} runs (by run file name or query id, e.g. "
                             f"{runs[0][1] if runs else None!r}): judgements of other runs?")

    @property
    def label(self) -> str | None:
        if self.path is not None:
            return str(self.path)
        return "run" if self.found else None


def judgement(record: dict) -> bool | None:
    """True / False when the record carries a judgement, else None."""
    found = judgement_from(record)
    return None if found is None else found.correct


def shown_docids(record: dict) -> set[str]:
    """Every docid the agent saw (see the module doc), canonical."""
    shown: set[str] = set()
    retrieved = parse_nested(record.get("retrieved_docids")) or []
    for item in retrieved if isinstance(retrieved, list) else [retrieved]:
        item = parse_nested(item)
        if isinstance(item, dict):
            for docids in item.values():
                docids = parse_nested(docids)
                shown.update(canonical_docid(str(d)) for d in (docids if isinstance(docids, list) else [docids]))
        elif item is not None:
            shown.add(canonical_docid(str(item)))
    for key in ("surfaced_docids", "previewed_docids", "opened_docids"):
        shown.update(docid_field(record, key) or [])
    for step in tool_calls(record):
        name = step.get("tool_name")
        if step_failed(step):
            continue
        if is_search_tool(name):
            details = step_details(step)
            for key in ("retrievedDocids", "previewedDocids"):
                shown.update(docid_field(details, key) or [])
            shown.update(output_docids(step.get("output")))
        elif is_get_document_tool(name) and opened_docid(step) is not None:
            shown.add(opened_docid(step))
    return shown


def _calls(record: dict, is_kind) -> int:
    counts = tool_call_counts(record)
    if counts:
        return int(sum(v for k, v in counts.items() if is_kind(k)))
    return sum(1 for s in tool_calls(record) if is_kind(s.get("tool_name")))


def search_calls(record: dict) -> int:
    """Search calls: ``tool_call_counts`` over search tools, else the search calls in ``result``."""
    return _calls(record, is_search_tool)


def document_calls(record: dict) -> int:
    """Get-document / read_document calls, counted as :func:`search_calls` counts searches."""
    return _calls(record, is_get_document_tool)


def evaluate_agent_runs(runs: str | os.PathLike, qrels: dict[str, dict[str, int]],
                        judgements: str | os.PathLike | None = None) -> dict:
    """Evidence recall, search / document calls per question and accuracy over a folder of runs (``hopscotch``)."""
    qrels = canonical_qrels(qrels)
    judge = Judgements(judgements)
    per_run = []
    for where, record in iter_run_records(runs):
        qid = query_id_of(where, record)
        relevant = {d for d, g in qrels.get(qid, {}).items() if g > 0}
        shown = shown_docids(record)
        status = record.get("status")
        found = judge.lookup(where, qid, record)
        incomplete = status is not None and status != "completed"
        correct = False if incomplete else (None if found is None else found.correct)
        per_run.append({
            "source": where, "query_id": qid, "status": status,
            "search_calls": search_calls(record), "document_calls": document_calls(record),
            "shown_docs": len(shown), "relevant": len(relevant), "relevant_shown": len(shown & relevant),
            "evidence_recall": len(shown & relevant) / len(relevant) if relevant else None,
            "judged": not incomplete and found is not None and found.correct is not None,
            "incomplete": incomplete, "correct": correct,
        })
    judge.check_matched((r["source"], r["query_id"]) for r in per_run)
    with_qrels = [r for r in per_run if r["evidence_recall"] is not None]
    known = [r for r in per_run if r["correct"] is not None]
    judged = [r for r in per_run if r["judged"]]
    return {
        "protocol": "hopscotch", "judge": judge.label,
        "queries_expected": len(qrels), "queries_evaluated": len(with_qrels),
        "num_runs": len(per_run),
        "num_questions": len({r["query_id"] for r in per_run}),
        "completed": sum(1 for r in per_run if r["status"] == "completed"),
        "incomplete": sum(1 for r in per_run if r["incomplete"]),
        "with_qrels": len(with_qrels),
        "evidence_recall": mean([r["evidence_recall"] for r in with_qrels]),
        "search_calls_per_question": mean([r["search_calls"] for r in per_run]),
        "document_calls_per_question": mean([r["document_calls"] for r in per_run]),
        "shown_docs_per_question": mean([r["shown_docs"] for r in per_run]),
        "judged": len(judged),
        "accuracy_over": len(known),
        "accuracy": mean([1.0 if r["correct"] else 0.0 for r in known]) if judge.found else None,
        "qrels_without_run": sorted(set(qrels) - {r["query_id"] for r in per_run}),
        "per_run": per_run,
    }


def pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.2f}%"


def format_report(report: dict) -> str:
    """The ``hopscotch`` protocol's report as printed lines."""
    lines = [
        f"protocol: hopscotch (recall over every document shown; judge: {report['judge'] or 'none'})",
        f"runs: {report['num_runs']} ({report['num_questions']} questions, {report['completed']} completed)",
        f"evidence recall: {pct(report['evidence_recall'])} over {report['with_qrels']} runs with qrels",
        f"search calls per question: {report['search_calls_per_question']:.2f}",
        f"document calls per question: {report['document_calls_per_question']:.2f}",
        f"documents shown per question: {report['shown_docs_per_question']:.1f}",
    ]
    if report["accuracy"] is None:
        lines.append("accuracy: n/a (no run carries a judgement)")
    else:
        lines.append(f"accuracy: {pct(report['accuracy'])} over {report['accuracy_over']} runs "
                     f"({report['judged']} judged completed; {report['incomplete']} incomplete counted wrong)")
    if report["qrels_without_run"]:
        lines.append(f"questions in the qrels without a run: {len(report['qrels_without_run'])}")
    return "\n".join(lines)
