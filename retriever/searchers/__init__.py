"""Searcher backends behind one interface, BrowseComp-Plus style: ``bm25``, ``dense``, ``hybrid``, ``remote``.

Each backend registers itself (:func:`~hopscotch.retriever.searchers.registry.register_searcher`), declares
its own flags (``parse_args(parser)``) and is built from them (``from_args(args)``); see
:mod:`hopscotch.retriever.searchers.registry`.

Example::

    from hopscotch.retriever.searchers import SEARCHERS, build_searcher
    s = build_searcher("hybrid", bm25="bm25_dir", index="index_dir", fusion="rrf")
    s.search("who directed Gummo", k=5)          # [{"docid", "score", "text", "snippet"}]
    s.get_document("ic00017")                    # {"docid", "text"} (+ "title" when it has one)

    cls = SEARCHERS["bm25"]                      # flags -> searcher, as BrowseComp-Plus and AgentIR build one
    parser = argparse.ArgumentParser()
    cls.parse_args(parser)
    s = cls(parser.parse_args(["--bm25", "bm25_dir", "--index", "index_dir"]))   # = cls.from_args(...)
"""

from __future__ import annotations

from hopscotch.retriever.searchers.adapter.build import build_searcher, searcher_from_args
from hopscotch.retriever.searchers.base import BaseSearcher, iter_search, search_run
from hopscotch.retriever.searchers.registry import (SEARCHERS, add_searcher_arguments, get_searcher_class,
                                                    register_searcher, searcher_names)

__all__ = ["SEARCHERS", "BaseSearcher", "add_searcher_arguments", "build_searcher", "get_searcher_class",
           "iter_search", "register_searcher", "search_run", "searcher_from_args", "searcher_names"]
