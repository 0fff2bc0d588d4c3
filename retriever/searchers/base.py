"""The searcher interface an agent harness talks to (BrowseComp-Plus style).

A searcher answers ``search(query, k) -> [{"docid", "score", "text", "snippet"}]`` and
``get_document(docid) -> {"docid", "title", "text"} | None``; batch callers (the CLI, the server) use
``search_batch`` which returns ranked ``(docid, score)`` lists. A query can carry the agent's reasoning:
with ``reasoning_aware`` the dense encoder sees
``{instruction}Reasoning: {text or 'Empty'}\\n\\nQuery: {query}``, otherwise ``{instruction}{query}``;
``text`` is the reasoning, or the part of the step's context its query input variant picks
(:mod:`hopscotch.retriever.model.query_input`). A reasoning may be a
:class:`~hopscotch.retriever.model.query_input.ReasoningContext`: a ``str`` (the full reasoning, all that
BM25 and the remote client see) that also carries the step's other context fields.

Each backend also owns its command-line flags (:meth:`BaseSearcher.parse_args`) and is built from the
parsed flags (:meth:`BaseSearcher.from_args`); see :mod:`hopscotch.retriever.searchers.registry`.
"""

from __future__ import annotations

import argparse
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from hopscotch.retriever.model.query_input import ReasoningContext

Ranked = list[tuple[str, float]]


def per_query(value, n: int, name: str) -> list:
    """Broadcast a scalar (or None) to ``n`` items, or check a sequence has ``n`` items."""
    if value is None or isinstance(value, (bool, str)):
        return [value] * n
    value = list(value)
    if len(value) != n:
        raise ValueError(f"{name}: {len(value)} values for {n} queries")
    return value


def snippet_of(text: str, max_chars: int | None) -> str:
    """The first ``max_chars`` characters of ``text``, cut at a word boundary when one is near."""
    if max_chars is None or max_chars <= 0 or len(text) <= max_chars:
        return text
    cut = text[:max_chars]
    space = cut.rfind(" ")
    return cut[:space] if space > max_chars * 0.8 else cut


def add_option(parser: argparse.ArgumentParser, *flags: str, **spec) -> None:
    """``parser.add_argument(*flags, **spec)``, once per parser.

    Backends compose each other's flags (hybrid adds the BM25 and the dense ones) and share some
    (``--index``), so a flag may be declared several times; the first declaration adds it, later ones
    must be identical and add nothing. A differing redeclaration is a programming error (ValueError).
    """
    declared = parser.__dict__.setdefault("_hopscotch_options", {})
    if flags in declared:
        if declared[flags] != spec:
            raise ValueError(f"{flags[0]} is declared twice with different settings")
        return
    parser.add_argument(*flags, **spec)
    declared[flags] = spec


def add_index_option(parser: argparse.ArgumentParser) -> None:
    """``--index``: the dense index folder (vectors for dense search, documents for any backend)."""
    add_option(parser, "--index", help="dense index folder (hopscotch index)")


class BaseSearcher(ABC):
    """Abstract searcher. Subclasses implement :meth:`search_batch`, :meth:`get_document`,
    :meth:`parse_args` and :meth:`from_args`, and register with
    :func:`~hopscotch.retriever.searchers.registry.register_searcher`."""

    #: registry name (``bm25``, ``dense``, ``hybrid``, ``remote``), set by ``register_searcher``
    name: str = ""
    #: BrowseComp-Plus's name for the kind of search (class-level; set by ``register_searcher``)
    search_type: str = ""
    #: whether the searcher answers from local index files (``hopscotch serve`` can serve it)
    local: bool = True
    #: keyword options :func:`~hopscotch.retriever.searchers.registry.build_searcher` accepts beyond the flags
    extra_options: tuple[str, ...] = ()
    #: characters of document text returned as ``text`` / ``snippet`` by :meth:`search`
    snippet_chars: int | None = 1000

    @classmethod
    def parse_args(cls, parser: argparse.ArgumentParser) -> None:
        """Add this backend's flags to ``parser`` (through :func:`add_option`, so that shared flags are
        declared once). Every flag is optional at the parser level; :meth:`from_args` checks them."""

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> BaseSearcher:
        """Build the searcher from parsed flags (those :meth:`parse_args` added; others are ignored)."""
        raise NotImplementedError(f"{cls.__name__} cannot be built from flags")

    @classmethod
    def selected_by(cls, args: argparse.Namespace) -> bool:
        """Whether the given flags ask for this backend when no ``--searcher-type`` is given."""
        return False

    @abstractmethod
    def search_batch(self, queries: Sequence[str], k: int = 10, reasonings: Sequence[str | None] | None = None,
                     reasoning_aware: bool | Sequence[bool] = False) -> list[Ranked]:
        """Top-``k`` ``(docid, score)`` lists, best first, one per query."""

    @abstractmethod
    def get_document(self, docid: str) -> dict[str, Any] | None:
        """``{"docid", "title", "text"}`` or None when the docid is unknown."""

    def search(self, query: str, k: int = 10, reasoning: str | None = None, **kwargs) -> list[dict[str, Any]]:
        """BrowseComp-Plus-style hits: ``[{"docid", "score", "text", "snippet"}]``, best first.

        ``text`` and ``snippet`` both hold the document's ``title text`` cut to :attr:`snippet_chars`.
        The query is encoded reasoning-aware exactly when ``reasoning`` is given. Other keyword arguments
        (e.g. AgentIR's ``store_rerank=True``) are accepted and ignored.
        """
        hits = self.search_batch([query], k, [reasoning], reasoning_aware=reasoning is not None)[0]
        return [hit_dict(docid, score, self.get_document(docid), self.snippet_chars) for docid, score in hits]

    def search_description(self, k: int = 10) -> str:
        return (f"Search the document collection. Returns the top-{k} hits with docid, score and a snippet of "
                "each document.")

    def get_document_description(self) -> str:
        return "Retrieve a full document by its docid."

    def close(self) -> None:
        """Release resources (open connections, GPU memory)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def hit_dict(docid: str, score: float, doc: dict[str, Any] | None, max_chars: int | None) -> dict[str, Any]:
    """One :meth:`BaseSearcher.search` result from a document dict (or None: empty text)."""
    doc = doc or {}
    text = f"{doc['title']} {doc.get('text', '')}" if doc.get("title") else doc.get("text", "")
    text = snippet_of(text, max_chars)
    return {"docid": docid, "score": float(score), "text": text, "snippet": text}


def iter_search(searcher: BaseSearcher, queries, k: int, reasoning_aware: bool = False, batch_size: int = 256):
    """Yield ``(qid, [(docid, score), ...])`` for :class:`~hopscotch.retriever.io.queries.Query` records,
    ``batch_size`` queries per ``search_batch`` call; with ``reasoning_aware`` each query's ``reasoning``
    (with its other context fields, for the dense searcher's query input variant) is used."""
    queries = list(queries)
    for start in range(0, len(queries), batch_size):
        chunk = queries[start:start + batch_size]
        results = searcher.search_batch([q.text for q in chunk], k, [ReasoningContext.of(q) for q in chunk],
                                        reasoning_aware=reasoning_aware)
        yield from ((q.qid, hits) for q, hits in zip(chunk, results))


def search_run(searcher: BaseSearcher, queries, k: int, reasoning_aware: bool = False, batch_size: int = 256
               ) -> dict[str, dict[str, float]]:
    """A whole run ``{qid: {docid: score}}`` (what :func:`hopscotch.retriever.io.runs.write_run` writes)."""
    return {qid: dict(hits) for qid, hits in iter_search(searcher, queries, k, reasoning_aware, batch_size)}
