"""The searcher interface an agent harness talks to (BrowseComp-Plus style).

A searcher answers ``search(query, k) -> [{"docid", "score", "snippet"}]`` and
``get_document(docid) -> {"docid", "title", "text"} | None``; batch callers (the CLI, the server) use
``search_batch`` which returns ranked ``(docid, score)`` lists. A query can carry the agent's reasoning:
with ``reasoning_aware`` the dense encoder sees
``{instruction}Reasoning: {reasoning or 'Empty'}\\n\\nQuery: {query}``, otherwise ``{instruction}{query}``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Sequence

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


class BaseSearcher(ABC):
    """Abstract searcher. Subclasses implement :meth:`search_batch` and :meth:`get_document`."""

    #: registry name (``bm25``, ``dense``, ``hybrid``, ``remote``)
    name: str = ""
    #: characters of document text returned as ``snippet`` by :meth:`search`
    snippet_chars: int | None = 1000

    @abstractmethod
    def search_batch(self, queries: Sequence[str], k: int = 10, reasonings: Sequence[str | None] | None = None,
                     reasoning_aware: bool | Sequence[bool] = False) -> list[Ranked]:
        """Top-``k`` ``(docid, score)`` lists, best first, one per query."""

    @abstractmethod
    def get_document(self, docid: str) -> dict[str, Any] | None:
        """``{"docid", "title", "text"}`` or None when the docid is unknown."""

    @property
    def search_type(self) -> str:
        return self.name

    def search(self, query: str, k: int = 10, reasoning: str | None = None) -> list[dict[str, Any]]:
        """BrowseComp-Plus-style hits: ``[{"docid", "score", "snippet"}]``, best first.

        The query is encoded reasoning-aware exactly when ``reasoning`` is given.
        """
        hits = self.search_batch([query], k, [reasoning], reasoning_aware=reasoning is not None)[0]
        out = []
        for docid, score in hits:
            doc = self.get_document(docid)
            text = "" if doc is None else (f"{doc['title']} {doc['text']}" if doc.get("title") else doc["text"])
            out.append({"docid": docid, "score": float(score), "snippet": snippet_of(text, self.snippet_chars)})
        return out

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


def iter_search(searcher: BaseSearcher, queries, k: int, reasoning_aware: bool = False, batch_size: int = 256):
    """Yield ``(qid, [(docid, score), ...])`` for :class:`~hopscotch.retriever.formats.Query` records, ``batch_size``
    queries per ``search_batch`` call; with ``reasoning_aware`` each query's ``reasoning`` is used."""
    queries = list(queries)
    for start in range(0, len(queries), batch_size):
        chunk = queries[start:start + batch_size]
        results = searcher.search_batch([q.text for q in chunk], k, [q.reasoning for q in chunk],
                                        reasoning_aware=reasoning_aware)
        yield from ((q.qid, hits) for q, hits in zip(chunk, results))


def search_run(searcher: BaseSearcher, queries, k: int, reasoning_aware: bool = False, batch_size: int = 256
               ) -> dict[str, dict[str, float]]:
    """A whole run ``{qid: {docid: score}}`` (what :func:`hopscotch.retriever.formats.write_run` writes)."""
    return {qid: dict(hits) for qid, hits in iter_search(searcher, queries, k, reasoning_aware, batch_size)}
