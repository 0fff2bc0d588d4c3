"""The searcher interface an agent harness talks to (BrowseComp-Plus and AgentIR style).

A searcher answers ``search(query, k) -> [{"docid", "score", "text", "snippet"}]`` (``text``: the whole
document, ``title\\ntext`` when it has a title; ``snippet``: its first :attr:`BaseSearcher.snippet_chars`
characters) and ``get_document(docid) -> {"docid", "text"[, "title"]} | None``; batch callers (the CLI,
the server) use ``search_batch`` which returns ranked ``(docid, score)`` lists. A query can carry the
agent's reasoning: with ``reasoning_aware`` the dense encoder sees
``{instruction}Reasoning: {text or 'Empty'}\\n\\nQuery: {query}``, otherwise ``{instruction}{query}``;
``text`` is the reasoning, or the part of the step's context its query input variant picks
(:mod:`hopscotch.retriever.model.query_input`). Each query is a :class:`~hopscotch.retriever.io.queries.Query`
(its text, reasoning and other context fields, and whether it is searched reasoning-aware); a harness's query string
becomes one at the harness edge (:mod:`hopscotch.retriever.searchers.harness`), so no searcher parses a template.

Harnesses drop a searcher in unchanged (their calling conventions live at the harness edge,
:class:`~hopscotch.retriever.searchers.harness.HarnessSearch`, which the interface inherits; its ``search`` documents
each):
BrowseComp-Plus builds it with ``SearcherClass.parse_args(parser)`` then ``SearcherClass(args)`` (or
``SearcherClass(reranker, args)``) and calls ``search(query, k)`` or ``search(query, query_id, k)``;
AgentIR calls ``search(query, k, store_rerank=True, **kwargs)`` and reads ``result["results"]``.
Each backend owns its command-line flags (:meth:`BaseSearcher.parse_args`, declared through
:func:`add_option`) and is built from their values (:meth:`BaseSearcher.from_flags`, which reads a
:class:`~hopscotch.retriever.searchers.adapter.flags.FlagValues`) or from its options dataclass
(:meth:`BaseSearcher.from_options`); see :mod:`hopscotch.retriever.searchers.registry`. No backend reads a parsed
namespace: ``SearcherClass(args)`` and ``SearcherClass.from_args(args)`` come from the metaclass the interface declares
at the harness edge (:class:`~hopscotch.retriever.searchers.harness.HarnessConstructor`). Every backend also declares the
multi-vector reranker's ``--rerank-*`` flags: a searcher built from flags (``SearcherClass(args)``, the commands,
``build_searcher``: all through the argparse adapter, :mod:`hopscotch.retriever.searchers.adapter`) is wrapped
by it when ``--rerank-model`` is given.
"""

from __future__ import annotations

import argparse
from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

from hopscotch.retriever.io.queries import Query
from hopscotch.retriever.searchers.adapter.flags import FlagValues, add_option
from hopscotch.retriever.searchers.harness import HarnessConstructor, HarnessSearch, snippet_of

Ranked = list[tuple[str, float]]




def add_index_option(parser: argparse.ArgumentParser) -> None:
    """``--index``: the dense index folder (vectors for dense search, documents for any backend)."""
    add_option(parser, "--index", help="dense index folder (hopscotch index)")


class BaseSearcher(HarnessSearch, metaclass=HarnessConstructor):
    """Abstract searcher. Subclasses implement :meth:`search_batch`, :meth:`get_document`,
    :meth:`parse_args`, :meth:`from_flags` and :meth:`from_options`, and register with
    :func:`~hopscotch.retriever.searchers.registry.register_searcher`."""

    #: registry name (``bm25``, ``dense``, ``hybrid``, ``remote``), set by ``register_searcher``
    name: str = ""
    #: BrowseComp-Plus's name for the kind of search (class-level; set by ``register_searcher``)
    search_type: str = ""
    #: whether the searcher answers from local index files (``hopscotch serve`` can serve it)
    local: bool = True
    #: keyword options :func:`~hopscotch.retriever.searchers.registry.build_searcher` accepts beyond the flags
    extra_options: tuple[str, ...] = ()
    #: characters of each hit's document kept as ``snippet`` by :meth:`search` (None: the whole text)
    snippet_chars: int | None = 1000
    #: the rerank stage (MaxSim or a cross-encoder: :mod:`~hopscotch.retriever.searchers.rerank_stage`) that orders this
    #: searcher's results last, or None; a :class:`~hopscotch.retriever.searchers.rerank.RerankedSearcher` sets it
    rerank_stage: Any = None

    @classmethod
    def parse_args(cls, parser: argparse.ArgumentParser) -> None:
        """Add this backend's flags to ``parser`` (through :func:`add_option`, so that shared flags are
        declared once). Every flag is optional at the parser level; :meth:`from_flags` checks them."""

    #: the backend's options dataclass (fields named like its flags' destinations), built by :meth:`from_options`
    options_type: type | None = None

    @classmethod
    def from_options(cls, options) -> BaseSearcher:
        """Build the searcher from its :attr:`options_type` (what ``build_searcher(options)`` calls)."""
        raise NotImplementedError(f"{cls.__name__} has no options")

    @classmethod
    def from_flags(cls, flags: FlagValues) -> BaseSearcher:
        """Build the searcher from its flags' values (:class:`~.adapter.flags.FlagValues`): the checks a harness's
        unchecked namespace needs, then :meth:`from_options` of its options dataclass."""
        raise NotImplementedError(f"{cls.__name__} cannot be built from flags")

    @classmethod
    def selected_by(cls, flags: FlagValues) -> bool:
        """Whether the given flags ask for this backend when no ``--searcher-type`` is given."""
        return False

    @classmethod
    def effective_backend(cls, flags: FlagValues) -> type[BaseSearcher]:
        """The backend these flags make of this one (``dense`` over a multi-vector index is ``multi_vector``); the
        registry builds it and checks the flags against it."""
        return cls

    @classmethod
    def used_dests(cls, flags: FlagValues, dests_of) -> frozenset[str]:
        """The flag destinations a search with these flags uses: those the effective backend declares
        (:meth:`effective_backend`; ``dests_of(backend)`` gives a backend's, the registry's ``backend_dests``);
        a backend made of parts (hybrid) says which of its parts' flags apply."""
        return dests_of(cls.effective_backend(flags))

    @classmethod
    def unused_flag_message(cls, option: str, dest: str, users: list[str], flags: FlagValues) -> str:
        """Why the flag ``option`` (destination ``dest``, declared by the backends ``users``, not by this one) is
        refused when this backend is selected; a backend may say it better for its own case."""
        return (f"{option} does nothing for the {cls.name} searcher (only {' and '.join(users)} "
                f"use{'s' if len(users) == 1 else ''} it): drop it, or pick that searcher (--searcher-type)")

    @property
    def first_stage(self) -> BaseSearcher:
        """The searcher that retrieves the candidates: this one, or under a reranker the one it reranks."""
        return self

    @property
    def vector_stage(self) -> BaseSearcher | None:
        """The searcher whose query encoder and index folder a query meets (``query_input``, ``meta``): a dense or
        multi-vector searcher itself, a hybrid's vector half, a reranked searcher's first stage's; None when no
        vector index is searched (BM25, remote)."""
        return None

    @property
    def has_documents(self) -> bool:
        """Whether :meth:`get_document` can return documents (a BM25 searcher without ``--corpus`` or ``--index``
        cannot): reranking needs each candidate's text."""
        return True

    @property
    def takes_reasoning(self) -> bool:
        """Whether the loaded model was trained to read an agent's reasoning (a reasoning-aware model, or
        one told so with ``--query-input``): the MCP server passes a ``reason`` on only then."""
        return False

    @property
    def reasoning_input(self) -> str | None:
        """What a reasoning changes, in words (the REST response's ``query_input``); None when it is ignored."""
        return None

    @abstractmethod
    def search_batch(self, queries: Sequence[Query | str], k: int = 10) -> list[Ranked]:
        """Top-``k`` ``(docid, score)`` lists, best first, one per query (a
        :class:`~hopscotch.retriever.io.queries.Query`, searched with its context when it is ``reasoning_aware``;
        a string: a plain query)."""

    @abstractmethod
    def get_document(self, docid: str) -> dict[str, Any] | None:
        """``{"docid", "text"}`` (with ``"title"`` when the document has one) or None when the docid is unknown."""

    def hits_with_text(self, query: Query | str, k: int) -> list[dict[str, Any]]:
        """:meth:`search`'s hit dicts for one query, before any reranking: :meth:`search_batch` and
        :meth:`get_document` for each hit."""
        hits = self.search_batch([query], k)[0]
        return [hit_dict(docid, score, self.get_document(docid), self.snippet_chars) for docid, score in hits]

    def close(self) -> None:
        """Release resources (open connections, GPU memory)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def hit_dict(docid: str, score: float, doc: dict[str, Any] | None, max_chars: int | None) -> dict[str, Any]:
    """One ``search()`` result (:class:`~hopscotch.retriever.searchers.harness.HarnessSearch`) from a document dict (or a bare text string, or None: empty
    text): ``text`` is ``title\\ntext`` (or the text alone), ``snippet`` its first ``max_chars`` characters."""
    doc = {"text": doc} if isinstance(doc, str) else doc or {}
    text = f"{doc['title']}\n{doc.get('text', '')}" if doc.get("title") else doc.get("text", "")
    return {"docid": docid, "score": float(score), "text": text, "snippet": snippet_of(text, max_chars)}


def iter_search(searcher: BaseSearcher, queries, k: int, batch_size: int = 256):
    """Yield ``(qid, [(docid, score), ...])`` for :class:`~hopscotch.retriever.io.queries.Query` records (each
    searched with its context when it is ``reasoning_aware``), ``batch_size`` queries per ``search_batch`` call."""
    queries = list(queries)
    for start in range(0, len(queries), batch_size):
        chunk = queries[start:start + batch_size]
        yield from ((q.qid, hits) for q, hits in zip(chunk, searcher.search_batch(chunk, k)))


def search_run(searcher: BaseSearcher, queries, k: int, batch_size: int = 256) -> dict[str, dict[str, float]]:
    """A whole run ``{qid: {docid: score}}`` (what :func:`hopscotch.retriever.io.runs.write_run` writes)."""
    return {qid: dict(hits) for qid, hits in iter_search(searcher, queries, k, batch_size)}
