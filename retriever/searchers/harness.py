"""The harness edge: where what an agent harness sends becomes ours. Two conventions live here and nowhere else:

* **the query**: a query string an agent harness (or a REST / MCP client) sends becomes a
  :class:`~hopscotch.retriever.io.queries.Query` (:func:`harness_query`, :func:`read_template`);
* **the constructor**: BrowseComp-Plus's registry and AgentIR build a searcher as ``SearcherClass(args)`` or
  ``SearcherClass(reranker, args)`` from their own parsed flags, and call ``SearcherClass.from_args(args)``.
  :class:`HarnessConstructor` is the metaclass :class:`~hopscotch.retriever.searchers.base.BaseSearcher` declares
  (written in its class statement, never swapped in later): it hands those calls to the searchers' argparse adapter
  (:func:`~hopscotch.retriever.searchers.adapter.namespace.searcher_from_namespace`, which
  :mod:`~hopscotch.retriever.searchers.adapter.namespace` installs as :data:`HarnessConstructor.build` when the
  package loads: the adapter sits above the searchers it builds, so it is handed down, not imported up); any
  other call constructs the class as usual.

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

import argparse
from abc import ABCMeta
from collections.abc import Callable
from dataclasses import replace
from typing import Any, ClassVar

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


class HarnessConstructor(ABCMeta):
    """The searchers' metaclass: ``SearcherClass(args)`` and ``SearcherClass(reranker, args)`` with a parsed
    :class:`argparse.Namespace` (BrowseComp-Plus's registry, AgentIR) build the searcher from the flags, reranked
    when ``--rerank-model`` is given, with ``reranker`` (BrowseComp-Plus's own, or None) as its harness reranker;
    ``SearcherClass.from_args(args)`` builds the backend alone. Any other call constructs as usual."""

    #: ``(searcher class, namespace, reranked) -> searcher``: the argparse adapter's builder (set when it loads)
    build: ClassVar[Callable[[type, argparse.Namespace, bool], Any] | None] = None

    def __call__(cls, *args, **kwargs):
        if not kwargs and len(args) in (1, 2) and isinstance(args[-1], argparse.Namespace):
            searcher = HarnessConstructor._builder()(cls, args[-1], True)
            searcher.reranker = args[0] if len(args) == 2 else None
            return searcher
        return super().__call__(*args, **kwargs)

    def from_args(cls, args: argparse.Namespace):
        """Build the searcher from parsed flags (those its ``parse_args`` added; others are ignored), not
        reranked."""
        return HarnessConstructor._builder()(cls, args, False)

    @staticmethod
    def _builder():
        if HarnessConstructor.build is None:
            raise RuntimeError("the searchers' argparse adapter is not loaded: import hopscotch.retriever.searchers")
        return HarnessConstructor.build
