"""Query readers: JSONL (``_id``|``query_id``|``id``, ``text``|``query``, optional ``reasoning``) and TSV."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from hopscotch.retriever.errors import FormatError
from hopscotch.retriever.io.common import first_key, iter_lines, read_jsonl

QID_KEYS = ("_id", "query_id", "qid", "id")
QTEXT_KEYS = ("text", "query")


@dataclass(slots=True)
class Query:
    """A query, with the agent's reasoning before it when there is one.

    ``extra`` keeps the other fields of the record (``answers``, ``answer``, ``answer_aliases``, ...).
    """

    qid: str
    text: str
    reasoning: str | None = None
    extra: dict = field(default_factory=dict)


def _is_tsv(path: Path) -> bool:
    return path.suffix.lower() in (".tsv", ".txt") or path.name.endswith(".tsv.gz")


def read_queries(path: str | os.PathLike) -> Iterator[Query]:
    """Stream queries from a JSONL or ``qid<TAB>query`` TSV file (or a BEIR folder)."""
    p = Path(path)
    if p.is_dir():
        p = p / "queries.jsonl"
    if _is_tsv(p):
        for lineno, line in iter_lines(p):
            parts = line.split("\t")
            if len(parts) < 2 or not parts[0].strip():
                raise FormatError(p, lineno, "'qid<TAB>query'", line)
            if lineno == 1 and parts[0].lower() in ("qid", "query-id", "query_id", "id"):
                continue  # tolerate a header line
            yield Query(parts[0].strip(), "\t".join(parts[1:]).strip())
        return
    for lineno, obj in read_jsonl(p, "a query object with '_id' and 'text'"):
        qid = first_key(obj, QID_KEYS)
        text = first_key(obj, QTEXT_KEYS)
        if qid is None or not isinstance(text, str):
            raise FormatError(p, lineno, "a query object with '_id'|'query_id'|'id' and 'text'|'query'",
                              f"keys {sorted(obj)[:8]}")
        reasoning = obj.get("reasoning")
        if reasoning is not None and not isinstance(reasoning, str):
            raise FormatError(p, lineno, "a string 'reasoning'", type(reasoning).__name__)
        extra = {k: v for k, v in obj.items() if k not in (*QID_KEYS, *QTEXT_KEYS, "reasoning")}
        yield Query(str(qid), text, reasoning, extra)
