"""One backend from a parsed namespace: the lowest step of the searchers' argparse adapter
(:mod:`hopscotch.retriever.searchers.adapter`).

Every path from flags to a searcher goes through :func:`searcher_from_namespace`: the backend built from the
flags (``cls.from_args(args)``: its ``from_flags`` of :class:`~.flags.FlagValues`), wrapped by the MaxSim reranker
when ``--rerank-model`` is given (:func:`rerank_options` -> :func:`~hopscotch.retriever.searchers.rerank.reranked`).
Its callers: ``SearcherClass(args)`` and ``SearcherClass(reranker, args)`` (the :class:`BuiltFromNamespace`
metaclass, which :func:`~hopscotch.retriever.searchers.registry.register_searcher` gives every registered backend:
the backend modules import nothing of this), and :mod:`.build`'s ``searcher_from_args`` (``hopscotch search``,
``serve`` REST and MCP, ``replay``) and ``build_searcher``. Nothing here runs at import.
"""

from __future__ import annotations

import argparse
from abc import ABCMeta

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.searchers.adapter.flags import FlagValues, flag
from hopscotch.retriever.searchers.base import BaseSearcher
from hopscotch.retriever.searchers.rerank import RerankOptions, reranked

#: destinations of the ``--rerank-*`` flags other than ``--rerank-model`` (each needs it), by option field
RERANK_FLAGS = {"depth": "rerank_depth", "cache_dir": "rerank_cache", "late_fusion": "rerank_late_fusion",
                "windows": "rerank_windows", "first_weight": "rerank_first_weight"}


class BuiltFromNamespace(ABCMeta):
    """The metaclass of the registered backends (set by ``register_searcher``): ``SearcherClass(args)`` and
    ``SearcherClass(reranker, args)`` (BrowseComp-Plus's registry, AgentIR) build a searcher from a parsed
    :class:`argparse.Namespace` through :func:`searcher_from_namespace` (so ``--rerank-model`` reranks it); any
    other call constructs as usual. ``SearcherClass.from_args(args)`` builds the backend alone."""

    def __call__(cls, *args, **kwargs):
        if not kwargs and len(args) in (1, 2) and isinstance(args[-1], argparse.Namespace):
            searcher = searcher_from_namespace(cls, args[-1])
            searcher.reranker = args[0] if len(args) == 2 else None
            return searcher
        return super().__call__(*args, **kwargs)

    def from_args(cls, args: argparse.Namespace) -> BaseSearcher:
        """Build the searcher from parsed flags (those its ``parse_args`` added; others are ignored): its
        ``from_flags`` of their values, not reranked (:func:`searcher_from_namespace` reranks)."""
        return cls.from_flags(FlagValues.of(args))


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


def searcher_from_namespace(cls: type[BaseSearcher], args: argparse.Namespace) -> BaseSearcher:
    """``cls.from_args(args)``, reranked when ``--rerank-model`` is given.

    The one place flags become a (reranked) searcher. Rerank flags are checked before the first stage loads;
    backends building their parts (hybrid's BM25 and dense halves) build them from options, so only the outermost
    searcher is reranked."""
    rerank = rerank_options(args)  # --rerank-depth without --rerank-model: fail before loading anything
    searcher = cls.from_flags(FlagValues.of(args))
    try:
        return reranked(searcher, rerank)
    except BaseException:
        searcher.close()
        raise
