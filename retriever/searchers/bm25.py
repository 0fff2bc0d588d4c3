"""BM25 searcher over a ``hopscotch bm25-index`` folder (bm25s). Queries are matched on their text only."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.docids import canonical_docid
from hopscotch.retriever.searchers.base import (
    BaseSearcher,
    Ranked,
    add_index_option,
    add_option,
    flag,
)
from hopscotch.retriever.searchers.rerank import add_rerank_options
from hopscotch.retriever.searchers.registry import register_searcher


def document_dict(doc) -> dict[str, Any] | None:
    """A docstore document as ``get_document`` returns it: ``{"docid", "text"}``, plus ``"title"`` when it has one."""
    if doc is None:
        return None
    out = {"docid": doc.docid, "text": doc.text}
    if doc.title:
        out["title"] = doc.title
    return out


def lookup_document(docstore, docid: str) -> dict[str, Any] | None:
    """``docstore.get`` of the canonical spelling of ``docid`` (an agent may send either ClimbMix spelling)."""
    return document_dict(docstore.get(canonical_docid(str(docid))))


@register_searcher("bm25")
class BM25Searcher(BaseSearcher):
    """:param bm25: a BM25 index folder or a loaded :class:`~hopscotch.retriever.index.bm25.BM25Index`
    :param docstore: where documents come from for snippets and ``get_document``: a
        :class:`~hopscotch.retriever.index.docstore.DocStore` (a dense index folder's), an
        :class:`~hopscotch.retriever.index.docstore.InMemoryDocStore`, or None (hits without text)

    Flags: ``--bm25 DIR`` and, for documents, ``--index DIR`` (its docstore) or ``--corpus FILE``; the reranker's
    ``--rerank-*`` (as every backend's).
    """

    search_type = "BM25"

    def __init__(self, bm25, docstore=None):
        from hopscotch.retriever.index.bm25 import BM25Index

        self.index = BM25Index.load(bm25) if isinstance(bm25, (str, os.PathLike)) else bm25
        self.docstore = docstore
        self._lock = threading.Lock()  # bm25s retrieval is not documented as thread-safe

    @classmethod
    def parse_args(cls, parser) -> None:
        add_option(parser, "--bm25", help="BM25 index folder (hopscotch bm25-index)")
        add_index_option(parser)
        add_option(parser, "--corpus", help="bm25 without --index: corpus read into memory for document text "
                                            "(snippets, get_document)")
        add_rerank_options(parser)

    @classmethod
    def selected_by(cls, args) -> bool:
        return bool(flag(args, "bm25")) and not flag(args, "index")

    @classmethod
    def unused_flag_message(cls, option, dest, users, args) -> str:
        if dest == "model":
            return ("--model encodes queries for a dense index: add --index DIR" if not flag(args, "index")
                    else "the bm25 searcher takes no --model")
        if dest == "fusion":
            return "--fusion needs both --bm25 and --index"
        return super().unused_flag_message(option, dest, users, args)

    @classmethod
    def from_args(cls, args) -> BM25Searcher:
        if not flag(args, "bm25"):
            raise UsageError("the bm25 searcher needs a BM25 index folder (--bm25)")
        if flag(args, "model"):
            raise UsageError("--model encodes queries for a dense index: add --index DIR"
                             if not flag(args, "index") else "the bm25 searcher takes no --model")
        if flag(args, "fusion"):
            raise UsageError("--fusion needs both --bm25 and --index")
        return cls(flag(args, "bm25"), docstore=docstore_from_args(args))

    def search_batch(self, queries: Sequence[str], k: int = 10, reasonings: Sequence[str | None] | None = None,
                     reasoning_aware: bool | Sequence[bool] = False) -> list[Ranked]:
        with self._lock:
            return self.index.search(list(queries), k=k)

    def get_document(self, docid: str) -> dict[str, Any] | None:
        return None if self.docstore is None else lookup_document(self.docstore, docid)

    @property
    def has_documents(self) -> bool:
        return self.docstore is not None


def docstore_from_args(args):
    """Documents for a BM25 searcher: ``--index``'s docstore, else ``--corpus`` in memory, else None."""
    if flag(args, "index"):
        from hopscotch.retriever.index.docstore import DocStore
        return DocStore(flag(args, "index"))
    if flag(args, "corpus"):
        from hopscotch.retriever.index.docstore import InMemoryDocStore
        return InMemoryDocStore(flag(args, "corpus"))
    return None
