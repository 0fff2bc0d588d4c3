"""Trajectory-use labels: training tuples from what an agent went on to use (LRAT-style).

DR-Synth labels a Tongyi search call with the agent retriever's own top documents, so a model trained on it learns
to imitate that query-only retriever. These labels come from the trajectory instead: what the agent *used*.

**The rule has one owner.** Whether the agent used a document a call showed it is
:func:`hopscotch.data_synth.utility_labels.judge_calls` (the usage rule, its default thresholds, hand-audited in
``docs/utility_labels_audit.md``), and a question's used documents are
:func:`~hopscotch.data_synth.utility_labels.questions_of` of the rule's call-level labels: exactly what the
question-level dev sets (``tongyi_question``, ``tongyi_pages_question`` of :mod:`.agent.eval_sets`) count as
relevant. Nothing here judges use a second way.

For each search call the rule judged (a valid row with queries and returned documents) and each of its query ids
(``read_traces(..., "tongyi")`` ids; a parallel call labels each of its queries alike):

* **positives**: the documents the call showed that the rule says the agent went on to use (:attr:`CallUse.positives`);
* **shown negatives**: the documents the call showed that *no* call of the question used (no run of the question,
  anywhere in its trajectories: the question-level labels) -- seen and passed over;
* **neutral**: shown, not used after this call, but used by another call of the question: neither label;
* **BM25 negatives** (added when the tuple is written, :class:`UseTupleWriter`): the first ``bm25_negatives`` of the
  call query's BM25 top ``depth`` over the corpus that are not a used document of the question, not on a page
  holding one (a docid ``PAGE__N`` is chunk N of page PAGE, as the Tongyi pages set reads it), and not shown to
  this call.

A call with no used document is skipped (counted). Each passage carries two fields the trainer does not read:
``origin`` (``"shown"`` or ``"bm25"``) and ``evidence``, the number of evidence items the rule found for the
document after this call (the features that made a positive used; for a shown negative the few, below the rule's
thresholds, the agent's later text still shared with it): a first, simple measure of how much the agent reasoned
about a document (LRAT weights negatives by it; training here does not, yet).

Example::

    from hopscotch.data_synth.trajectory_use import call_uses
    d = "../shared/data/qampari_tongyi/"
    uses, used = call_uses(d + "agent_search_steps.jsonl", d + "doc_snippets.jsonl", d + "runs/infly.jsonl")
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hopscotch.data_synth.trace_step import TraceStep
from hopscotch.data_synth.traces import read_traces
from hopscotch.data_synth.utility_labels import Judgement, UtilityThresholds, judge_calls, questions_of
from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.index.bm25 import BM25Index
from hopscotch.retriever.io.corpus import Document
from hopscotch.retriever.io.queries import context_dict
from hopscotch.retriever.io.tuples import passage_dict, tuple_line

Pathish = str | os.PathLike


@dataclass(frozen=True)
class UseConfig:
    """The knobs of trajectory-use tuples (``hopscotch synth --mode trajectory-use``); the usage rule's thresholds
    stay the dev sets' (:class:`~hopscotch.data_synth.utility_labels.UtilityThresholds` defaults) unless a caller
    passes others."""

    bm25_negatives: int = 3     # BM25 hard negatives added per tuple, after the shown negatives
    depth: int = 50             # BM25 candidates searched for them
    thresholds: UtilityThresholds = field(default_factory=UtilityThresholds)

    def __post_init__(self) -> None:
        if self.bm25_negatives < 0 or self.depth < 1:
            raise UsageError("trajectory-use labels: bm25_negatives >= 0 and depth >= 1")

    def fingerprint(self) -> dict:
        """What decides the output bytes (a resumed run must share it)."""
        return {"mode": "trajectory-use", **asdict(self)}


@dataclass(frozen=True, slots=True)
class CallUse:
    """The labels of one judged search call: ``(docid, evidence items)`` pairs in the order the call showed them."""

    question_id: str
    call_ids: tuple[str, ...]
    positives: tuple[tuple[str, int], ...]
    negatives: tuple[tuple[str, int], ...]
    neutral: tuple[str, ...]
    source: str


def page_of(docid: str) -> str:
    """``"867583__4"`` -> ``"867583"`` (a chunk's page); a docid without ``__`` is its own page."""
    return docid.partition("__")[0]


def call_uses(steps_path: Pathish, snippets_path: Pathish, runs_path: Pathish | None = None,
              thresholds: UtilityThresholds | None = None) -> tuple[list[CallUse], dict[str, set[str]]]:
    """``(calls, used)``: a :class:`CallUse` per judged call in file order, and ``{question_id: used docids}`` (the
    question-level labels). Raises :class:`~hopscotch.retriever.errors.FormatError` for malformed input."""
    rows: dict[str, list[Judgement]] = {}
    for j in judge_calls(steps_path, snippets_path, runs_path, thresholds):
        rows.setdefault(j.source, []).append(j)
    calls: dict[str, dict[str, int]] = {}   # the rule's call-level labels, as utility_qrels builds them
    for judged in rows.values():
        for j in judged:
            if j.used:
                for cid in j.call_ids:
                    calls.setdefault(cid, {})[j.docid] = 1
    used = {q: set(docs) for q, docs in questions_of(calls, steps_path).items()}
    question_of = {s.query_id: s.question_id for s in read_traces([Path(steps_path)], "tongyi")}
    out = []
    for source, judged in rows.items():
        qid = question_of[judged[0].call_ids[0]]
        question_used = used.get(qid, set())
        out.append(CallUse(
            qid, judged[0].call_ids,
            tuple((j.docid, len(j.evidence)) for j in judged if j.used),
            tuple((j.docid, len(j.evidence)) for j in judged if not j.used and j.docid not in question_used),
            tuple(j.docid for j in judged if not j.used and j.docid in question_used), source))
    return out, used


class UseTupleWriter:
    """Writes the tuples of one question's judged calls: the corpus's passages and its BM25 negatives."""

    def __init__(self, documents: dict[str, Document], index: BM25Index, config: UseConfig):
        self.documents, self.index, self.config = documents, index, config

    def _passage(self, docid: str, origin: str, evidence: int) -> dict:
        doc = self.documents[docid]
        return {**passage_dict(doc.docid, doc.title, doc.text), "origin": origin, "evidence": evidence}

    def _bm25_negatives(self, query: str, excluded: set[str], used_pages: set[str]) -> list[str]:
        n = self.config.bm25_negatives
        if n == 0:
            return []
        hits = self.index.search([query], k=self.config.depth)[0]
        return [d for d, _ in hits if d not in excluded and page_of(d) not in used_pages][:n]

    def question_lines(self, calls: list[CallUse], steps: dict[str, TraceStep], used: set[str]
                       ) -> tuple[list[str], dict[str, int]]:
        """``(jsonl lines, stats)`` for the calls of one question (``used``: its used documents)."""
        stats: Counter = Counter()
        used_pages = {page_of(d) for d in used}
        seen: set[tuple[str, str]] = set()
        lines: list[str] = []
        for call in calls:
            shown_ids = [*(d for d, _ in call.positives), *(d for d, _ in call.negatives), *call.neutral]
            stats["docs_missing_from_corpus"] += sum(d not in self.documents for d in shown_ids)
            positives = [(d, e) for d, e in call.positives if d in self.documents]
            shown = [(d, e) for d, e in call.negatives if d in self.documents]
            for cid in call.call_ids:
                step = steps[cid]
                stats["calls"] += 1
                if not positives:
                    stats["calls_without_use"] += 1
                    continue
                if (step.reasoning, step.query) in seen:
                    stats["dropped_duplicate_call"] += 1
                    continue
                seen.add((step.reasoning, step.query))
                bm25 = self._bm25_negatives(step.query, used | set(shown_ids), used_pages)
                lines.append(tuple_line(
                    cid, step.query, step.reasoning, [self._passage(d, "shown", e) for d, e in positives],
                    [self._passage(d, "shown", e) for d, e in shown] + [self._passage(d, "bm25", 0) for d in bm25],
                    context_dict(step)))
                stats["tuples"] += 1
                stats["positives"] += len(positives)
                stats["negatives_shown"] += len(shown)
                stats["negatives_shown_with_evidence"] += sum(e > 0 for _, e in shown)
                stats["negatives_bm25"] += len(bm25)
                stats["neutral_shown"] += len(call.neutral)
                stats["short_of_bm25_negatives"] += len(bm25) < self.config.bm25_negatives
        return lines, dict(stats)
