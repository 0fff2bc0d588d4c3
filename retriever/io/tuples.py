"""Training tuples: the one reader and writer of DR-Synth / Tevatron / AgentIR training JSONL.

A tuple is ``{query_id, query, reasoning?, current_reasoning?, prior_queries?, prior_results?,
positive_passages: [{docid, title, text, score?}], negative_passages}``; the optional context fields are those of
:func:`hopscotch.retriever.io.queries.parse_context_fields` (DR-Synth writes what its traces know, so
training can pick or mix query input variants).
AgentIR's files carry no ``reasoning`` field but a query string ``Reasoning: ...\\n\\nQuery: ...``;
it is split back into the two so the reasoning can be cut from the left at training time.
Passage docids are read through :func:`hopscotch.retriever.io.docids.canonical_docid`.
A passage's optional ``score`` is a teacher's score of it for the query (DR-Synth writes its oracle's score on
every passage it keeps; Tevatron's ``train_distil`` reads the same per-passage field): a finite number, read into
:attr:`Passage.score` (None where absent, so files without scores read as before); the distillation losses
(``loss.distill``) need it on every passage: ``read_training_tuples(..., scores_for="loss.distill: kl")``.
Other passage fields are left to their writers and not read: ``hopscotch synth --mode trajectory-use``
(:mod:`hopscotch.data_synth.trajectory_use`) adds ``origin`` (``"shown"`` / ``"bm25"``) and ``evidence`` (a count).
:func:`tuple_line` writes one line (DR-Synth's output); :func:`read_training_tuples` reads files,
folders or, online, Hugging Face datasets.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hopscotch.retriever.errors import FormatError, UsageError
from hopscotch.retriever.io.common import read_jsonl
from hopscotch.retriever.io.docids import canonical_docid, signed_docid_hash
from hopscotch.retriever.io.queries import parse_context_fields
from hopscotch.retriever.io.tevatron import TevatronIdResolver
from hopscotch.retriever.io.validate import check_id, check_text

_AGENTIR_QUERY = re.compile(r"^\s*Reasoning:\s*(.*?)\n\nQuery:\s*(.*)$", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Passage:
    docid: str
    title: str
    text: str
    score: float | None = None   # the teacher's (DR-Synth's oracle's) score for the tuple's query; None: none given


@dataclass(slots=True)
class TrainingTuple:
    query_id: str
    query: str
    reasoning: str | None
    positives: list[Passage]
    negatives: list[Passage]
    current_reasoning: str | None = None
    prior_queries: tuple[str, ...] | None = None
    prior_results: tuple[dict, ...] | None = None

    @property
    def length(self) -> int:
        """A cheap size proxy (characters) used to group similar-length tuples."""
        return len(self.query) + len(self.reasoning or "")


def _passage(obj, path, lineno, field: str) -> Passage:
    if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
        raise FormatError(path, lineno, f"'{field}' entries as {{docid, title, text}} objects with a string text",
                          repr(obj)[:80])
    text = check_text(obj["text"], path, lineno, f"a '{field}' text")
    title = check_text(obj.get("title") or "", path, lineno, f"a '{field}' title")
    docid = obj.get("docid", obj.get("_id", obj.get("id")))
    if docid is not None:
        docid = canonical_docid(check_id(docid, path, lineno, f"a '{field}' docid"))
    else:
        docid = f"text:{signed_docid_hash(title + chr(0) + text):x}"
    score = obj.get("score")
    if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))
                              or not math.isfinite(score)):
        raise FormatError(path, lineno, f"a finite number as the 'score' of '{field}' entries (the teacher's)",
                          repr(score)[:80])
    return Passage(docid, title, text, None if score is None else float(score))


def parse_tuple(obj: dict, path, lineno) -> TrainingTuple:
    """One JSONL record to a :class:`TrainingTuple`; hard negatives equal to a positive are dropped.

    Checked (a :class:`FormatError` naming file and line): ``query`` a non-empty string, ``query_id`` a
    string or integer id, passages ``{docid?, title?, text}`` with string texts and ids without control
    characters, and the context fields of :func:`~hopscotch.retriever.io.queries.parse_context_fields`.
    """
    query = obj.get("query")
    if not isinstance(query, str) or not query.strip():
        raise FormatError(path, lineno, "a non-empty string 'query'", f"keys {sorted(obj)[:8]}")
    query = check_text(query, path, lineno, "a string 'query'")
    qid = obj.get("query_id", obj.get("qid", obj.get("_id")))
    if qid is None:
        raise FormatError(path, lineno, "a 'query_id'", f"keys {sorted(obj)[:8]}")
    qid = check_id(qid, path, lineno, "a 'query_id'")
    context = parse_context_fields(obj, path, lineno)
    reasoning = context.pop("reasoning")
    if reasoning is None and (m := _AGENTIR_QUERY.match(query)):
        reasoning, query = m.group(1).strip(), m.group(2).strip()
        reasoning = None if reasoning in ("", "Empty") else reasoning
    for key in ("positive_passages", "negative_passages"):
        if not isinstance(obj.get(key, []), list):
            raise FormatError(path, lineno, f"'{key}' as a list", type(obj.get(key)).__name__)
    positives = [_passage(x, path, lineno, "positive_passages") for x in obj.get("positive_passages") or []]
    if not positives:
        raise FormatError(path, lineno, "at least one entry in 'positive_passages'", "none")
    pos_ids = {p.docid for p in positives}
    seen, negatives = set(), []
    for x in obj.get("negative_passages") or []:
        neg = _passage(x, path, lineno, "negative_passages")
        if neg.docid not in pos_ids and neg.docid not in seen:
            seen.add(neg.docid)
            negatives.append(neg)
    return TrainingTuple(qid, query, reasoning, positives, negatives, **context)


def tuple_source_files(source: str | os.PathLike, what: str = "data.train",
                       suffixes: tuple[str, ...] = (".jsonl", ".jsonl.gz")) -> list[Path]:
    """The tuple files of ``source``: a folder's files ending in ``suffixes``, sorted, or ``[source]``; an empty
    folder is a :class:`UsageError` that names ``what`` (the key or flag that gave it)."""
    p = Path(source)
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.name.endswith(suffixes))
        if not files:
            raise UsageError(f"{what}: {source} is a folder without *.jsonl files")
        return files
    return [p]


#: names that are files, never Hugging Face dataset ids (``runs/tuples.jsonl`` is shaped like ``org/name``)
_FILE_SUFFIXES = (".jsonl", ".json", ".gz", ".parquet", ".tsv", ".csv", ".txt")


def _hf_rows(name: str) -> Iterable[tuple[int, dict]]:
    if os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1":
        raise UsageError(f"data.train: {name!r} is not a local file and the Hugging Face hub is offline "
                         "(HF_HUB_OFFLINE=1)")
    import datasets

    name, _, split = name.partition(":")
    try:
        rows = datasets.load_dataset(name, split=split or "train")
    except Exception as exc:  # noqa: BLE001 - the hub's many failures (offline, unknown, gated, bad split): one line
        raise UsageError(f"data.train: {name!r} is no local file, and the Hugging Face hub gave no dataset of that "
                         f"name ({type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''})") from None
    for i, row in enumerate(rows, start=1):
        yield i, dict(row)


def read_training_tuples(sources: str | os.PathLike | Sequence[str | os.PathLike],
                         corpus: str | os.PathLike | None = None, scores_for: str | None = None) -> list[TrainingTuple]:
    """Read tuples from JSONL files or folders (or ``org/name[:split]`` Hugging Face datasets when online).

    Rows in Tevatron's newer format (``query_text``, ``positive_document_ids``, ...) are resolved against
    ``corpus`` by :class:`hopscotch.retriever.io.tevatron.TevatronIdResolver`. ``scores_for`` (what needs them,
    e.g. ``"loss.distill: kl"``): every passage must carry a ``score``; the first tuple without one is a one-line
    :class:`UsageError` naming its file and line.
    """
    resolver = TevatronIdResolver(corpus)

    def parse(obj: dict, path, lineno) -> TrainingTuple:
        t = parse_tuple(resolver.expand(obj, path, lineno), path, lineno)
        if scores_for:
            check_scores(t, path, lineno, scores_for)
        return t

    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    tuples: list[TrainingTuple] = []
    for source in sources:
        source = str(source)
        if Path(source).exists():
            for f in tuple_source_files(source):
                tuples.extend(parse(obj, f, n) for n, obj in read_jsonl(f, "a training tuple object"))
        elif re.fullmatch(r"[\w.-]+/[\w.-]+(:\w+)?", source) and not source.endswith(_FILE_SUFFIXES):
            tuples.extend(parse(obj, source, n) for n, obj in _hf_rows(source))
        else:
            raise UsageError(f"data.train: {source}: no such file or folder")
    if not tuples:
        raise UsageError(f"data.train: no training tuples in {list(map(str, sources))}")
    return tuples


def check_scores(t: TrainingTuple, path, lineno, scores_for: str) -> None:
    """A :class:`UsageError` naming ``path:lineno`` unless every passage of ``t`` carries a teacher score."""
    for field, passages in (("positive_passages", t.positives), ("negative_passages", t.negatives)):
        missing = next((p for p in passages if p.score is None), None)
        if missing is not None:
            raise UsageError(f"{path}:{lineno}: {scores_for} needs a teacher 'score' on every passage; tuple "
                             f"{t.query_id!r} has none on {field} {missing.docid!r} (tuples written before DR-Synth "
                             "kept its oracle's scores: rerun hopscotch synth, or set loss.distill: none)")


def passage_dict(docid: str, title: str | None, text: str, score: float | None = None) -> dict:
    """A ``{docid, title, text}`` entry of ``positive_passages`` / ``negative_passages``, with ``score`` (the
    teacher's, Tevatron's distillation field) after them when given."""
    out = {"docid": docid, "title": title or "", "text": text}
    if score is not None:
        out["score"] = float(score)
    return out


def tuple_line(query_id: str, query: str, reasoning: str | None, positives: Sequence[dict],
               negatives: Sequence[dict], context: dict | None = None) -> str:
    """One training line (no newline); ``positives``/``negatives`` are :func:`passage_dict` entries.

    ``context`` adds the step's other context fields (``current_reasoning``, ``prior_queries``,
    ``prior_results``: see :func:`hopscotch.retriever.io.queries.context_dict`) after ``reasoning``;
    None values are left out, so a line without them is as before.
    """
    row = {"query_id": query_id, "query": query, "reasoning": reasoning}
    row.update({k: v for k, v in (context or {}).items() if v is not None and k != "reasoning"})
    row.update(positive_passages=list(positives), negative_passages=list(negatives))
    return json.dumps(row, ensure_ascii=False)
