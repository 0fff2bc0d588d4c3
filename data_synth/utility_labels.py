"""Utility labels for real agent search calls: a returned document is relevant when the agent later used it.

The pseudo-qrels of the Tongyi dev set (``hopscotch_experiments.agent_data.tongyi_sets.tongyi``) call every document the agent's retriever
returned relevant, which rewards imitating that query-only retriever. These labels come from what the
agent wrote next instead, so no retriever's ranking decides them.

The rule (defaults of :class:`UtilityThresholds`; chosen on the QAMPARI/Tongyi data and audited by hand in
``docs/utility_labels_audit.md``). A *trajectory* is one run of one question: the rows of a Tongyi steps
file with the same ``query_id`` (and the same ``source`` / ``retriever`` when given), in file order. For
each search call (a valid row with a query and returned documents) and each document it returned, the
document's *features* are

* names: spans of 2-4 capitalised words (``of``, ``the``, ``de``, ``for``, ... allowed inside; a span
  neither starts nor ends with a function word such as ``The``, ``However``, ``His``), and single
  capitalised rare words (below);
* words: rare words, i.e. lower-cased words of 4+ letters that are not whole words of the bundled MiniLM
  WordPiece vocabulary (BERT's ~30k commonest English words), nor plurals of one, and occur in at most
  ``max_df`` (1%) of the snippets; and numbers of at least ``min_number_digits`` (3) digits (years).

A feature is *distinctive* when it is neither in the call's queries (all queries of a parallel call),
nor in the trajectory's earlier queries, nor in the reasoning up to the call (its own row's included):
copying the query or the agent's own guesses back does not count. The *later text* is the reasoning of
the next ``window`` (3) rows of the trajectory, then the final answer: the run record's items after its
last tool call (closing reasoning and ``output_text``). The final answer is long prose built from many
documents, so there a name must contain a rare word and a feature must occur in at most
``final_max_docs`` (3) of the documents the trajectory retrieved. Overlapping evidence counts once (a
name inside a longer found name, a word inside a found name). The document is USED (relevance 1) when
its distinctive features newly appearing in the later text include ``>= min_names`` (1) names or
``>= min_words`` (3) rare words and numbers, or (``cite_docids``) the later text cites its docid (the
search tool shows ``<docid: X>`` and the agent writes ids down) and the text up to the call does not.
Matching is whole-word on lower-cased text with punctuation folded to spaces. Calls with no used
document get no labels.

The rule sees *new* information only: a document that merely confirms what the agent already wrote (a
verification search) counts only when its id is cited, and a feature shared by several documents
credits each of them.

Run records (``runs_path``: a BrowseComp-Plus run file or folder) attach to the trajectory of their
question whose rows' reasoning they repeat most often (a steps file may hold several runs of one question,
one per retriever); a trajectory without one is judged on its later reasoning only.

Call ids are those of :func:`hopscotch.data_synth.traces.read_traces` with format ``tongyi``
(``step.query_id``, e.g. ``"7_turn3"``), as the agent experiments' Tongyi dev set
(``hopscotch_experiments.agent_data.tongyi_sets.tongyi``) uses them; the documents of a parallel call are judged once and labelled under each of its queries' ids.

Example::

    from hopscotch.data_synth.utility_labels import utility_qrels
    d = "../shared/data/qampari_tongyi/"
    qrels, stats = utility_qrels(d + "agent_search_steps.jsonl", d + "doc_snippets.jsonl", d + "runs/infly.jsonl")
"""

from __future__ import annotations

import functools
import os
import re
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from hopscotch.data_synth.traces import read_traces
from hopscotch.retriever.errors import FormatError, UsageError
from hopscotch.retriever.io.agent_runs import iter_run_records
from hopscotch.retriever.io.common import iter_lines, parse_nested, read_jsonl
from hopscotch.retriever.io.validate import check_id, check_text
from hopscotch.retriever.model.loading import bundled_minilm_path

Pathish = str | os.PathLike
Evidence = tuple[str, str, str]  # (kind "name" / "word", feature, where "+k" / "final")

#: function words a name span may hold inside but neither start nor end with
_CONNECTORS = frozenset("of the de la le du del da di von van for on in at".split())
_NOT_NAME_EDGE = _CONNECTORS | frozenset(
    "a an this that these those his her its their our my your he she it they we i you there here however "
    "after before during when while although though as by from with but or if then also since until "
    "unless because so yet thus to into and".split())
_TOKEN = re.compile(r"[^\W_][\w'’\-]*|[^\w\s]")
_WORD = re.compile(r"[^\W\d_]{4,}")
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
_FOLD = re.compile(r"[\W_]+")


@dataclass(frozen=True, slots=True)
class UtilityThresholds:
    """The rule's knobs (module doc)."""

    window: int = 3              # later rows whose reasoning counts (the final answer always does)
    min_names: int = 1           # distinctive names newly in the later text that make a document used
    min_words: int = 3           # ... or distinctive rare words and numbers together
    max_df: float = 0.01         # a rare word is in at most this share of the snippets
    min_number_digits: int = 3   # shorter digit groups are not features
    final_max_docs: int = 3      # a final-answer feature counts if at most this many trajectory documents have it
    cite_docids: bool = True     # the document's id written in the later text (not before) makes it used

    def __post_init__(self) -> None:
        if self.window < 0 or min(self.min_names, self.min_words, self.min_number_digits, self.final_max_docs) < 1:
            raise UsageError("utility thresholds: window >= 0; min_names, min_words, min_number_digits, "
                             "final_max_docs >= 1")
        if not 0 < self.max_df <= 1:
            raise UsageError(f"utility thresholds: max_df must be in (0, 1], got {self.max_df}")


@dataclass(frozen=True, slots=True)
class Judgement:
    """One (search call, returned document) verdict with its evidence.

    ``call_ids``: the read_traces ids of the call's queries; ``evidence``: what was found in the later text
    as ``(kind, feature, where)``: kind ``"docid"`` (the document's id, folded), ``"name"`` or ``"word"``
    (rare words, numbers); where the row it was first found in (``"+1"`` = the next row) or ``"final"``;
    ``source``: ``file:line`` of the call's row.
    """

    call_ids: tuple[str, ...]
    docid: str
    used: bool
    evidence: tuple[Evidence, ...]
    source: str


@dataclass(slots=True)
class _Row:
    lineno: int
    reasoning: str
    queries: tuple[str, ...]
    docids: tuple[str, ...]
    valid: bool


def _fold(text: str) -> str:
    """Lower-cased, punctuation folded to single spaces, a space at each end (for whole-word ``in``)."""
    return f" {_FOLD.sub(' ', text.lower()).strip()} "


def _body(text: str) -> str:
    """A snippet without its ``[preview...]`` first line (Tongyi's chunks start with one)."""
    text = text.strip()
    return text.split("\n", 1)[1] if text.startswith("[") and "\n" in text else text


def names(text: str) -> set[str]:
    """Folded spans of 2-4 capitalised words (connectors inside allowed) not starting or ending with a
    function word; every such span of a longer capitalised run is one."""
    out: set[str] = set()
    run: list[str] = []
    for m in [*_TOKEN.finditer(text), None]:
        tok = m.group(0) if m else ""
        if tok[:1].isupper() or (run and tok.lower() in _CONNECTORS):
            run.append(tok)
            continue
        for i in range(len(run)):
            for j in range(i + 2, min(i + 4, len(run)) + 1):
                span = run[i:j]
                if span[0].lower() in _NOT_NAME_EDGE or span[-1].lower() in _NOT_NAME_EDGE:
                    continue
                if sum(1 for w in span if w[:1].isupper()) >= 2:
                    out.add(_fold(" ".join(span)).strip())
        run = []
    return out


def numbers(text: str, min_digits: int) -> set[str]:
    """Digit groups (commas dropped) of at least ``min_digits`` digits."""
    return {n for n in (m.group(0).replace(",", "").rstrip(".") for m in _NUMBER.finditer(text))
            if sum(c.isdigit() for c in n) >= min_digits}


def words(text: str) -> set[str]:
    """Lower-cased words of 4+ letters."""
    return {m.group(0).lower() for m in _WORD.finditer(text)}


def is_common(word: str, common: frozenset[str]) -> bool:
    """Whether ``word`` or its singular (``-s``, ``-es``, ``-ies``) is a common word."""
    return word in common or any(word.endswith(end) and word[:-len(end)] + stem in common
                                 for end, stem in (("s", ""), ("es", ""), ("ies", "y")))


@functools.cache
def common_words() -> frozenset[str]:
    """The whole words of the bundled MiniLM's WordPiece vocabulary: BERT's ~30k commonest English
    (sub)words, so a word outside it is rare in general English (a name, a rare term)."""
    vocab = Path(bundled_minilm_path()) / "vocab.txt"
    return frozenset(w for _, w in iter_lines(vocab) if w.isalpha() and w.islower())


def _read_rows(path: Path) -> dict[tuple, list[_Row]]:
    """The steps file's trajectories ``{(query_id, source, retriever): rows in file order}``."""
    expected = "a Tongyi search step {query_id, reasoning, search_query, retrieved_docids}"
    out: dict[tuple, list[_Row]] = defaultdict(list)
    for lineno, obj in read_jsonl(path, expected):
        qid = check_id(obj.get("query_id", obj.get("qid")), path, lineno, "a 'query_id'")
        reasoning = obj.get("reasoning")
        reasoning = "" if reasoning is None else check_text(reasoning, path, lineno, "a string 'reasoning'")
        queries = parse_nested(obj.get("search_query"), path, lineno, "'search_query'")
        queries = [] if queries is None else [queries] if isinstance(queries, str) else queries
        if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
            raise FormatError(path, lineno, "'search_query' as a string, a list of strings or null",
                              repr(obj.get("search_query"))[:80])
        docids = obj.get("retrieved_docids") or []
        if not isinstance(docids, list):
            raise FormatError(path, lineno, "'retrieved_docids' as a list of docids", repr(docids)[:80])
        docids = [check_id(d, path, lineno, "a docid in 'retrieved_docids'") for d in docids]
        key = (qid, str(obj.get("source", "")), str(obj.get("retriever", "")))
        out[key].append(_Row(lineno, reasoning.strip(), tuple(q.strip() for q in queries if q.strip()),
                             tuple(dict.fromkeys(docids)), obj.get("valid") is not False))
    return out


def _read_snippets(path: Path) -> dict[str, str]:
    out = {}
    for lineno, obj in read_jsonl(path, "a snippet {docid, text}"):
        docid = check_id(obj.get("docid"), path, lineno, "a 'docid'")
        out[docid] = _body(check_text(obj.get("text"), path, lineno, "a string 'text'"))
    return out


def _run_text(record: dict, where: str) -> tuple[set[str], str]:
    """A run record's reasoning texts and its final text (the items after its last tool call)."""
    path, _, line = where.rpartition(":")
    path, lineno = (path, int(line)) if line.isdigit() else (where, 1)
    items = parse_nested(record.get("result"), path, lineno, "'result'", strict=True) or []
    reasoning, tail = set(), []
    for item in items:
        item = parse_nested(item, path, lineno, "a 'result' item", strict=True)
        if not isinstance(item, dict):
            raise FormatError(path, lineno, "'result' items as objects with a 'type'", repr(item)[:80])
        if item.get("type") == "tool_call":
            tail = []
            continue
        output = parse_nested(item.get("output"), path, lineno, "an item's 'output'")
        text = "\n".join(map(str, output)) if isinstance(output, list) else str(output or "")
        tail.append(text)
        if item.get("type") == "reasoning":
            reasoning.add(text.strip())
    return reasoning, "\n\n".join(tail)


def _final_answers(runs_path: Path | None, trajectories: dict[tuple, list[_Row]]) -> dict[tuple, str]:
    """``{trajectory key: final text}``, each run record attached as the module doc says."""
    if runs_path is None:
        return {}
    if not runs_path.exists():
        raise FormatError(runs_path, None, "an existing run file or folder", "no such file")
    by_question: dict[str, list[tuple]] = defaultdict(list)
    for key in trajectories:
        by_question[key[0]].append(key)
    out: dict[tuple, str] = {}
    for where, record in iter_run_records(runs_path):
        reasoning, final = _run_text(record, where)
        qid = str(record.get("query_id", record.get("qid", "")))
        scored = sorted(((sum(r.reasoning in reasoning for r in trajectories[k] if r.reasoning), k)
                         for k in by_question.get(qid, ())), reverse=True)
        if scored and (scored[0][0] > 0 or len(scored) == 1) and scored[0][1] not in out:
            out[scored[0][1]] = final
    return out


def _features(snippets: dict[str, str], th: UtilityThresholds) -> dict[str, tuple[set[str], set[str]]]:
    """``{docid: (names, rare words and numbers)}`` of every snippet."""
    df: Counter[str] = Counter()
    for text in snippets.values():
        df.update(words(text))
    common, max_df = common_words(), max(1.0, th.max_df * len(snippets))  # a word in one snippet is rare
    out = {}
    for docid, text in snippets.items():
        rare = {w for w in words(text) if df[w] <= max_df and not is_common(w, common)}
        proper = rare & {w.lower() for w in _WORD.findall(text) if w[0].isupper()}  # one-word names
        out[docid] = (names(text) | proper, (rare - proper) | numbers(text, th.min_number_digits))
    return out


def _call_ids(steps_path: Path) -> dict[int, tuple[str, ...]]:
    """``{line number: read_traces query ids}`` of the steps file's valid search calls with a query."""
    out: dict[int, list[str]] = defaultdict(list)
    for step in read_traces([steps_path], "tongyi"):
        if step.query and not step.failed:
            out[int(step.source.rsplit(":", 1)[1])].append(step.query_id)
    return {k: tuple(v) for k, v in out.items()}


def _independent(evidence: list[Evidence]) -> list[Evidence]:
    """Evidence without overlaps: no name inside a longer found name, no word inside a found name."""
    found = [f" {f} " for k, f, _ in evidence if k == "name"]
    return [(k, f, w) for k, f, w in evidence if not any(f" {f} " in g and f" {f} " != g for g in found)]


def _judge(steps_path: Path, snippets_path: Path, runs_path: Path | None, th: UtilityThresholds,
           info: dict) -> Iterator[Judgement]:
    trajectories = _read_rows(steps_path)
    snippets = _read_snippets(snippets_path)
    finals = _final_answers(runs_path, trajectories)
    ids, features, common = _call_ids(steps_path), _features(snippets, th), common_words()
    info.update(trajectories=len(trajectories), runs_attached=len(finals), docs_without_snippet=0)
    for key, rows in trajectories.items():
        final, later = _fold(finals.get(key, "")), [_fold(r.reasoning) for r in rows]
        spread: Counter[str] = Counter()  # in how many of the trajectory's documents each feature is
        for docid in {d for r in rows for d in r.docids if d in features}:
            spread.update(features[docid][0] | features[docid][1])
        for i, row in enumerate(rows):
            call_ids = ids.get(row.lineno, ())
            if not (row.valid and row.queries and row.docids and call_ids):
                continue
            so_far = rows[:i + 1]
            before = _fold("\n".join([r.reasoning for r in so_far] + [q for r in so_far for q in r.queries]))
            before_words = set(before.split())
            window = [(f"+{k}", later[i + k]) for k in range(1, th.window + 1) if i + k < len(rows)]
            window.append(("final", final))
            info["docs_without_snippet"] += sum(d not in features for d in row.docids)
            for docid in (d for d in row.docids if d in features):
                cand_names = {n for n in features[docid][0] if f" {n} " not in before}
                cand_words = features[docid][1] - before_words
                cite = {_fold(docid).strip()} if th.cite_docids and _fold(docid) not in before else set()
                evidence: list[Evidence] = []
                for label, span in window:
                    if label == "final":  # long prose from many documents: rare names, specific features
                        cand_names = {n for n in cand_names if spread[n] <= th.final_max_docs
                                      and not all(is_common(w, common) for w in n.split())}
                        cand_words = {w for w in cand_words if spread[w] <= th.final_max_docs}
                    for kind, cands in (("docid", cite), ("name", cand_names), ("word", cand_words)):
                        found = sorted(f for f in cands if f" {f} " in span)
                        cands.difference_update(found)
                        evidence += [(kind, f, label) for f in found]
                evidence = _independent(evidence)
                kinds = Counter(k for k, _, _ in evidence)
                used = kinds["docid"] > 0 or kinds["name"] >= th.min_names or kinds["word"] >= th.min_words
                yield Judgement(call_ids, docid, used, tuple(evidence), f"{steps_path}:{row.lineno}")


def judge_calls(steps_path: Pathish, snippets_path: Pathish, runs_path: Pathish | None = None,
                thresholds: UtilityThresholds | None = None) -> Iterator[Judgement]:
    """A :class:`Judgement` for every (search call, returned document with a snippet), in trajectory order.

    Raises :class:`FormatError` naming file and line for malformed input or a missing file.
    """
    yield from _judge(Path(steps_path), Path(snippets_path), None if runs_path is None else Path(runs_path),
                      thresholds or UtilityThresholds(), {})


def utility_qrels(steps_path: Pathish, snippets_path: Pathish, runs_path: Pathish | None = None,
                  **thresholds) -> tuple[dict[str, dict[str, int]], dict]:
    """``({call_id: {docid: 1}}, stats)``: the documents each search call returned that the agent later
    used (module doc); calls with none are left out. ``thresholds``: fields of :class:`UtilityThresholds`.

    ``stats``: ``calls`` (search calls judged, one per query id), ``calls_labelled``, ``pairs`` (call,
    document) judged once per row, ``pairs_used``, ``share_used``, ``docs_per_labelled_call`` (mean),
    ``used_by`` (used pairs with evidence in the later reasoning / in the final answer only; with their id
    cited / else with a name / else with words), ``trajectories``, ``runs_attached``, ``docs_without_snippet``,
    ``thresholds``.
    Raises :class:`FormatError` naming file and line for malformed input or a missing file.
    """
    known = {f.name for f in fields(UtilityThresholds)}
    if set(thresholds) - known:
        raise UsageError(f"unknown utility thresholds {sorted(set(thresholds) - known)}; known: {sorted(known)}")
    th = UtilityThresholds(**thresholds)
    info: dict = {}
    qrels: dict[str, dict[str, int]] = {}
    calls: set[str] = set()
    pairs, used = 0, Counter()
    for j in _judge(Path(steps_path), Path(snippets_path), None if runs_path is None else Path(runs_path), th, info):
        calls.update(j.call_ids)
        pairs += 1
        if j.used:
            used["all"] += 1
            kinds = Counter(k for k, _, _ in j.evidence)
            used["cited" if kinds["docid"] else "name" if kinds["name"] >= th.min_names else "words"] += 1
            used["final_only" if all(w == "final" for _, _, w in j.evidence) else "later_reasoning"] += 1
            for cid in j.call_ids:
                qrels.setdefault(cid, {})[j.docid] = 1
    stats = {"calls": len(calls), "calls_labelled": len(qrels), "pairs": pairs, "pairs_used": used["all"],
             "share_used": round(used["all"] / pairs, 4) if pairs else 0.0,
             "docs_per_labelled_call": round(sum(map(len, qrels.values())) / len(qrels), 3) if qrels else 0.0,
             "used_by": {k: used[k] for k in ("later_reasoning", "final_only", "cited", "name", "words")},
             **info, "thresholds": asdict(th)}
    return qrels, stats


def questions_of(calls: dict[str, dict[str, int]], steps_path: Pathish) -> dict[str, dict[str, int]]:
    """Call-level labels (:func:`utility_qrels`) unioned per question: ``{question_id: {docid: 1}}``."""
    question_of = {step.query_id: step.question_id for step in read_traces([Path(steps_path)], "tongyi")}
    qrels: dict[str, dict[str, int]] = {}
    for call_id, docs in calls.items():
        qrels.setdefault(question_of[call_id], {}).update(docs)
    return qrels


def question_qrels(steps_path: Pathish, snippets_path: Pathish, runs_path: Pathish | None = None,
                   **thresholds) -> tuple[dict[str, dict[str, int]], dict]:
    """``({question_id: {docid: 1}}, stats)``: QUESTION-LEVEL labels, what any run of the question used anywhere
    (:func:`questions_of` of :func:`utility_qrels`): a call is judged against its question's documents, whatever it
    returned; only the pool bounds them. ``stats``: ``questions_labelled``, ``docs_per_question``, ``call_level``."""
    calls, call_stats = utility_qrels(steps_path, snippets_path, runs_path, **thresholds)
    qrels = questions_of(calls, steps_path)
    mean = round(sum(map(len, qrels.values())) / len(qrels), 3) if qrels else 0.0
    return qrels, {"questions_labelled": len(qrels), "docs_per_question": mean, "call_level": call_stats}
