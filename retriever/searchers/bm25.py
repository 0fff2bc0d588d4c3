"""BM25 searcher over a ``hopscotch bm25-index`` folder (bm25s). Queries are matched on their text only."""

from __future__ import annotations

import os
import threading
from typing import Any, Sequence

from hopscotch.retriever.searchers.base import BaseSearcher, Ranked


def document_dict(doc) -> dict[str, Any] | None:
    return None if doc is None else {"docid": doc.docid, "title": doc.title, "text": doc.text}


class BM25Searcher(BaseSearcher):
    """:param bm25: a BM25 index folder or a loaded :class:`~hopscotch.retriever.index.bm25.BM25Index`
    :param docstore: where documents come from for snippets and ``get_document``: a
        :class:`~hopscotch.retriever.index.docstore.DocStore` (a dense index folder's), an
        :class:`~hopscotch.retriever.index.docstore.InMemoryDocStore`, or None (hits without text)
    """

    name = "bm25"

    def __init__(self, bm25, docstore=None):
        from hopscotch.retriever.index.bm25 import BM25Index

        self.index = BM25Index.load(bm25) if isinstance(bm25, (str, os.PathLike)) else bm25
        self.docstore = docstore
        self._lock = threading.Lock()  # bm25s retrieval is not documented as thread-safe

    def search_batch(self, queries: Sequence[str], k: int = 10, reasonings: Sequence[str | None] | None = None,
                     reasoning_aware: bool | Sequence[bool] = False) -> list[Ranked]:
        with self._lock:
            return self.index.search(list(queries), k=k)

    def get_document(self, docid: str) -> dict[str, Any] | None:
        return None if self.docstore is None else document_dict(self.docstore.get(docid))
