"""The harness edge: where what an agent harness sends becomes ours. Two conventions live here and nowhere else:

* **the query**: a query string an agent harness (or a REST / MCP client) sends becomes a
  :class:`~hopscotch.retriever.io.queries.Query` (:func:`harness_query`, :func:`read_template`);
* **the search call**: :class:`HarnessSearch`, the searchers' ``search(query, k)`` in every calling convention of
  BrowseComp-Plus (``search(query, k)``, ``search(query, query_id, k)``, its reranker hook ``SearcherClass(reranker,
  args)``) and AgentIR (``store_rerank``, ``prepend_candidates``), and the tools' descriptions; the interface
  (:class:`~hopscotch.retriever.searchers.base.BaseSearcher`) inherits it and answers it with its one protocol,
  ``search_batch(queries, k)``;
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
import numbers
from abc import ABCMeta
from collections.abc import Callable, Sequence
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


def _is_k(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def snippet_of(text: str, max_chars: int | None) -> str:
    """The first ``max_chars`` characters of ``text``, cut at a word boundary when one is near."""
    if max_chars is None or max_chars <= 0 or len(text) <= max_chars:
        return text
    cut = text[:max_chars]
    space = cut.rfind(" ")
    return cut[:space] if space > max_chars * 0.8 else cut


def with_prepended(results: list[dict], candidates: Sequence[dict], max_chars: int | None) -> list[dict]:
    """AgentIR's oracle window: ``candidates`` (``{docid, text}``, unique docids) first, then the results not
    among them, cut to the original number of results (all candidates are kept when they are more)."""
    first = [{**c, "snippet": snippet_of(c.get("text", ""), max_chars)} for c in candidates]
    ids = [str(c["docid"]) for c in first]
    if len(ids) != len(set(ids)):
        raise ValueError(f"prepend_candidates must have unique docids, got {ids}")
    rest = [r for r in results if str(r["docid"]) not in set(ids)]
    return first + rest[:max(0, len(results) - len(first))]


class HarnessSearch:
    """What an agent harness calls on a searcher besides ``get_document``: :meth:`search` in each of its calling
    conventions, and the tools' descriptions. A searcher provides ``hits_with_text(query, k)`` (its hit dicts for
    one :class:`~hopscotch.retriever.io.queries.Query`) and ``snippet_chars``."""

    #: a BrowseComp-Plus reranker (``first_stage_k``, ``rerank(query, hits, query_id, k)``) applied by
    #: :meth:`search`; set by ``SearcherClass(reranker, args)``
    reranker: Any = None

    def search(self, query: str, *args, k: int | None = None, reasoning: str | None = None,
               query_id: str | None = None, store_rerank: bool = False, prepend_candidates=None,
               **kwargs) -> list[dict[str, Any]] | dict[str, Any]:
        """Harness-style hits ``[{"docid", "score", "text", "snippet"}]``, best first (``k`` defaults to 10).

        Calling conventions: ``search(query, k)`` and ``search(query, k, reasoning)`` (BrowseComp-Plus's
        first searchers, AgentIR, Hopscotch), ``search(query, query_id, k)`` (BrowseComp-Plus with
        rerankers: a second positional argument that is not an integer is the query id), and the keyword
        forms. The query is encoded reasoning-aware exactly when ``reasoning`` is given. With a
        :attr:`reranker`, ``reranker.first_stage_k`` hits are retrieved and ``reranker.rerank(query, hits,
        query_id, k)`` returns the list. AgentIR's options: ``prepend_candidates`` (``[{docid, text}]``,
        oracle documents put first, before any reranking, the window keeping its size) and
        ``store_rerank=True``, which returns
        ``{"results": hits, "rerank_output": None}`` as AgentIR's searchers do. Other keyword arguments
        (AgentIR's ``original_query``, ``oracle_question``, ``correct_answer``) are accepted and ignored.
        """
        positional = list(args)
        if positional and not _is_k(positional[0]) and (positional[0] is None or isinstance(positional[0], str)):
            query_id = positional.pop(0)
        if positional:
            k = positional.pop(0)
        if positional:
            reasoning = positional.pop(0)
        if positional:
            raise TypeError(f"search() takes at most 3 positional arguments after the query ({len(args)} given)")
        k = 10 if k is None else k
        if not _is_k(k) or k < 1:
            raise TypeError(f"search(): k must be a positive integer, got {k!r}")
        depth = max(k, int(getattr(self.reranker, "first_stage_k", k) or k)) if self.reranker else k
        results = self.hits_with_text(harness_query(query, reasoning), depth)
        if prepend_candidates:
            results = with_prepended(results, prepend_candidates, self.snippet_chars)
        if self.reranker is not None and results:
            results = self.reranker.rerank(query, results, query_id, k)
        return {"results": results, "rerank_output": None} if store_rerank else results

    def search_description(self, k: int = 10) -> str:
        """The search tool's description shown to an agent (BrowseComp-Plus's wording)."""
        return (f"Perform a search on a knowledge source. Returns top-{k} hits with docid, score, and snippet. "
                "The snippet contains the document's contents (may be truncated based on token limits).")

    def get_document_description(self) -> str:
        """The get_document tool's description shown to an agent."""
        return "Retrieve a full document by its docid."
