"""Hybrid searcher: BM25 and dense lists fused by RRF or Pyserini-style interpolation."""

from __future__ import annotations

from typing import Any, Sequence

from hopscotch.retriever.searchers.base import BaseSearcher, Ranked
from hopscotch.retriever.searchers.fusion import fuse


class HybridSearcher(BaseSearcher):
    """:param bm25: a :class:`~hopscotch.retriever.searchers.bm25.BM25Searcher`
    :param dense: a :class:`~hopscotch.retriever.searchers.dense.DenseSearcher`
    :param fusion: ``rrf`` or ``interp``
    :param alpha: interpolation weight on the (normalised) BM25 score: ``alpha * bm25 + dense``
    :param rrf_k: the RRF constant
    :param depth: candidates taken from each list before fusing (at least ``k``)
    """

    name = "hybrid"

    def __init__(self, bm25, dense, fusion: str = "rrf", alpha: float = 1.0, rrf_k: float = 60, depth: int = 100):
        from hopscotch.retriever.errors import UsageError
        from hopscotch.retriever.searchers.fusion import FUSION_METHODS

        if fusion not in FUSION_METHODS:
            raise UsageError(f"unknown fusion {fusion!r}: use one of {', '.join(FUSION_METHODS)}")
        self.bm25, self.dense = bm25, dense
        self.fusion, self.alpha, self.rrf_k, self.depth = fusion, alpha, rrf_k, depth
        if getattr(self.bm25, "docstore", None) is None:
            self.bm25.docstore = dense.docstore

    def search_batch(self, queries: Sequence[str], k: int = 10, reasonings: Sequence[str | None] | None = None,
                     reasoning_aware: bool | Sequence[bool] = False, show_progress: bool = False) -> list[Ranked]:
        depth = max(k, self.depth)
        sparse = self.bm25.search_batch(queries, depth)
        dense = self.dense.search_batch(queries, depth, reasonings, reasoning_aware, show_progress=show_progress)
        return [fuse(self.fusion, s, d, k, alpha=self.alpha, rrf_k=self.rrf_k) for s, d in zip(sparse, dense)]

    def get_document(self, docid: str) -> dict[str, Any] | None:
        return self.dense.get_document(docid)
