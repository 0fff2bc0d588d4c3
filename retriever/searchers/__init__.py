"""Searcher backends behind one interface, BrowseComp-Plus style: ``bm25``, ``dense``, ``hybrid``, ``remote``.

Example::

    from hopscotch.retriever.searchers import build_searcher
    s = build_searcher("hybrid", bm25="bm25_dir", index="index_dir", fusion="rrf")
    s.search("who directed Gummo", k=5)          # [{"docid", "score", "snippet"}]
    s.get_document("ic00017")                    # {"docid", "title", "text"}
"""

from __future__ import annotations

import importlib

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.searchers.base import BaseSearcher, iter_search, search_run

_SEARCHERS = {
    "bm25": ("hopscotch.retriever.searchers.bm25", "BM25Searcher"),
    "dense": ("hopscotch.retriever.searchers.dense", "DenseSearcher"),
    "hybrid": ("hopscotch.retriever.searchers.hybrid", "HybridSearcher"),
    "remote": ("hopscotch.retriever.searchers.remote", "RemoteSearcher"),
}


def searcher_names() -> list[str]:
    return list(_SEARCHERS)


def get_searcher_class(name: str) -> type[BaseSearcher]:
    """The class registered as ``name`` (imported lazily: BM25 does not load torch)."""
    if name not in _SEARCHERS:
        raise UsageError(f"unknown searcher {name!r}: use one of {', '.join(_SEARCHERS)}")
    module, cls = _SEARCHERS[name]
    return getattr(importlib.import_module(module), cls)


def build_searcher(kind: str, *, bm25=None, index=None, model=None, corpus=None, url=None, name="default",
                   token=None, fusion="rrf", alpha=1.0, rrf_k=60.0, depth=100, instruction=None, nprobe=None,
                   ef_search=None, refine=1, faiss_name=None, encoder=None) -> BaseSearcher:
    """Build a searcher from plain arguments.

    * ``bm25``: ``bm25`` (folder); documents from ``index`` (its docstore) or ``corpus`` (read into RAM)
    * ``dense``: ``index`` (folder) [, ``model``, ``instruction``, ``nprobe``, ``ef_search``, ``refine``]
    * ``hybrid``: both of the above plus ``fusion`` (``rrf``|``interp``), ``alpha``, ``rrf_k``, ``depth``
    * ``remote``: ``url`` [, ``name``, ``token``]
    """
    cls = get_searcher_class(kind)
    if kind == "remote":
        if not url:
            raise UsageError("the remote searcher needs a service url")
        return cls(url, index=name, token=token)
    dense = None
    if kind in ("dense", "hybrid"):
        if not index:
            raise UsageError(f"the {kind} searcher needs a dense index folder (--index)")
        dense = get_searcher_class("dense")(index, model=model, faiss_name=faiss_name, nprobe=nprobe,
                                            ef_search=ef_search, refine=refine, instruction=instruction,
                                            encoder=encoder)
        if kind == "dense":
            return dense
    if not bm25:
        raise UsageError(f"the {kind} searcher needs a BM25 index folder (--bm25)")
    docstore = None
    if dense is not None:
        docstore = dense.docstore
    elif index:
        from hopscotch.retriever.index.docstore import DocStore
        docstore = DocStore(index)
    elif corpus:
        from hopscotch.retriever.index.docstore import InMemoryDocStore
        docstore = InMemoryDocStore(corpus)
    sparse = get_searcher_class("bm25")(bm25, docstore=docstore)
    if kind == "bm25":
        return sparse
    return cls(sparse, dense, fusion=fusion, alpha=alpha, rrf_k=rrf_k, depth=depth)


__all__ = ["BaseSearcher", "build_searcher", "get_searcher_class", "iter_search", "search_run", "searcher_names"]
