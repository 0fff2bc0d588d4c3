"""The searcher registry: backends register themselves by name and own their flags (BrowseComp-Plus style).

A backend is one module of this package whose class is decorated with :func:`register_searcher`;
:data:`BACKEND_MODULES` lists the modules imported (lazily, on first use of the registry) to register
them. Importing a backend module loads no model library: BM25 never imports torch. Registering names the class;
``SearcherClass(args)`` and ``SearcherClass.from_args(args)`` come from the metaclass every searcher declares, at the
harness edge (:class:`~hopscotch.retriever.searchers.harness.HarnessConstructor`), so no backend module imports
namespace code.

Example::

    cls = SEARCHERS["bm25"]                   # or get_searcher_class("bm25")
    parser = argparse.ArgumentParser()
    cls.parse_args(parser)                    # --bm25, --corpus, --index
    searcher = cls(parser.parse_args(["--bm25", "idx/bm25"]))   # or cls.from_args(...): not reranked

    add_searcher_arguments(parser)            # --searcher-type plus every backend's flags, each once
    searcher = searcher_from_args(parser.parse_args([...]))

Reranking: every backend declares the multi-vector reranker's ``--rerank-model``, ``--rerank-depth``, ... (once
per parser), and ``searcher_from_args`` and ``build_searcher`` (the argparse adapter,
:mod:`hopscotch.retriever.searchers.adapter.build`) build through its ``searcher_from_namespace``, as
``SearcherClass(args)`` does: with
``--rerank-model`` the searcher is a :class:`~hopscotch.retriever.searchers.rerank.RerankedSearcher` over the
selected backend (any of them, remote too: the candidates' text comes from its ``get_document``). So every
command that builds its searcher here (``search``, ``serve`` REST and MCP, ``replay``) reranks with no code
of its own.

One rule for flags that would do nothing: a backend flag given on the command line that the *effective* backend
does not declare (``--alpha`` with ``--bm25`` alone: only hybrid fuses) is a :class:`UsageError` naming the flag
and the searcher (the adapter's ``refuse_unused_flags``); flags several backends declare (``--index``, ``--corpus``, the
``--rerank-*`` ones) belong to each of them, and the command's own flags (``--k``, ``--queries``) are not
checked. The effective backend is the one the index makes it (:meth:`~BaseSearcher.effective_backend`: ``dense``
over a multi-vector index is ``multi_vector``), and a hybrid's flags are BM25's, its own and those of the
backend its vector half is (:meth:`~BaseSearcher.used_dests`): ``--instruction`` on a multi-vector index and
``--mv-candidates`` on a single-vector one are refused whichever backend was named.
"""

from __future__ import annotations

import argparse
import functools
import importlib
from collections.abc import Callable, Iterator, Mapping

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.searchers.adapter.flags import OWN_DESTS, add_option
from hopscotch.retriever.searchers.base import BaseSearcher

#: modules of ``hopscotch.retriever.searchers`` that register a backend when imported, in listing order
BACKEND_MODULES = ("bm25", "dense", "multi_vector_index", "hybrid", "remote")

_CLASSES: dict[str, type[BaseSearcher]] = {}


def register_searcher(name: str) -> Callable[[type[BaseSearcher]], type[BaseSearcher]]:
    """Class decorator: register a :class:`BaseSearcher` subclass as ``name`` (sets ``name`` and, unless
    the class sets its own, ``search_type``)."""

    def decorate(cls: type[BaseSearcher]) -> type[BaseSearcher]:
        if _CLASSES.get(name, cls) is not cls:
            raise ValueError(f"searcher {name!r} is registered twice ({_CLASSES[name].__name__}, {cls.__name__})")
        cls.name = name
        if not cls.__dict__.get("search_type"):
            cls.search_type = name
        _CLASSES[name] = cls
        return cls

    return decorate


class SearcherRegistry(Mapping):
    """Read-only ``name -> searcher class`` mapping that imports :data:`BACKEND_MODULES` on first use."""

    def _load(self) -> dict[str, type[BaseSearcher]]:
        for module in BACKEND_MODULES:
            importlib.import_module(f"{__package__}.{module}")
        return _CLASSES

    def __getitem__(self, name: str) -> type[BaseSearcher]:
        return self._load()[name]

    def __iter__(self) -> Iterator[str]:
        order = {module: i for i, module in enumerate(BACKEND_MODULES)}  # listing order, not import order
        classes = self._load()
        return iter(sorted(classes, key=lambda n: order.get(classes[n].__module__.rsplit(".", 1)[-1], len(order))))

    def __len__(self) -> int:
        return len(self._load())


SEARCHERS = SearcherRegistry()


def searcher_names(local_only: bool = False) -> list[str]:
    """Registered backend names; with ``local_only`` those over local index files (what ``serve`` serves)."""
    return [name for name, cls in SEARCHERS.items() if cls.local or not local_only]


def get_searcher_class(name: str) -> type[BaseSearcher]:
    """The class registered as ``name``."""
    if name not in SEARCHERS:
        raise UsageError(f"unknown searcher {name!r}: use one of {', '.join(SEARCHERS)}")
    return SEARCHERS[name]


def add_searcher_arguments(parser: argparse.ArgumentParser, local_only: bool = False) -> None:
    """Add ``--searcher-type`` and every backend's flags to ``parser`` (shared flags once, the reranker's
    ``--rerank-*`` among them).

    With ``local_only`` only the backends over local index files (``hopscotch serve``, whose own
    ``--token`` and ``--name`` would clash with the remote client's).
    """
    names = searcher_names(local_only)
    add_option(parser, "--searcher-type", choices=names,
               help="the searcher backend (default: chosen from the flags given: --bm25 and/or --index"
                    + (", or --url" if "remote" in names else "") + ")")
    for name in names:
        SEARCHERS[name].parse_args(parser)


@functools.cache
def backend_dests(cls: type[BaseSearcher]) -> frozenset[str]:
    """The flag destinations backend ``cls`` declares (its :meth:`~BaseSearcher.parse_args`)."""
    return frozenset(backend_options(cls))


@functools.cache
def backend_options(cls: type[BaseSearcher]) -> dict[str, str]:
    """``{destination: option string}`` of the flags backend ``cls`` declares (its :meth:`~BaseSearcher.parse_args`)."""
    parser = argparse.ArgumentParser(add_help=False)
    cls.parse_args(parser)
    own = set(parser.get_default(OWN_DESTS) or ())
    return {a.dest: a.option_strings[0] for a in parser._actions if a.dest in own and a.option_strings}
