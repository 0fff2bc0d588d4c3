"""Trajectory replay scoring: recorded agent search calls re-issued to a candidate retriever, scored.

Pure functions: they take the calls and the candidate's rankings (``{call_id: {docid: score}}``, the run
``hopscotch replay`` writes as ``calls.trec``) and return JSON-ready scores; reading traces and searching
is :mod:`hopscotch.retriever.commands.replay`'s job.

* A call's id is ``<question>#<n>``, ``n`` its 1-based position among its trajectory's replayed calls.
* Per call: ``ndcg@10`` and ``recall@k`` against the call's question's evidence qrels, computed by
  :func:`~hopscotch.retriever.evaluation.metrics.evaluate` on call-level qrels (every call of a question
  judged by that question's qrels), so they equal ``hopscotch eval`` on the same run and qrels.
* Per trajectory, over its calls' top-``k`` lists in order: the evidence recall after ``t`` calls (the
  share of the question's relevant documents in the union of the first ``t`` lists), the call at which
  each evidence document is first retrieved (None: never), and the redundant retrieval rate (the share
  of all retrieved documents that an earlier call of the trajectory had already retrieved).
* Per run: the mean and 95% t-interval half-width of each metric, and the discovery curve: mean evidence
  recall after ``t`` calls, a trajectory that stopped before ``t`` counting with its final value.

Without qrels only the qrels-free parts are scored (calls, documents retrieved, redundancy).
Evidence is every qrels document of grade >= 1; docids pass through
:func:`~hopscotch.retriever.io.docids.canonical_docid`.

Each call's ranking is under its id (``read_run("calls.trec")``), the evidence under the question's:

>>> calls = [ReplayCall("q1", 1, "who directed Gummo"), ReplayCall("q1", 2, "Harmony Korine films")]
>>> [call.id for call in calls]
['q1#1', 'q1#2']
>>> run = {"q1#1": {"d1": 2.0, "d7": 1.0}, "q1#2": {"d2": 1.5}}
>>> report = replay_report(calls, run, {"q1": {"d1": 1, "d2": 1}}, k=10)
>>> report["metrics"]["evidence_recall"]["mean"], report["discovery_curve"]["evidence_recall"]
(1.0, [0.5, 1.0])
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.evaluation.manifest import check_comparable
from hopscotch.retriever.evaluation.metrics import EvalResult, compare_runs, evaluate
from hopscotch.retriever.io.docids import canonical_docid
from hopscotch.retriever.io.qrels import canonical_qrels

NDCG = "ndcg@10"
#: said in the printed output and the JSON of every replay
OFF_POLICY = ("off-policy: every recorded call is re-issued exactly as the agent wrote it, but the agent "
              "wrote its later calls after seeing the original retriever's results, not the candidate's; "
              "the scores estimate how the candidate serves this recorded traffic, not how an agent using "
              "it would search or answer")
#: per-trajectory metrics a paired comparison tests (per-call ones: ndcg@10 and recall@k)
TRAJECTORY_TESTS = ("evidence_recall", "redundancy")


def call_id(question_id: str, number: int) -> str:
    """The run / JSON id of a trajectory's ``number``-th replayed call."""
    return f"{question_id}#{number}"


@dataclass(frozen=True, slots=True)
class ReplayCall:
    """One re-issued call: its trajectory (question), position (1-based) and query text; ``step`` and
    ``source`` say where the trace had it."""

    question_id: str
    number: int
    query: str
    step: int | None = None
    source: str = ""

    @property
    def id(self) -> str:
        return call_id(self.question_id, self.number)


@dataclass
class TrajectoryScores:
    """One trajectory's scores; the evidence fields are None when its question has no relevant document."""

    question_id: str
    calls: int = 0
    retrieved: int = 0                     # documents over all calls, repeats included
    unique_docs: int = 0
    redundant: int = 0                     # retrieved documents an earlier call had already retrieved
    evidence: int | None = None            # relevant documents of the question
    curve: list[float] | None = None       # evidence recall after call 1, 2, ...
    first_found: dict[str, int | None] | None = None
    new_evidence: list[list[str]] = field(default_factory=list)  # per call, evidence first found there

    @property
    def redundancy(self) -> float | None:
        return self.redundant / self.retrieved if self.retrieved else None

    @property
    def evidence_recall(self) -> float | None:
        if self.evidence is None:
            return None
        return self.curve[-1] if self.curve else 0.0

    def to_json(self) -> dict:
        return {"calls": self.calls, "retrieved": self.retrieved, "unique_docs": self.unique_docs,
                "redundant": self.redundant, "redundancy": self.redundancy, "evidence": self.evidence,
                "evidence_recall": self.evidence_recall, "evidence_recall_curve": self.curve,
                "first_found": self.first_found}


def evidence_of(qrels: Mapping[str, Mapping[str, int]] | None, question_id: str) -> set[str] | None:
    """The question's relevant (grade >= 1) docids, or None when it has none (or there are no qrels)."""
    row = (qrels or {}).get(question_id) or {}
    found = {canonical_docid(d) for d, g in row.items() if g >= 1}
    return found or None


def top_docids(docs: Mapping[str, float] | None, k: int) -> list[str]:
    """A call's top ``k`` docids, best first (ties by docid, as runs are written and trec_eval reads)."""
    ranked = sorted((docs or {}).items(), key=lambda kv: (-kv[1], kv[0]))
    return list(dict.fromkeys(canonical_docid(d) for d, _ in ranked))[:k]


def score_trajectory(question_id: str, rankings: Sequence[Sequence[str]],
                     evidence: set[str] | None = None) -> TrajectoryScores:
    """Scores of one trajectory from its calls' retrieved docids (in call order)."""
    s = TrajectoryScores(question_id, calls=len(rankings))
    evidence = {canonical_docid(d) for d in evidence} if evidence else None
    if evidence:
        s.evidence, s.curve, s.first_found = len(evidence), [], {d: None for d in sorted(evidence)}
    seen: set[str] = set()
    for t, docs in enumerate(rankings, start=1):
        docs = list(dict.fromkeys(canonical_docid(d) for d in docs))
        s.retrieved += len(docs)
        s.redundant += sum(d in seen for d in docs)
        seen.update(docs)
        if evidence:
            fresh = [d for d in docs if d in evidence and s.first_found[d] is None]
            for d in fresh:
                s.first_found[d] = t
            s.new_evidence.append(fresh)
            s.curve.append(len(evidence & seen) / len(evidence))
    s.unique_docs = len(seen)
    return s


def summary(values: Sequence[float]) -> dict:
    """``{mean, ci95, n}``: the mean and the half-width of its 95% t-interval (0 for n < 2; mean None for n = 0)."""
    x = np.asarray([v for v in values if v is not None], dtype=float)
    if len(x) == 0:
        return {"mean": None, "ci95": None, "n": 0}
    ci = 0.0
    if len(x) >= 2:
        from scipy import stats

        ci = float(stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))
    return {"mean": float(x.mean()), "ci95": ci, "n": len(x)}


def discovery_curve(trajectories: Sequence[TrajectoryScores]) -> dict | None:
    """Mean evidence recall after ``t = 1..T`` calls over the trajectories with evidence (T: the longest);
    a trajectory with fewer than ``t`` calls counts with its final recall. ``active``: those with >= t calls."""
    scored = [s for s in trajectories if s.evidence is not None]
    if not scored:
        return None
    length = max((len(s.curve) for s in scored), default=0)
    out = {"call": [], "evidence_recall": [], "ci95": [], "active": []}
    for t in range(1, length + 1):
        stats = summary([s.curve[min(t, len(s.curve)) - 1] if s.curve else 0.0 for s in scored])
        out["call"].append(t)
        out["evidence_recall"].append(stats["mean"])
        out["ci95"].append(stats["ci95"])
        out["active"].append(sum(len(s.curve) >= t for s in scored))
    return out


def score_calls(run: Mapping[str, Mapping[str, float]], calls: Sequence[ReplayCall],
                qrels: Mapping[str, Mapping[str, int]], k: int) -> EvalResult | None:
    """``ndcg@10`` and ``recall@k`` of every call whose question has evidence (None: no such call)."""
    judged = {}
    for c in calls:
        if evidence_of(qrels, c.question_id):
            judged[c.id] = {canonical_docid(d): g for d, g in qrels[c.question_id].items()}
    if not judged:
        return None
    sub = {c: {canonical_docid(d): s for d, s in run.get(c, {}).items()} for c in judged}
    return evaluate(sub, judged, [NDCG, f"recall@{k}"])


def replay_report(calls: Sequence[ReplayCall], run: Mapping[str, Mapping[str, float]],
                  qrels: Mapping[str, Mapping[str, int]] | None, k: int,
                  trajectories: Sequence[str] | None = None) -> dict:
    """The whole replay's scores: ``{calls, metrics, discovery_curve, per_call, per_query, per_trajectory}``.

    ``run`` holds each call's ranking by :attr:`ReplayCall.id` (a missing call retrieved nothing);
    ``trajectories`` lists every question in order, also those with no replayed call (default: the
    calls' questions). ``metrics`` maps names to :func:`summary` dicts; ``per_query`` is the per-call
    scores alone, ``{call_id: {ndcg@10, recall@k}}`` as ``eval --json`` writes them (None without qrels).
    """
    if k <= 0:
        raise UsageError("k must be positive")
    qrels = canonical_qrels(qrels) if qrels is not None else None
    order = list(dict.fromkeys(list(trajectories or []) + [c.question_id for c in calls]))
    by_question: dict[str, list[ReplayCall]] = {q: [] for q in order}
    for c in calls:
        by_question[c.question_id].append(c)
    per_traj = {q: score_trajectory(q, [top_docids(run.get(c.id), k) for c in by_question[q]],
                                    evidence_of(qrels, q)) for q in order}
    call_scores = score_calls(run, calls, qrels, k) if qrels is not None else None
    per_call = {}
    for q in order:
        s, seen = per_traj[q], set()
        for i, c in enumerate(by_question[q]):
            docs = top_docids(run.get(c.id), k)
            row = {"question_id": q, "call": c.number, "step": c.step, "query": c.query, "retrieved": len(docs),
                   "redundant": sum(d in seen for d in docs)}
            seen.update(docs)
            if s.evidence is not None:
                row["new_evidence"] = s.new_evidence[i]
            if call_scores is not None and c.id in call_scores.per_query:
                row.update(call_scores.per_query[c.id])
            per_call[c.id] = row
    metrics = {}
    if call_scores is not None:
        metrics = {m: {"mean": call_scores.mean[m], "ci95": call_scores.ci95[m], "n": len(call_scores.per_query)}
                   for m in call_scores.metrics}
    if qrels is not None:
        metrics["evidence_recall"] = summary([s.evidence_recall for s in per_traj.values()])
    metrics["redundancy"] = summary([s.redundancy for s in per_traj.values()])
    metrics["calls"] = summary([s.calls for s in per_traj.values()])
    metrics["unique_docs"] = summary([s.unique_docs for s in per_traj.values()])
    return {"calls": {"replayed": len(calls), "scored": 0 if call_scores is None else len(call_scores.per_query),
                      "trajectories": len(order),
                      "trajectories_with_evidence": sum(s.evidence is not None for s in per_traj.values())},
            "metrics": metrics,
            "discovery_curve": discovery_curve(list(per_traj.values())) if qrels is not None else None,
            "per_call": per_call,
            "per_query": None if call_scores is None else call_scores.per_query,
            "per_trajectory": {q: s.to_json() for q, s in per_traj.items()}}


def _as_result(rows: Mapping[str, Mapping], metric: str) -> EvalResult | None:
    values = {i: {metric: float(r[metric])} for i, r in rows.items() if r.get(metric) is not None}
    if not values:
        return None
    stats = summary([v[metric] for v in values.values()])
    return EvalResult([metric], values, {metric: stats["mean"]}, {metric: stats["ci95"]})


def compare_reports(a: Mapping, b: Mapping, permutations: int = 10_000, seed: int = 0) -> dict:
    """Paired tests of two replays of the same calls (``a``, ``b``: :func:`replay_report` dicts or loaded
    ``replay.json``): per call ``ndcg@10`` / ``recall@k``, per trajectory :data:`TRAJECTORY_TESTS`.

    Returns ``{metric: {level, mean_a, mean_b, delta (b - a), p_randomization, p_ttest, n}}`` for each
    metric both replays scored. UsageError when the two did not replay the same calls.
    """
    calls_a = {i: r.get("query") for i, r in a["per_call"].items()}
    calls_b = {i: r.get("query") for i, r in b["per_call"].items()}
    if calls_a != calls_b:
        differ = sorted(set(calls_a) ^ set(calls_b)) or sorted(i for i in calls_a if calls_a[i] != calls_b[i])
        raise UsageError(f"the two replays did not re-issue the same calls (first difference: {differ[0]}); "
                         "replay the same --runs for both")
    metric_names = [m for m in a["metrics"] if m == NDCG or m.startswith("recall@")]
    levels = [(m, "call", "per_call") for m in metric_names] + [(m, "trajectory", "per_trajectory")
                                                                 for m in TRAJECTORY_TESTS]
    out = {}
    for metric, level, key in levels:
        ra, rb = _as_result(a[key], metric), _as_result(b[key], metric)
        if ra is None or rb is None:
            continue
        c = compare_runs(ra, rb, metric, permutations=permutations, seed=seed)
        out[metric] = {"level": level, "mean_a": c.mean_a, "mean_b": c.mean_b, "delta": c.delta,
                       "p_randomization": c.p_randomization, "p_ttest": c.p_ttest, "n": c.num_queries}
    return out


def check_replays_comparable(a: Mapping, b: Mapping, name_a: str = "this replay", name_b: str = "the other") -> None:
    """:func:`~hopscotch.retriever.evaluation.manifest.check_comparable` for two replay manifests, less what
    a retriever comparison varies: ``query_input`` is not compared, and an unknown (null) ``corpus`` (a
    BM25 index does not record its corpus) matches any."""
    a, b = dict(a), dict(b)
    a["query_input"] = b["query_input"] = None
    if a.get("corpus") is None or b.get("corpus") is None:
        a["corpus"] = b["corpus"] = None
    check_comparable(a, b, name_a, name_b)
