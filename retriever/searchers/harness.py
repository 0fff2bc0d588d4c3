"""The harness edge: where a query that an agent harness (or a REST / MCP client) sends as a string becomes a
:class:`~hopscotch.retriever.io.queries.Query`.

AgentIR's reasoning-aware client writes the agent's reasoning into the query string itself, in the template its
encoder reads (``Reasoning: R\\n\\nQuery: Q``, :func:`~hopscotch.retriever.model.query_template.format_query`).
That string is read back here, once, into the query ``Q`` with its reasoning ``R`` (``Empty``: none), searched
reasoning-aware; below this module no searcher parses a template (``tests/test_architecture.py`` keeps it so). So
BM25 expands ``Q`` with ``R`` and never matches the template's words, and an encoder reads ``Q`` and ``R`` in its
own query input variant, exactly as for the same query sent with its reasoning the usual way.

>>> q = harness_query("Reasoning: The film came out in 1997.\\n\\nQuery: who directed Gummo")
>>> q.text, q.reasoning, q.reasoning_aware
('who directed Gummo', 'The film came out in 1997.', True)
>>> harness_query("who directed Gummo").reasoning_aware, harness_query("who directed Gummo", "").reasoning_aware
(False, True)
"""

from __future__ import annotations

from dataclasses import replace

from hopscotch.retriever.io.queries import Query
from hopscotch.retriever.model.query_template import parse_query


def harness_query(text: str, reasoning: str | None = None, *, qid: str = "") -> Query:
    """The query a client sent as ``text`` (with ``reasoning``: searched reasoning-aware, blank reads as
    ``Empty``). A ``text`` in AgentIR's template is read back as its query with its reasoning (a non-blank
    ``reasoning`` given beside it wins), searched reasoning-aware."""
    parsed = parse_query(text)
    if parsed is None:
        return Query(text, reasoning, reasoning_aware=reasoning is not None, qid=qid)
    query, written = parsed
    return Query(query, reasoning if reasoning else written, reasoning_aware=True, qid=qid)


def read_template(query: Query) -> Query:
    """A query record (a query file's row, a replayed call) whose text is AgentIR's template, read back as
    :func:`harness_query` reads one: its query, searched reasoning-aware with the template's reasoning unless the
    record is already searched with a non-blank reasoning of its own. Any other record is returned as it is."""
    parsed = parse_query(query.text)
    if parsed is None:
        return query
    text, written = parsed
    if query.reasoning_aware and query.reasoning:
        return replace(query, text=text)
    return replace(query, text=text, reasoning=written, reasoning_aware=True)
