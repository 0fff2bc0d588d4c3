"""cmass's metrics, as castorini/cmass's ``REPRODUCING.md`` ("Evaluation stage") defines them.

``hopscotch eval-agent --protocol cmass`` scores a cmass run artefact (``<run-id>/runs/<query_id>.json``,
or a folder / JSONL of such records). The question set is the qrels' queries (cmass: the 57 released
BrowseComp-Plus-CM questions, whose qrels cover every question); every mean below divides by its size,
so a question without a run contributes zero.

Per question ``q`` with ``G(q)`` its qrels docids of grade > 0, the document views are:

* ``P(q)`` **previewed**: ``previewed_docids``, else per successful search call ``details.previewedDocids``,
  else the ``docid=X`` hits of its output, else ``details.retrievedDocids``;
* ``S(q)`` **surfaced**: ``surfaced_docids``, else per search call ``details.retrievedDocids``, else its output;
* ``O(q)`` **opened**: ``opened_docids``, else the docids passed to successful ``read_document`` calls;
* ``C(q)`` **cited**: ``cited_docids``, else docids cited in ``[...]`` / ``【...】`` in the final answer
  (full ClimbMix ids, or ids the run surfaced or opened);
* **agent**: ``agent_docids``, else the first-encounter union of opened and cited.

Failed calls add no documents. All lists are first-encounter deduplicated and canonical.

* ``view_recall(q) = |X(q) & G(q)| / |G(q)|``; **macro** = sum over runs / question count (the paper's
  headline is macro previewed recall); **micro** = sum of hits / sum of ``|G(q)|`` over the question set.
* **Accuracy** = completed runs judged correct / question count; **completed-only accuracy** = the same
  over completed runs. A run that is not ``completed`` contributes zero whatever its judgement.
* **Tool Calls** = mean over the question set of ``tool_call_counts.search + tool_call_counts.read_document``
  (counted from ``result`` when a record has no ``tool_call_counts``); ``avg_tool_stats`` per tool name.

Piika's optional calibration error is not computed (``REPRODUCING.md`` does not define its binning).
Fractions are kept unrounded; ``summary`` repeats them under cmass's keys in percent, rounded to two
decimals after averaging.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.evaluation.agent_runs import Judgements, pct, query_id_of
from hopscotch.retriever.io.agent_runs import (
    canonical_list,
    docid_field,
    final_response,
    iter_run_records,
    opened_docid,
    output_docids,
    step_details,
    step_failed,
    tool_call_counts,
    tool_calls,
    tool_name,
)
from hopscotch.retriever.io.qrels import canonical_qrels

SOURCE = "castorini/cmass REPRODUCING.md"
VIEWS = ("previewed", "surfaced", "opened", "cited", "agent")
_SUMMARY_KEYS = {"previewed": "Agent Previewed Recall", "surfaced": "System Surfaced Recall",
                 "opened": "Agent Opened Recall", "cited": "Answer Cited Recall", "agent": "Agent Recall"}
_CLIMBMIX = re.compile(r"^shard_\d+_\d+$")
_BRACKETS = re.compile(r"\[([^\[\]]+)\]|【([^【】]+)】")


def _search_steps(record: dict) -> list[dict]:
    return [s for s in tool_calls(record) if tool_name(s.get("tool_name")) == "search" and not step_failed(s)]


def _from_steps(steps: list[dict], keys: tuple[str, ...], use_output_at: int) -> list[str]:
    """Per step, the first present of ``details[key]`` (the output's docids tried at position ``use_output_at``)."""
    out: list[str] = []
    for step in steps:
        details = step_details(step)
        for key in (*keys[:use_output_at], None, *keys[use_output_at:]):
            found = output_docids(step.get("output")) if key is None else docid_field(details, key)
            if found:
                out.extend(found)
                break
    return canonical_list(out)


def _cited_in(response: str, known: set[str]) -> list[str]:
    tokens = []
    for m in _BRACKETS.finditer(response):
        tokens.extend(t.strip() for t in re.split(r"[,;\s]+", m.group(1) or m.group(2)) if t.strip())
    return canonical_list(t for t in tokens if _CLIMBMIX.match(t) or t in known)


def document_views(record: dict) -> dict[str, list[str]]:
    """The five document views of one run record (see the module doc), in first-encounter order."""
    searches = _search_steps(record)
    previewed = docid_field(record, "previewed_docids")
    if previewed is None:
        previewed = _from_steps(searches, ("previewedDocids", "retrievedDocids"), use_output_at=1)
    surfaced = docid_field(record, "surfaced_docids")
    if surfaced is None:
        surfaced = _from_steps(searches, ("retrievedDocids",), use_output_at=1)
    opened = docid_field(record, "opened_docids")
    if opened is None:
        opened = canonical_list(opened_docid(s) for s in tool_calls(record)
                                if tool_name(s.get("tool_name")) == "read_document" and not step_failed(s))
    cited = docid_field(record, "cited_docids")
    if cited is None:
        cited = _cited_in(final_response(record), set(surfaced) | set(previewed) | set(opened))
    agent = docid_field(record, "agent_docids")
    if agent is None:
        agent = canonical_list([*opened, *cited])
    return {"previewed": previewed, "surfaced": surfaced, "opened": opened, "cited": cited, "agent": agent}


def tool_counts(record: dict) -> dict[str, int]:
    """``tool_call_counts``, else the calls in ``result`` counted by tool name."""
    counts = tool_call_counts(record)
    if counts:
        return counts
    derived: dict[str, int] = defaultdict(int)
    for step in tool_calls(record):
        derived[tool_name(step.get("tool_name"))] += 1
    return dict(derived)


def evaluate_cmass(runs: str | os.PathLike, qrels: dict[str, dict[str, int]],
                   judgements: str | os.PathLike | None = None) -> dict:
    """cmass's metrics of a run artefact (see the module doc for every definition)."""
    qrels = canonical_qrels(qrels)
    judge = Judgements(judgements)
    count = len(qrels)
    if count == 0:
        raise UsageError("the qrels name no question: cmass divides by the question count")
    rows: dict[str, dict] = {}
    skipped = []
    for where, record in iter_run_records(runs, layout="cmass"):
        qid = query_id_of(where, record)
        if qid not in qrels:
            skipped.append({"source": where, "query_id": qid, "reason": "question not in the qrels"})
            continue
        if qid in rows:
            raise UsageError(f"{where}: a second run for question {qid} (first: {rows[qid]['source']}); cmass "
                             "scores one final artefact per question")
        gold = {d for d, g in qrels[qid].items() if g > 0}
        views = document_views(record)
        completed = record.get("status") == "completed"
        found = judge.lookup(where, qid, record)
        counts = tool_counts(record)
        rows[qid] = {
            "source": where, "query_id": qid, "status": record.get("status"), "is_completed": completed,
            "judged_correct": None if found is None else found.correct,
            "correct": completed and found is not None and found.correct is True,
            "tool_call_counts": counts,
            "tool_calls": counts.get("search", 0) + counts.get("read_document", 0),
            "relevant": len(gold),
            **{f"{v}_docids": views[v] for v in VIEWS},
            **{f"{v}_hits": len(set(views[v]) & gold) for v in VIEWS},
            **{f"{v}_recall": len(set(views[v]) & gold) / len(gold) if gold else 0.0 for v in VIEWS},
        }
    judge.check_matched([(r["source"], r["query_id"]) for r in [*rows.values(), *skipped]])
    gold_total = sum(1 for docs in qrels.values() for g in docs.values() if g > 0)
    macro = {v: sum(r[f"{v}_recall"] for r in rows.values()) / count for v in VIEWS}
    micro = {v: (sum(r[f"{v}_hits"] for r in rows.values()) / gold_total if gold_total else 0.0) for v in VIEWS}
    completed = [r for r in rows.values() if r["is_completed"]]
    correct = sum(1 for r in rows.values() if r["correct"])
    stats: dict[str, float] = defaultdict(float)
    for r in rows.values():
        for name, n in r["tool_call_counts"].items():
            stats[name] += n
    avg_tool_stats = {name: total / count for name, total in stats.items()}
    accuracy = correct / count
    completed_only = correct / len(completed) if completed else None
    tool_calls_mean = sum(r["tool_calls"] for r in rows.values()) / count

    def p2(x):
        return None if x is None else round(100.0 * x, 2)

    summary = {
        "Accuracy (%)": p2(accuracy), "Completed-Only Accuracy (%)": p2(completed_only),
        "Recall (%)": p2(macro["surfaced"]), "Recall Macro (%)": p2(macro["surfaced"]),
        **{f"{_SUMMARY_KEYS[v]} {kind} (%)": p2(vals[v]) for v in VIEWS
           for kind, vals in (("Macro", macro), ("Micro", micro))},
        "avg_tool_stats": avg_tool_stats, "Tool Calls": round(tool_calls_mean, 2),
        "Completed Queries": len(completed), "Timeout/Incomplete Queries": len(rows) - len(completed),
        "Completed Correct": correct,
        "Completed Wrong": sum(1 for r in completed if r["judged_correct"] is False),
        "per_query_metrics": [{"query_id": r["query_id"], "correct": r["correct"],
                               **{f"{k}_recall": p2(r[f"{v}_recall"]) for v, k in
                                  (("surfaced", "system_surfaced"), ("previewed", "agent_previewed"),
                                   ("agent", "agent"), ("opened", "agent_opened"), ("cited", "answer_cited"))},
                               "agent_set_recall": p2(r["surfaced_recall"]), "recall": p2(r["surfaced_recall"])}
                              for r in rows.values()],
    }
    return {
        "protocol": "cmass", "source": SOURCE, "judge": judge.label,
        "queries_expected": count, "queries_evaluated": len(rows),
        "num_runs": len(rows), "completed": len(completed), "correct": correct,
        "accuracy": accuracy, "completed_only_accuracy": completed_only,
        "previewed_recall": macro["previewed"], "macro_recall": macro, "micro_recall": micro,
        "tool_calls": tool_calls_mean, "avg_tool_stats": avg_tool_stats,
        "summary": summary, "skipped": skipped, "queries_without_run": sorted(set(qrels) - set(rows)),
        "per_run": list(rows.values()),
    }


def format_cmass_report(report: dict) -> str:
    """The ``cmass`` report as printed lines: the paper's three numbers first."""
    m = report["macro_recall"]
    lines = [
        f"protocol: cmass ({SOURCE}; judge: {report['judge'] or 'none'})",
        (f"questions: {report['queries_expected']} (from the qrels); runs: {report['num_runs']}, "
        f"{report['completed']} completed"),
        (f"Accuracy: {pct(report['accuracy'])} ({report['correct']} correct / {report['queries_expected']}; "
        f"completed-only {pct(report['completed_only_accuracy'])})"),
        (f"Previewed recall (macro): {pct(m['previewed'])}; surfaced {pct(m['surfaced'])}, opened {pct(m['opened'])}, "
        f"cited {pct(m['cited'])}, agent {pct(m['agent'])}"),
        f"Tool calls (search + read_document) per question: {report['tool_calls']:.2f}",
    ]
    if report["queries_without_run"]:
        lines.append(f"questions without a run (count as zero): {len(report['queries_without_run'])}")
    if report["skipped"]:
        lines.append(f"runs skipped (question not in the qrels): {len(report['skipped'])}")
    return "\n".join(lines)
