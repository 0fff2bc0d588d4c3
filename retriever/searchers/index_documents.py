"""Documents of a searcher over one index folder (``hopscotch index``): its docstore, opened on first use."""

from __future__ import annotations

import sys
from typing import Any

from hopscotch.retriever.index.docstore import DocStore
from hopscotch.retriever.searchers.bm25 import lookup_document


class IndexFolderDocuments:
    """``docstore``, ``has_documents`` and ``get_document`` for a searcher with ``index_dir`` and ``meta`` (an
    :class:`~hopscotch.retriever.index.layout.IndexMeta`): the dense and the multi-vector searchers."""

    _docstore = None

    @property
    def has_documents(self) -> bool:
        return bool(self.meta.docstore)

    @property
    def docstore(self):
        if self._docstore is None and self.meta.docstore:
            self._docstore = DocStore(self.index_dir, self.meta)
        return self._docstore

    def get_document(self, docid: str) -> dict[str, Any] | None:
        store = self.docstore
        if store is None:
            print(f"warning: {self.index_dir} has no docstore", file=sys.stderr)
            return None
        return lookup_document(store, docid)
