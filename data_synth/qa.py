"""QA readers: the questions, their answers and their gold documents.

A QA source is a BEIR folder (``queries.jsonl`` + optional ``qrels.tsv`` or ``qrels/test.tsv``), a
folder with ``questions.tsv`` / ``queries.tsv`` (``qid<TAB>question``, e.g. ``qampari_tongyi``), or one
queries file. Answers are read from ``answers`` (a list or a string), ``answer`` plus
``answer_aliases`` (MuSiQue), or ``answer_aliases`` alone. A source may have no answers and no qrels:
the oracle then ranks by query relevance only (see docs/data_synth.md).

Example::

    from hopscotch.data_synth.qa import load_qa
    qa = load_qa("../shared/data/hotpotqa_ircot")
    q = qa.questions["5a8c7595554299585d9e36b6"]
    q.text, q.answers, q.gold   # ('What government position ...', ['Chief of Protocol'], {'ic00001': 1, ...})
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from hopscotch.retriever.errors import FormatError, UsageError
from hopscotch.retriever.io.common import read_jsonl
from hopscotch.retriever.io.qrels import read_qrels
from hopscotch.retriever.io.queries import read_queries

QID_KEYS = ("_id", "query_id", "qid", "id", "question_id")
TEXT_KEYS = ("text", "query", "question")

QUERY_FILES = ("queries.jsonl", "queries.jsonl.gz", "questions.jsonl", "questions.tsv", "queries.tsv")
QRELS_FILES = ("qrels.tsv", "qrels/test.tsv", "qrels/dev.tsv", "qrels.jsonl", "qrels.txt")


@dataclass(slots=True)
class Question:
    """One question: its text, answer strings and gold documents ``{docid: grade}`` (grade > 0)."""

    qid: str
    text: str
    answers: list[str] = field(default_factory=list)
    gold: dict[str, int] = field(default_factory=dict)

    def gold_ranked(self) -> list[str]:
        """Gold docids, highest grade first, ties by docid."""
        return [d for d, _ in sorted(self.gold.items(), key=lambda kv: (-kv[1], kv[0]))]


@dataclass
class QASource:
    """Questions in file order plus where they came from."""

    questions: dict[str, Question]
    queries_path: Path
    qrels_path: Path | None

    @property
    def has_answers(self) -> bool:
        return any(q.answers for q in self.questions.values())

    @property
    def has_gold(self) -> bool:
        return any(q.gold for q in self.questions.values())


def _answers_of(extra: dict, path: Path, lineno: int | None) -> list[str]:
    answers: list[str] = []
    for key in ("answers", "answer", "answer_aliases", "aliases"):
        value = extra.get(key)
        if value is None:
            continue
        if isinstance(value, (str, int, float)):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) for v in value):
            raise FormatError(path, lineno, f"'{key}' to be a string or a list of strings", repr(value))
        answers.extend(str(v) for v in value if str(v).strip())
    return list(dict.fromkeys(answers))


def _iter_questions(path: Path):
    """``(line, qid, text, other fields)`` from a JSONL or ``qid<TAB>question`` TSV file."""
    if not path.name.endswith((".jsonl", ".jsonl.gz", ".json")):
        for q in read_queries(path):  # TSV: the reader names file and line itself
            yield None, q.qid, q.text, q.extra
        return
    expected = "a question object with '_id'|'query_id'|'qid'|'id' and 'text'|'query'|'question'"
    for lineno, obj in read_jsonl(path, expected):
        qid = next((obj[k] for k in QID_KEYS if obj.get(k) is not None), None)
        text = next((obj[k] for k in TEXT_KEYS if obj.get(k) is not None), None)
        if qid is None or not isinstance(qid, (str, int)) or not isinstance(text, str):
            raise FormatError(path, lineno, expected, f"keys {sorted(obj)[:8]}")
        yield lineno, str(qid), text, obj


def _find(folder: Path, names: tuple[str, ...]) -> Path | None:
    for name in names:
        if (folder / name).is_file():
            return folder / name
    return None


def load_qa(path: str | os.PathLike, qrels: str | os.PathLike | None = None) -> QASource:
    """Read questions (and answers, and gold documents from the qrels when there are any).

    ``path`` is a folder (BEIR or ``questions.tsv``) or a queries file; ``qrels`` overrides the qrels file.
    Qrels rows with grade <= 0 are not gold. Qrels of unknown questions are ignored.
    """
    path = Path(path)
    if not path.exists():
        raise UsageError(f"--qa {path}: no such file or folder")
    if path.is_dir():
        queries_path = _find(path, QUERY_FILES)
        if queries_path is None:
            raise UsageError(f"--qa {path}: no queries file ({', '.join(QUERY_FILES)}) in the folder")
        qrels_path = Path(qrels) if qrels else _find(path, QRELS_FILES)
    else:
        queries_path, qrels_path = path, Path(qrels) if qrels else None
    questions: dict[str, Question] = {}
    for lineno, qid, text, extra in _iter_questions(queries_path):
        if qid in questions:
            raise FormatError(queries_path, lineno, f"unique question ids ({qid!r} repeats)")
        questions[qid] = Question(qid, text, _answers_of(extra, queries_path, lineno))
    if not questions:
        raise FormatError(queries_path, None, "at least one question", "an empty file")
    if qrels_path is not None:
        if not qrels_path.is_file():
            raise UsageError(f"--qrels {qrels_path}: no such file")
        for qid, docs in read_qrels(qrels_path).items():
            if qid in questions:
                questions[qid].gold = {d: g for d, g in docs.items() if g > 0}
    return QASource(questions, queries_path, qrels_path)
