"""One backend from a parsed namespace: the lowest step of the searchers' argparse adapter
(:mod:`hopscotch.retriever.searchers.adapter`).

Every path from flags to a searcher goes through :func:`searcher_from_namespace`: the backend built from the
flags (``cls.from_args(args)``: its ``from_flags`` of :class:`~.flags.FlagValues`), wrapped by the MaxSim reranker
when ``--rerank-model`` is given (:func:`rerank_options` -> :func:`~hopscotch.retriever.searchers.rerank.reranked`).
Its callers: ``SearcherClass(args)``, ``SearcherClass(reranker, args)`` and ``SearcherClass.from_args(args)`` (the
harness edge's :class:`~hopscotch.retriever.searchers.harness.HarnessConstructor`, the metaclass every searcher
declares, to which this module hands :func:`searcher_from_namespace` when it loads: the backend modules import
nothing of this), and :mod:`.build`'s ``searcher_from_args`` (``hopscotch search``,
``serve`` REST and MCP, ``replay``) and ``build_searcher``. Nothing else runs at import.
"""

from __future__ import annotations

import argparse

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.searchers.adapter.flags import FlagValues, flag
from hopscotch.retriever.searchers.base import BaseSearcher
from hopscotch.retriever.searchers.harness import HarnessConstructor
from hopscotch.retriever.searchers.rerank import RerankOptions, reranked

#: destinations of the ``--rerank-*`` flags other than ``--rerank-model`` (each needs it), by option field
RERANK_FLAGS = {"depth": "rerank_depth", "cache_dir": "rerank_cache", "late_fusion": "rerank_late_fusion",
                "windows": "rerank_windows", "first_weight": "rerank_first_weight"}


def rerank_options(args: argparse.Namespace) -> RerankOptions | None:
    """The rerank stage the flags ask for (``--rerank-model`` and the other ``--rerank-*``), or None without
    ``--rerank-model``; another ``--rerank-*`` flag without it is a UsageError."""
    values = {field: flag(args, dest) for field, dest in RERANK_FLAGS.items()}
    if not flag(args, "rerank_model"):
        given = [dest for field, dest in RERANK_FLAGS.items() if values[field] is not None]
        if given:
            raise UsageError(f"--{given[0].replace('_', '-')} needs --rerank-model")
        return None
    return RerankOptions(model=flag(args, "rerank_model"), query_input=flag(args, "query_input"), **values)


def searcher_from_namespace(cls: type[BaseSearcher], args: argparse.Namespace, rerank: bool = True) -> BaseSearcher:
    """``cls.from_args(args)``, reranked when ``--rerank-model`` is given (unless ``rerank`` is False: the backend
    alone, as ``from_args`` builds it).

    The one place flags become a (reranked) searcher. Rerank flags are checked before the first stage loads;
    backends building their parts (hybrid's BM25 and dense halves) build them from options, so only the outermost
    searcher is reranked."""
    if not rerank:
        return cls.from_flags(FlagValues.of(args))
    options = rerank_options(args)  # --rerank-depth without --rerank-model: fail before loading anything
    searcher = cls.from_flags(FlagValues.of(args))
    try:
        return reranked(searcher, options)
    except BaseException:
        searcher.close()
        raise


HarnessConstructor.build = searcher_from_namespace  # SearcherClass(args) and from_args(args), at the harness edge
