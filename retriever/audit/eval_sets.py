"""The two sides of the contamination audit: evaluation sets (``NAME=SPEC``) and training texts.

An evaluation set is given as ``NAME=PATH[:QRELS[:CORPUS]]``:

* ``PATH`` a BEIR folder: ``queries.jsonl`` inside, its qrels (``qrels.tsv``, ``qrels/test.tsv``, ...) when
  present, its ``corpus.jsonl`` when present;
* ``PATH`` a queries file (JSONL or TSV): no qrels and no corpus unless given;
* ``QRELS`` / ``CORPUS`` (either may be left empty: ``NAME=FOLDER::CORPUS``) name or override them.

Answers are read from the query records' ``answers`` / ``answer`` / ``answer_aliases`` fields (strings or lists of
them, nested lists flattened). Training texts come from tuple files (DR-Synth / Tevatron JSONL, read by
:func:`hopscotch.retriever.io.tuples.read_training_tuples`), queries files or corpora (:class:`TrainingItem`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.corpus import read_corpus
from hopscotch.retriever.io.qrels import Qrels, read_qrels
from hopscotch.retriever.io.queries import Query, read_queries
from hopscotch.retriever.io.tuples import read_training_tuples

ANSWER_FIELDS = ("answers", "answer", "answer_aliases")
_QRELS_NAMES = ("qrels.tsv", "qrels/test.tsv", "qrels.jsonl", "qrels.txt")
_CORPUS_NAMES = ("corpus.jsonl", "corpus.jsonl.gz", "corpus.parquet")


@dataclass
class EvalSet:
    """One evaluation set: its queries (with answers in ``Query.extra``), qrels (may be empty) and corpus path."""

    name: str
    queries: list[Query]
    qrels: Qrels = field(default_factory=dict)
    corpus: str | None = None
    spec: str = ""

    def answers(self, query: Query) -> list[str]:
        """Every answer string of a query record (module doc)."""
        out: list[str] = []

        def walk(value) -> None:
            if isinstance(value, str):
                out.append(value)
            elif isinstance(value, (list, tuple)):
                for v in value:
                    walk(v)

        for key in ANSWER_FIELDS:
            walk(query.extra.get(key))
        return out

    def relevant(self) -> dict[str, list[str]]:
        """``{docid: [qid, ...]}`` of the relevant (grade > 0) documents of the set's queries."""
        qids = {q.qid for q in self.queries}
        out: dict[str, list[str]] = {}
        for qid, docs in self.qrels.items():
            if qid in qids:
                for docid, grade in docs.items():
                    if grade > 0:
                        out.setdefault(docid, []).append(qid)
        return out


def parse_eval_spec(spec: str) -> tuple[str, str, str | None, str | None]:
    """``NAME=PATH[:QRELS[:CORPUS]]`` -> ``(name, path, qrels or None, corpus or None)``."""
    name, sep, rest = spec.partition("=")
    if not sep or not name.strip() or not rest:
        raise UsageError(f"an evaluation set is NAME=PATH[:QRELS[:CORPUS]] (a BEIR folder or a queries file), "
                         f"got {spec!r}")
    parts = rest.split(":")
    if len(parts) > 3:
        raise UsageError(f"evaluation set {name}: at most PATH:QRELS:CORPUS, got {len(parts)} ':'-separated parts")
    parts += [""] * (3 - len(parts))
    return name.strip(), parts[0], parts[1] or None, parts[2] or None


def load_eval_set(spec: str) -> EvalSet:
    """Read one ``NAME=PATH[:QRELS[:CORPUS]]`` evaluation set (module doc)."""
    name, path, qrels, corpus = parse_eval_spec(spec)
    p = Path(path)
    if not p.exists():
        raise UsageError(f"evaluation set {name}: {path}: no such file or folder")
    if p.is_dir():
        if not (p / "queries.jsonl").is_file():
            raise UsageError(f"evaluation set {name}: {path} is a folder without queries.jsonl")
        qrels = qrels or next((str(p / n) for n in _QRELS_NAMES if (p / n).is_file()), None)
        corpus = corpus or next((str(p / n) for n in _CORPUS_NAMES if (p / n).is_file()), None)
    for label, value in (("qrels", qrels), ("corpus", corpus)):
        if value is not None and not Path(value).exists():
            raise UsageError(f"evaluation set {name}: {label} {value}: no such file or folder")
    queries = list(read_queries(p))
    if not queries:
        raise UsageError(f"evaluation set {name}: {path} holds no queries")
    return EvalSet(name, queries, read_qrels(qrels) if qrels else {}, corpus, spec)


def load_eval_sets(specs: Sequence[str]) -> list[EvalSet]:
    sets = [load_eval_set(s) for s in specs]
    names = [s.name for s in sets]
    if len(set(names)) != len(names):
        raise UsageError(f"evaluation set names must differ: {names}")
    return sets


@dataclass(slots=True)
class TrainingItem:
    """One unit of training data: a tuple (query, reasoning, positives), a query record or a corpus document
    (a passage only). Passages are ``(docid, title, text)``."""

    source: str
    item_id: str
    query: str | None = None
    reasoning: str | None = None
    passages: list[tuple[str, str, str]] = field(default_factory=list)


def tuple_items(paths: str | os.PathLike | Sequence[str | os.PathLike], corpus: str | None = None,
                max_tuples: int | None = None) -> Iterator[TrainingItem]:
    """Training tuples as items: query, reasoning and the *positive* passages (negatives are not trained on
    as relevant, so they are no shared evidence)."""
    label = str(paths) if isinstance(paths, (str, os.PathLike)) else ",".join(map(str, paths))
    for t in read_training_tuples(paths, corpus=corpus)[:max_tuples]:
        yield TrainingItem(label, t.query_id, t.query, t.reasoning, [(p.docid, p.title, p.text) for p in t.positives])


def query_items(path: str | os.PathLike) -> Iterator[TrainingItem]:
    """A queries file (JSONL / TSV / BEIR folder) as items: each query's text and reasoning."""
    for q in read_queries(path):
        yield TrainingItem(str(path), q.qid, q.text, q.reasoning)


def corpus_items(path: str | os.PathLike) -> Iterator[TrainingItem]:
    """A corpus as items: each document a passage (streamed)."""
    for d in read_corpus(path):
        yield TrainingItem(str(path), d.docid, passages=[(d.docid, d.title, d.text)])
