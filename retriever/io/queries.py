"""Query readers: JSONL (``_id``|``query_id``|``qid``|``id``, ``text``|``query``|``question``, optional context
fields) and TSV.

cmass / BrowseComp-Plus query rows ``{id, question, answer, canary?}`` read as ``qid = id``,
``text = question``, with ``answer`` (and any other field) kept in :attr:`Query.extra`. Queries hold no
docids, so there is nothing here for :func:`~hopscotch.retriever.io.docids.canonical_docid` to normalise.

The optional context fields of an agent step, shared with the training tuples (:mod:`.tuples`) and read by
:func:`parse_context_fields`: ``reasoning`` (the full reasoning before the query), ``current_reasoning``
(only what was written since the last tool result), ``prior_queries`` (the trajectory's earlier queries)
and ``prior_results`` (the previous call's results: ``{title?, snippet}`` objects or strings). Which of
them reaches the encoder is the query input variant (:mod:`hopscotch.retriever.model.query_input`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from hopscotch.retriever.errors import FormatError
from hopscotch.retriever.io.common import first_key, iter_lines, read_jsonl, write_jsonl
from hopscotch.retriever.io.validate import UniqueIds, check_id, check_text

QID_KEYS = ("_id", "query_id", "qid", "id")
QTEXT_KEYS = ("text", "query", "question")
CONTEXT_KEYS = ("reasoning", "current_reasoning", "prior_queries", "prior_results")


@dataclass(frozen=True, slots=True)
class Query:
    """A query, with the agent's reasoning (and other context) before it when there is one: what every searcher
    searches (``search_batch(queries, k)``) and what a query file holds.

    ``text`` is the query itself and ``reasoning`` the reasoning before it; the other context fields are those of
    :func:`parse_context_fields` (None: absent). ``reasoning_aware`` says whether a search reads the context: the
    dense and multi-vector encoders encode it (``{instruction}Reasoning: {text or 'Empty'}\\n\\nQuery: {query}``,
    the text picked by their query input variant), BM25 expands the query with it; False (a query file's rows
    until ``hopscotch search --reasoning``, a REST request without ``reason=``): the query alone. ``qid`` names
    it in a run; ``extra`` keeps the other fields of its record (``answers``, ``answer``, ...).

    >>> Query("who directed Gummo", "The film came out in 1997.", reasoning_aware=True).has_context
    True
    >>> Query("who directed Gummo").reasoning_aware
    False
    """

    text: str
    reasoning: str | None = None
    current_reasoning: str | None = field(default=None, kw_only=True)
    prior_queries: tuple[str, ...] | None = field(default=None, kw_only=True)
    prior_results: tuple[dict, ...] | None = field(default=None, kw_only=True)
    reasoning_aware: bool = field(default=False, kw_only=True)
    qid: str = field(default="", kw_only=True)
    extra: dict = field(default_factory=dict, kw_only=True, compare=False)

    @property
    def has_context(self) -> bool:
        """Whether the query carries a reasoning or any other context field."""
        return any(value is not None for value in (self.reasoning, self.current_reasoning, self.prior_queries,
                                                   self.prior_results))

    def with_reasoning(self, aware: bool = True) -> Query:
        """This query searched with its context (``aware``) or without it."""
        return self if self.reasoning_aware == aware else replace(self, reasoning_aware=aware)


def queries_of(texts: Sequence[str], reasonings: Sequence[str | None] | None = None,
               reasoning_aware: bool | Sequence[bool] = False) -> list[Query]:
    """Queries from parallel lists: each text with its reasoning (None: none), searched reasoning-aware as
    ``reasoning_aware`` says (one flag for all, or one per query).

    >>> [(q.text, q.reasoning_aware) for q in queries_of(["a", "b"], ["why a", None], [True, False])]
    [('a', True), ('b', False)]
    """
    n = len(texts)
    reasonings = [None] * n if reasonings is None else list(reasonings)
    aware = [reasoning_aware] * n if isinstance(reasoning_aware, bool) else list(reasoning_aware)
    if len(reasonings) != n or len(aware) != n:
        raise ValueError(f"{n} queries but {len(reasonings)} reasonings and {len(aware)} reasoning_aware flags")
    return [Query(t, r, reasoning_aware=bool(a)) for t, r, a in zip(texts, reasonings, aware)]


def as_query(value: Query | str) -> Query:
    """``value`` as a :class:`Query`: a string is a plain query (its text searched alone, never parsed)."""
    if isinstance(value, Query):
        return value
    if isinstance(value, str):
        return Query(value)
    raise TypeError(f"a search query is a Query or a string, got {type(value).__name__}")


def _result_entry(item, path, lineno) -> dict:
    if isinstance(item, str):
        return {"title": "", "snippet": item}
    if isinstance(item, dict):
        snippet, title = item.get("snippet", item.get("text")), item.get("title")
        if isinstance(snippet, str) and (title is None or isinstance(title, str)):
            return {"title": title or "", "snippet": snippet}
    raise FormatError(path, lineno, "'prior_results' entries as strings or {title?, snippet} objects",
                      repr(item)[:80])


def parse_context_fields(obj: dict, path, lineno) -> dict:
    """The context fields of a query or tuple record, checked: ``{reasoning, current_reasoning,
    prior_queries, prior_results}``, each None when absent (so old files read as before)."""
    out = {}
    for key in ("reasoning", "current_reasoning"):
        value = obj.get(key)
        if value is not None and not isinstance(value, str):
            raise FormatError(path, lineno, f"a string '{key}'", type(value).__name__)
        out[key] = None if value is None else check_text(value, path, lineno, f"a string '{key}'")
    queries = obj.get("prior_queries")
    if queries is not None and (not isinstance(queries, list) or not all(isinstance(q, str) for q in queries)):
        raise FormatError(path, lineno, "'prior_queries' as a list of strings", repr(queries)[:80])
    out["prior_queries"] = None if queries is None else tuple(queries)
    results = obj.get("prior_results")
    if results is not None and not isinstance(results, list):
        raise FormatError(path, lineno, "'prior_results' as a list", type(results).__name__)
    out["prior_results"] = None if results is None else tuple(_result_entry(r, path, lineno) for r in results)
    return out


def context_dict(record) -> dict:
    """The context fields of a record (Query, TrainingTuple, TraceStep) that are set, as JSON values, in
    :data:`CONTEXT_KEYS` order, ``reasoning`` left out (its writers place it themselves)."""
    out = {}
    for key in CONTEXT_KEYS[1:]:
        value = getattr(record, key, None)
        if value is not None:
            out[key] = list(value) if isinstance(value, tuple) else value
    return out


def _is_tsv(path: Path) -> bool:
    return path.suffix.lower() in (".tsv", ".txt") or path.name.endswith(".tsv.gz")


def read_queries(path: str | os.PathLike) -> Iterator[Query]:
    """Stream queries from a JSONL or ``qid<TAB>query`` TSV file (or a BEIR folder).

    A query id is a string or an integer without whitespace or control characters (it becomes a column
    of TREC runs and qrels); an id met twice is a :class:`FormatError` naming both lines (one query, one
    ranking). Texts are strings; bytes, BOM and JSON are checked by :mod:`.common`.
    """
    p = Path(path)
    if p.is_dir():
        p = p / "queries.jsonl"
    seen = UniqueIds("query ids")
    if _is_tsv(p):
        for lineno, line in iter_lines(p):
            parts = line.split("\t")
            if len(parts) < 2 or not parts[0].strip():
                raise FormatError(p, lineno, "'qid<TAB>query'", line)
            if lineno == 1 and parts[0].lower() in ("qid", "query-id", "query_id", "id"):
                continue  # tolerate a header line
            qid = check_id(parts[0].strip(), p, lineno, "a query id", whitespace=False)
            seen.add(qid, p, lineno)
            yield Query(check_text("\t".join(parts[1:]).strip(), p, lineno, "a query text"), qid=qid)
        return
    expected = "a query object with '_id'|'query_id'|'qid'|'id' and 'text'|'query'|'question'"
    for lineno, obj in read_jsonl(p, expected):
        qid = first_key(obj, QID_KEYS)
        text = first_key(obj, QTEXT_KEYS)
        if qid is None or isinstance(qid, (dict, list)) or not isinstance(text, str):
            raise FormatError(p, lineno, expected, f"keys {sorted(obj)[:8]}")
        qid = check_id(qid, p, lineno, "a query id", whitespace=False)
        seen.add(qid, p, lineno)
        context = parse_context_fields(obj, p, lineno)
        extra = {k: v for k, v in obj.items() if k not in (*QID_KEYS, *QTEXT_KEYS, *CONTEXT_KEYS)}
        yield Query(check_text(text, p, lineno, "a query text"), qid=qid, extra=extra, **context)


def write_queries(path: str | os.PathLike, queries) -> None:
    """Write queries as the JSONL :func:`read_queries` reads back: ``{_id, text[, reasoning, context fields]}`` a
    line (atomically)."""
    def row(q: Query) -> dict:
        out = {"_id": q.qid, "text": q.text}
        if q.reasoning is not None:
            out["reasoning"] = q.reasoning
        return {**out, **context_dict(q)}

    write_jsonl(path, (row(q) for q in queries))
