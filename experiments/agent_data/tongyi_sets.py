"""The Tongyi-DeepResearch evaluation sets: held-out search calls of ``shared/data/qampari_tongyi`` under several
label rules and in two input shapes. Splits: the 4 dev trajectories (10-13) tune, the 7 test trajectories test
(:mod:`.splits`); only calls that returned documents.

Input shapes (what the searcher is given as the call's reasoning):

* **turn** (the shape a harness sends): the thinking of the call's own turn, the row's ``reasoning`` (the thinking
  since the last tool result); after a call the wrapper rejected, no reasoning at all (AgentIR's search tool,
  ``skip_failed_reasonings``: that turn's thinking is about the failed call's format). Nothing else: no earlier
  queries, no earlier results. Mean 103 words.
* **accumulated**: all the thinking of the trajectory so far (the rows' thinking joined), with the earlier
  queries and the previous call's results as context fields. Mean 2,728 words.

Labels:

* **question-level** (``tongyi_question``, ``tongyi_turn``, and the ``pages`` ones): every document that any run of
  the question used anywhere in its trajectory (:func:`hopscotch.data_synth.utility_labels.question_qrels`),
  whatever this call returned; only the pool (what the runs' three query-only retrievers returned) bounds them.
* **new-evidence** (``..._new``): the question-level documents minus those the call's trajectory had already been
  shown before this call: an agent gains only from what it has not yet seen, and accumulated thinking names
  what it has read. Calls left with no new document are dropped.
* call-level (``tongyi_utility``) and pseudo-qrels (``tongyi``, ``tongyi_pages``): bounded by the call's own
  retriever; reported, never voting.

Pages: each Wikipedia article's chunks joined in chunk order (1,597 pages), written under ``work/tongyi_pages``.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from pathlib import Path

from hopscotch_experiments.agent_data.eval_set import EvalSet, finish_set, step_record
from hopscotch_experiments.agent_data.splits import data_dir, splits

from hopscotch.data_synth.traces import read_traces
from hopscotch.data_synth.utility_labels import questions_of, utility_qrels
from hopscotch.retriever.io.common import read_jsonl, write_jsonl

QUESTION_LABELS = ("QUESTION-LEVEL: every document any run of the question used anywhere in its trajectory "
                   "(data_synth/utility_labels.py: question_qrels), whatever the call returned")
NEW_LABELS = ("NEW-EVIDENCE: the question-level documents the call's trajectory had not been shown before this "
              "call")
TURN = "the call's own turn of thinking (a harness's input; none after a rejected call)"
ACCUMULATED = "all the thinking so far (accumulated)"
#: name -> (title, labels, input shape, pages?, new-evidence?) of the question-level and new-evidence sets: every
#: combination of the labels, the input shape and chunks or pages
SHAPED = {
    f"tongyi{'_pages' * pages}_{shape_name}{'_new' * new}": (
        f"Tongyi{' pages' * pages}, {shape_title}, {'new-evidence' if new else 'question-level'} labels",
        NEW_LABELS if new else QUESTION_LABELS, shape, pages, new)
    for new in (False, True)
    for shape_name, shape_title, shape in (("turn", "current turn", TURN),
                                           ("question", "accumulated thinking", ACCUMULATED))
    for pages in (False, True)
}
TITLES = {name: spec[0] for name, spec in SHAPED.items()} | {
    "tongyi_utility": "Tongyi, call-level utility labels (biased)",
    "tongyi": "Tongyi long reasoning (pseudo-qrels)", "tongyi_pages": "Tongyi, long pages (pseudo-qrels)"}
LABELS = {name: spec[1] + (", at page level" if spec[3] else "") for name, spec in SHAPED.items()} | {
    "tongyi_utility": "CALL-LEVEL utility: documents THIS call's query-only retriever returned and the agent later "
                      "used (bounded by that retriever: a documented example of the bias)",
    "tongyi": "PSEUDO-QRELS: every document the agent's own query-only retriever returned",
    "tongyi_pages": "PSEUDO-QRELS: the pages of the agent's own query-only retriever's results"}
_POOL = ("pool: what the Tongyi runs' three query-only dense retrievers (qwen3-0.6b, infly, contriever) returned to "
         "any call")
BOUNDS = {name: ("labels: not the call's retriever (question-level"
                 + ("; minus what the trajectory was shown before the call" if spec[4] else "") + "); "
                 + _POOL + (", at page level" if spec[3] else "")) for name, spec in SHAPED.items()} | {
    "tongyi_utility": "labels: BOUNDED by the call's own query-only retriever (only what it returned can be "
                      "relevant); " + _POOL,
    "tongyi": "labels: ARE the call's query-only retriever's output (pseudo-qrels)",
    "tongyi_pages": "labels: ARE the call's query-only retriever's output, at page level (pseudo-qrels)"}
#: sets whose labels the call's own query-only retriever bounds: they punish every use of the reasoning by
#: construction and vote on no default
CALL_LEVEL = {"tongyi", "tongyi_pages", "tongyi_utility"}
#: sets searched over another set's corpus share its index
INDEX_NAMES = {"tongyi_utility": "tongyi"} | {name: "tongyi_pages" if spec[3] else "tongyi"
                                              for name, spec in SHAPED.items()}


def _steps_path() -> Path:
    return data_dir() / "qampari_tongyi" / "agent_search_steps.jsonl"


def tongyi() -> EvalSet:
    """The held-out calls that returned documents, accumulated thinking, PSEUDO-QRELS (the call's own results)."""
    path = _steps_path()
    rows = dict(read_jsonl(path, "a Tongyi search step"))
    by_question: dict[str, list] = {}
    for step in read_traces([path], "tongyi"):
        raw = rows[int(step.source.rsplit(":", 1)[1])]
        docids = raw.get("retrieved_docids")
        if step.failed or not isinstance(docids, list) or not docids:
            continue
        row = step_record(step.query_id, step)
        by_question.setdefault(step.question_id, []).append((row, {str(d): 1 for d in docids}))
    s = splits("qampari_tongyi")
    return finish_set("tongyi", path.parent / "doc_snippets.jsonl", by_question, s["dev"], s["test"],
                      "PSEUDO-QRELS: relevant = the documents the agent's own retriever returned for the call "
                      "(distillation-style labels, not human judgements); search calls of the 7 held-out "
                      "trajectories that returned documents, reasoning = all the thinking so far; tuned on the "
                      "4 dev trajectories", LABELS["tongyi"], False)


def page_of(docid: str) -> str:
    """The page (article) of a chunk id ``<article>__<chunk>``."""
    return str(docid).partition("__")[0]


def pages_corpus(work: Path) -> Path:
    """``work/tongyi_pages/corpus.jsonl``: each article's chunks joined in chunk order (written once; derived from
    shared data, never copied into the project)."""
    corpus = Path(work) / "tongyi_pages" / "corpus.jsonl"
    if not corpus.is_file():
        parts: dict[str, list[tuple[int, str]]] = {}
        for _, row in read_jsonl(data_dir() / "qampari_tongyi" / "doc_snippets.jsonl", "a snippet {docid, text}"):
            article, _, index = str(row["docid"]).partition("__")
            text = row["text"]
            if text.startswith("[") and "\n" in text:  # "[preview...]\n" header, then the chunk (title first)
                text = text.split("\n", 1)[1]
            parts.setdefault(article, []).append((int(index or 0), text))
        corpus.parent.mkdir(parents=True, exist_ok=True)
        write_jsonl(corpus, [{"_id": a, "title": "", "text": "\n".join(t for _, t in sorted(p))}
                             for a, p in parts.items()])
    return corpus


def tongyi_pages(work: Path) -> EvalSet:
    """The ``tongyi`` calls against pages (:func:`pages_corpus`), relevant = the pages of the pseudo-qrel chunks."""
    chunks = tongyi()
    qrels = {q: {page_of(d): 1 for d in rel} for q, rel in chunks.qrels.items()}
    note = ("PSEUDO-QRELS as `tongyi`, at page level: the same calls against 1,597 pages, each an article's "
            "chunks joined in order (median 96 words, 262 pages over 160 words, the longest 2,550); relevant = "
            "the pages holding the call's pseudo-qrel chunks")
    return EvalSet("tongyi_pages", pages_corpus(work), chunks.queries, qrels, chunks.tune, chunks.test, note,
                   chunks.counts, LABELS["tongyi_pages"], False)


@functools.lru_cache(maxsize=2)
def _usage_labels(src: str) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, int]]]:
    """``(call-level, question-level)`` usage labels of the Tongyi steps under ``src``: the usage rule runs once a
    process for every set built from it."""
    folder = Path(src)
    steps = folder / "agent_search_steps.jsonl"
    calls, _ = utility_qrels(steps, folder / "doc_snippets.jsonl", folder / "runs" / "infly.jsonl")
    return calls, questions_of(calls, steps)


def tongyi_utility() -> EvalSet:
    """The ``tongyi`` calls relabelled by use (:func:`hopscotch.data_synth.utility_labels.utility_qrels`): a
    returned document is relevant when the agent's later reasoning or final answer newly names its distinctive
    content (or cites its id); calls with no used document are dropped."""
    chunks = tongyi()
    qrels, _ = _usage_labels(str(data_dir() / "qampari_tongyi"))
    keep = {q for q in chunks.qrels if qrels.get(q)}
    tune, test, queries = chunks.subset(keep)
    note = ("UTILITY LABELS: the `tongyi` calls (all the thinking so far as reasoning, chunk corpus), relevant = the "
            "returned documents whose distinctive names, rare words or numbers the agent newly wrote in its next 3 "
            "steps' reasoning or its final answer, or whose id it cited (rule: data_synth/utility_labels.py; hand "
            "audit 26/30: docs/utility_labels_audit.md); only calls with a used document")
    return EvalSet("tongyi_utility", chunks.corpus, queries, {q: qrels[q] for q in chunks.qrels if q in keep}, tune,
                   test, note, {"tune_steps": len(tune), "test_steps": len(test)}, LABELS["tongyi_utility"], False,
                   INDEX_NAMES["tongyi_utility"])


@functools.lru_cache(maxsize=2)
def trajectory_history(steps_path: str) -> dict[str, tuple[bool, frozenset[str]]]:
    """``{call id: (after a rejected call, docids shown before)}`` for every step of a Tongyi steps file: whether the
    previous call of the same trajectory (one run of one question: its ``query_id``, ``retriever`` and ``source``)
    was rejected (``valid: false``), and every docid the trajectory's earlier calls returned."""
    path = Path(steps_path)
    rows = dict(read_jsonl(path, "a Tongyi search step"))
    shown: dict[tuple, set[str]] = defaultdict(set)
    failed_last: dict[tuple, bool] = defaultdict(bool)
    by_line: dict[int, tuple[bool, frozenset[str]]] = {}
    for lineno, row in sorted(rows.items()):
        run = (str(row.get("query_id")), str(row.get("retriever") or ""), str(row.get("source") or ""))
        by_line[lineno] = (failed_last[run], frozenset(shown[run]))
        docids = row.get("retrieved_docids")
        shown[run].update(str(d) for d in docids or () if isinstance(docids, list))
        failed_last[run] = row.get("valid") is False
    return {s.query_id: by_line[int(s.source.rsplit(":", 1)[1])] for s in read_traces([path], "tongyi")}


def turn_record(row: dict, after_rejected: bool) -> dict:
    """A call's query record in the harness's shape: its query and its own turn's thinking (none after a rejected
    call), no other context."""
    reasoning = None if after_rejected else (row.get("current_reasoning") or None)
    return {"_id": row["_id"], "text": row["text"], "reasoning": reasoning}


def shaped_set(name: str, work: Path | None = None) -> EvalSet:
    """One of :data:`SHAPED`: the held-out calls with question-level or new-evidence labels, at chunk or page level,
    in the turn or accumulated shape."""
    title, labels, shape, pages, new = SHAPED[name]
    chunks = tongyi()
    _, by_question = _usage_labels(str(data_dir() / "qampari_tongyi"))
    history = trajectory_history(str(_steps_path()))
    question_of = {row["_id"]: row["_id"].rsplit("_turn", 1)[0] for row in chunks.queries}
    unit = page_of if pages else str
    qrels = {}
    for q in chunks.qrels:
        rel = {unit(d): 1 for d in by_question.get(question_of[q], {})}
        if new:
            seen = {unit(d) for d in history[q][1]}
            rel = {d: g for d, g in rel.items() if d not in seen}
        if rel:
            qrels[q] = rel
    tune, test, queries = chunks.subset(qrels)
    if shape == TURN:
        queries = [turn_record(row, history[row["_id"]][0]) for row in queries]
    corpus = pages_corpus(work) if pages else chunks.corpus
    note = (f"{title}: the held-out Tongyi calls over {'1,597 pages' if pages else 'the 2,348 chunks'}; reasoning = "
            f"{shape}; relevant = {labels}; " + _POOL + "; tuned on the 4 dev trajectories")
    return EvalSet(name, corpus, queries, qrels, tune, test, note, {"tune_steps": len(tune), "test_steps": len(test)},
                   LABELS[name], True, INDEX_NAMES[name])


BUILDERS = {"tongyi": lambda work: tongyi(), "tongyi_pages": tongyi_pages, "tongyi_utility": lambda work: tongyi_utility()
            } | {name: functools.partial(lambda name, work: shaped_set(name, work), name) for name in SHAPED}
