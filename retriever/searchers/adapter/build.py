"""Parsed flags -> searchers: the argparse edge of the searchers (see :mod:`hopscotch.retriever.searchers.adapter`).

:func:`searcher_from_args` (``hopscotch search``, ``serve`` REST and MCP, ``replay``) picks the backend the flags
select and refuses a flag it does not use (:func:`refuse_unused_flags`; a flag that changes reasoning-aware queries
only, when the command reads no reasoning: :func:`refuse_reasoning_flags`); :func:`build_searcher` is the Python
factory. Both build through :func:`~.namespace.searcher_from_namespace`, as ``SearcherClass(args)`` does.
:func:`fusion_from_args` reads the hybrid's fusion from parsed flags. Nothing here runs at import.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.model.query_input import QueryInput
from hopscotch.retriever.searchers.adapter.flags import OWN_DESTS, FlagValues, flag, given_flags
from hopscotch.retriever.searchers.adapter.namespace import searcher_from_namespace
from hopscotch.retriever.searchers.base import BaseSearcher
from hopscotch.retriever.searchers.bm25 import add_expansion_options
from hopscotch.retriever.searchers.hybrid import fusion_from_flags
from hopscotch.retriever.searchers.registry import SEARCHERS, backend_dests, get_searcher_class, searcher_names
from hopscotch.retriever.searchers.rerank import RerankOptions, reranked

if TYPE_CHECKING:
    from hopscotch.retriever.searchers.fusion import FusionSettings


def searcher_from_args(args: argparse.Namespace, local_only: bool = False, reasoning: bool | None = None
                       ) -> BaseSearcher:
    """The searcher ``args`` describe: ``--searcher-type``, else the one backend the flags select; reranked
    when ``--rerank-model`` is given (:func:`~.namespace.searcher_from_namespace`). ``reasoning``: whether the
    command reads the queries' reasoning (False: a flag that changes reasoning-aware queries only is refused,
    :func:`refuse_reasoning_flags`; None: the queries may carry one, as a service's requests do)."""
    kind = getattr(args, "searcher_type", None)
    flags = FlagValues.of(args)
    if not kind:
        names = searcher_names(local_only)
        chosen = [name for name in names if SEARCHERS[name].selected_by(flags)]
        if not chosen:
            raise UsageError("give --bm25 DIR, --index DIR, or both (hybrid)"
                             + (", or --url URL (remote)" if "remote" in names else ""))
        if len(chosen) > 1:
            raise UsageError(f"the flags fit several searchers ({', '.join(chosen)}): pick one with --searcher-type")
        kind = chosen[0]
    cls = get_searcher_class(kind)
    refuse_unused_flags(cls, args)
    refuse_reasoning_flags(args, reasoning)
    return searcher_from_namespace(cls.effective_backend(flags), args)


#: the query mix's weights (``--query-mix``, ``--query-mix-max-words``, ``--query-mix-long``,
#: ``--rerank-query-mix``): each weighs a reasoning-aware score against the query-only one
QUERY_MIX_DESTS = frozenset({"late_fusion", "late_fusion_max_words", "late_fusion_long", "rerank_late_fusion"})


def expansion_dests() -> frozenset[str]:
    """The destinations of every flag of the reasoning-aware BM25 expansion: whatever
    :func:`~hopscotch.retriever.searchers.bm25.add_expansion_options` declares."""
    parser = argparse.ArgumentParser(add_help=False)
    add_expansion_options(parser)
    return frozenset(parser.get_default(OWN_DESTS) or ())


def refuse_reasoning_flags(args: argparse.Namespace, reasoning: bool | None) -> None:
    """:class:`UsageError` for a given flag that changes reasoning-aware queries only (:func:`expansion_dests`,
    :data:`QUERY_MIX_DESTS`) when the command reads no reasoning (``reasoning`` False), and for a flag of the BM25
    expansion beside ``--bm25-reasoning query``, which turns the expansion off."""
    given = given_flags(args)
    expansion = expansion_dests()
    if reasoning is False:
        unused = sorted((expansion | QUERY_MIX_DESTS) & set(given))
        if unused:
            option = given[unused[0]]
            raise UsageError(f"{option} changes reasoning-aware queries only, and these queries are searched without "
                             f"their reasoning: add --reasoning, or drop {option}")
    variant = flag(args, "bm25_reasoning")
    if variant is not None and not QueryInput.parse(variant, "--bm25-reasoning").uses_reasoning:
        unused = sorted((expansion - {"bm25_reasoning"}) & set(given))
        if unused:
            raise UsageError(f"{given[unused[0]]} shapes the reasoning-aware BM25 expansion, which --bm25-reasoning "
                             f"{variant} turns off: drop one of them")


def refuse_unused_flags(cls: type[BaseSearcher], args: argparse.Namespace) -> None:
    """:class:`UsageError` for the first backend flag given on the command line that the backend ``cls`` is for
    these flags does not use (:meth:`~BaseSearcher.used_dests`; the module doc's rule); its message is the
    effective backend's :meth:`~BaseSearcher.unused_flag_message`."""
    flags = FlagValues.of(args)
    used = cls.used_dests(flags, backend_dests)
    speaker = cls.effective_backend(flags)
    for dest, option in sorted(given_flags(args).items()):
        if dest in used:
            continue
        users = [name for name, other in SEARCHERS.items() if dest in backend_dests(other)]
        if users:  # else not a backend flag: the command's own
            raise UsageError(speaker.unused_flag_message(option, dest, users, flags))


def build_searcher(kind, /, rerank: RerankOptions | None = None, **options) -> BaseSearcher:
    """Build a searcher in Python: from a backend's options dataclass (``build_searcher(BM25Options(bm25="idx"))``:
    the backend whose ``options_type`` it is, through its ``from_options``), or from the backend's name and keyword
    options named like its flags' destinations (below). ``rerank`` (a
    :class:`~hopscotch.retriever.searchers.rerank.RerankOptions`) reranks it.

    Unset options take the flags' defaults; an option the backend does not declare is a TypeError.
    Example: ``build_searcher("hybrid", bm25="idx/bm25", index="idx/dense", fusion="interp", alpha=0.5)``;
    a dense or hybrid searcher also takes ``encoder=`` (an already-loaded DenseEncoder). ``rerank_model=``
    (and ``rerank_depth=``, ...) reranks it, as ``--rerank-model`` does.
    """
    if not isinstance(kind, str):
        if options:
            raise TypeError(f"build_searcher({type(kind).__name__}(...)) takes no keyword options but rerank=")
        owner = next((c for c in SEARCHERS.values() if isinstance(kind, c.options_type)), None)
        if owner is None:
            raise TypeError(f"{type(kind).__name__} is no searcher backend's options")
        return reranked(owner.from_options(kind), rerank)
    if rerank is not None:
        raise TypeError("rerank= goes with a backend's options dataclass; by name, give rerank_model=, ...")
    cls = get_searcher_class(kind)
    cls = cls.effective_backend(FlagValues(options))  # "dense" over a multi-vector index: multi_vector
    parser = argparse.ArgumentParser(add_help=False)
    cls.parse_args(parser)
    args = parser.parse_args([])
    unknown = sorted(set(options) - set(vars(args)) - set(getattr(cls, "extra_options", ())))
    if unknown:
        raise TypeError(f"the {kind} searcher takes no option {', '.join(unknown)} (it takes "
                        f"{', '.join(sorted(vars(args)))})")
    vars(args).update(options)
    setattr(args, OWN_DESTS, tuple(sorted({*getattr(args, OWN_DESTS, ()), *options})))  # e.g. encoder=
    return searcher_from_namespace(cls, args)


def fusion_from_args(args: argparse.Namespace) -> FusionSettings:
    """The hybrid's fusion the parsed flags ask for (``--fusion``, ``--fusion-config``, ...: the hybrid's
    :func:`~hopscotch.retriever.searchers.hybrid.fusion_from_flags`)."""
    return fusion_from_flags(FlagValues.of(args))
