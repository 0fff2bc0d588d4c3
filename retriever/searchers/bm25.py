"""BM25 searcher over a ``hopscotch bm25-index`` folder of either backend (bm25s, or disk for large corpora: the
folder's manifest says which, :func:`~hopscotch.retriever.index.bm25.load_bm25_index`). A query with a reasoning
(reasoning-aware search) is expanded with it (:mod:`hopscotch.retriever.searchers.bm25_expansion`); without one it
is plain BM25."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.index.bm25 import load_bm25_index
from hopscotch.retriever.index.docstore import DocStore, InMemoryDocStore
from hopscotch.retriever.io.docids import canonical_docid
from hopscotch.retriever.io.queries import Query, as_query
from hopscotch.retriever.searchers.adapter.flags import options_of
from hopscotch.retriever.searchers.arg_types import positive_float, positive_int
from hopscotch.retriever.searchers.base import BaseSearcher, Ranked, add_index_option, add_option
from hopscotch.retriever.searchers.bm25_expansion import DEFAULT_BM25_EXPANSION, BM25Expansion
from hopscotch.retriever.searchers.registry import register_searcher
from hopscotch.retriever.searchers.rerank import add_rerank_options


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


@dataclass(frozen=True)
class BM25Options:
    """The ``bm25`` backend's options (its flags' destinations): ``bm25``, an index folder (or a loaded index); the
    documents from ``index`` (a dense index folder's docstore) or ``corpus`` (read into memory), or none; the
    reasoning-aware expansion's ``bm25_reasoning`` variant and ``bm25_query_weight`` (None: the defaults)."""

    bm25: Any = None
    index: str | os.PathLike | None = None
    corpus: str | os.PathLike | None = None
    bm25_reasoning: str | None = None
    bm25_query_weight: float | None = None
    bm25_terms: int | None = None
    bm25_reasoning_weight: float | None = None
    bm25_k3: float | None = None


@register_searcher("bm25")
class BM25Searcher(BaseSearcher):
    """:param bm25: a BM25 index folder (either backend) or a loaded index
        (:class:`~hopscotch.retriever.index.bm25.BM25Index`, :class:`~hopscotch.retriever.index.bm25.disk
        .DiskBM25Index`, or anything answering ``search`` / ``search_weighted`` alike)
    :param docstore: where documents come from for snippets and ``get_document``: a
        :class:`~hopscotch.retriever.index.docstore.DocStore` (a dense index folder's), an
        :class:`~hopscotch.retriever.index.docstore.InMemoryDocStore`, or None (hits without text)
    :param expansion: how a reasoning-aware query is expanded with its reasoning
        (:data:`~hopscotch.retriever.searchers.bm25_expansion.DEFAULT_BM25_EXPANSION` by default)

    Flags: ``--bm25 DIR`` and, for documents, ``--index DIR`` (its docstore) or ``--corpus FILE``;
    ``--bm25-reasoning VARIANT`` and ``--bm25-query-weight W`` (the expansion); the reranker's ``--rerank-*``
    (as every backend's).
    """

    #: its options dataclass (:meth:`from_options`; ``build_searcher(BM25Options(...))``)
    options_type = BM25Options

    search_type = "BM25"

    def __init__(self, bm25, docstore=None, expansion: BM25Expansion | None = None):
        self.index = load_bm25_index(bm25) if isinstance(bm25, (str, os.PathLike)) else bm25
        self.docstore = docstore
        self.expansion = DEFAULT_BM25_EXPANSION if expansion is None else expansion
        self._stats = None   # the index's term statistics, read on the first expanded query
        # bm25s retrieval is not documented as thread-safe; the disk backend's is (and runs without the GIL)
        self._lock = contextlib.nullcontext() if getattr(self.index, "thread_safe", False) else threading.Lock()

    @classmethod
    def parse_args(cls, parser) -> None:
        add_option(parser, "--bm25", help="BM25 index folder (hopscotch bm25-index)")
        add_index_option(parser)
        add_option(parser, "--corpus", help="bm25 without --index: corpus read into memory for document text "
                                            "(snippets, get_document)")
        add_expansion_options(parser)
        add_rerank_options(parser)

    @classmethod
    def selected_by(cls, flags) -> bool:
        return bool(flags.get("bm25")) and not flags.get("index")

    @classmethod
    def unused_flag_message(cls, option, dest, users, flags) -> str:
        if dest == "model":
            return ("--model encodes queries for a dense index: add --index DIR" if not flags.get("index")
                    else "the bm25 searcher takes no --model")
        if dest == "fusion":
            return "--fusion needs both --bm25 and --index"
        return super().unused_flag_message(option, dest, users, flags)

    @classmethod
    def from_flags(cls, flags) -> BM25Searcher:
        if not flags.get("bm25"):
            raise UsageError("the bm25 searcher needs a BM25 index folder (--bm25)")
        if flags.get("model"):
            raise UsageError("--model encodes queries for a dense index: add --index DIR"
                             if not flags.get("index") else "the bm25 searcher takes no --model")
        if flags.get("fusion"):
            raise UsageError("--fusion needs both --bm25 and --index")
        return cls.from_options(options_of(BM25Options, flags))

    @classmethod
    def from_options(cls, options: BM25Options) -> BM25Searcher:
        if not options.bm25:
            raise UsageError("the bm25 searcher needs a BM25 index folder (--bm25)")
        return cls(options.bm25, docstore=docstore_of(options.index, options.corpus),
                   expansion=expansion_of(options))

    def search_batch(self, queries: Sequence[Query | str], k: int = 10) -> list[Ranked]:
        """Plain BM25 for each query, except a reasoning-aware one with a non-empty reasoning: that one is
        expanded with it (:attr:`expansion`)."""
        queries = [as_query(q) for q in queries]
        parts = [self.expand(q.text, q) if q.reasoning_aware else None for q in queries]
        plain = [i for i, p in enumerate(parts) if p is None]
        out: list[Ranked] = [[] for _ in queries]
        with self._lock:
            if plain:
                for i, hits in zip(plain, self.index.search([queries[i].text for i in plain], k=k)):
                    out[i] = hits
            expanded = [i for i, p in enumerate(parts) if p is not None]
            if expanded:
                # the raw bag as weighted texts (the index scores them); every other expansion as weighted terms
                search = self.index.search_weighted if self.expansion.raw_bag else self.index.search_terms
                for i, hits in zip(expanded, search([parts[i] for i in expanded], k=k)):
                    out[i] = hits
        return out

    def expand(self, query: str, reasoning):
        """The expanded form of ``query`` with ``reasoning`` (a reasoning string, or a query with its context; None:
        it stays plain): the raw bag's weighted texts
        (:meth:`~hopscotch.retriever.searchers.bm25_expansion.BM25Expansion.text_parts`), else its weighted terms
        (:meth:`~hopscotch.retriever.searchers.bm25_expansion.BM25Expansion.term_query`, over this index's term
        statistics)."""
        if self.expansion.raw_bag:
            return self.expansion.text_parts(query, reasoning)
        if self._stats is None:
            self._stats = self.index.term_stats()
        return self.expansion.term_query(query, reasoning, self._stats)

    @property
    def reasoning_input(self) -> str | None:
        return f"bm25 {self.expansion.describe()}" if self.expansion.enabled else None

    @property
    def takes_reasoning(self) -> bool:
        """True unless the expansion is off (``--bm25-reasoning query``): a reasoning expands the query."""
        return self.expansion.enabled

    def get_document(self, docid: str) -> dict[str, Any] | None:
        return None if self.docstore is None else lookup_document(self.docstore, docid)

    @property
    def has_documents(self) -> bool:
        return self.docstore is not None


def add_expansion_options(parser) -> None:
    """The reasoning-aware BM25 flags (every backend with a BM25 half declares them)."""
    d = DEFAULT_BM25_EXPANSION
    add_option(parser, "--bm25-reasoning", metavar="VARIANT",
               help="reasoning-aware BM25 (with --reasoning): which reasoning text expands the query, a query input "
                    f"variant counted in words (default {d.reasoning}, chosen by the selection rule on the real agent dev "
                    "sets; 'query': no expansion)")
    add_option(parser, "--bm25-query-weight", type=positive_float, metavar="W",
               help=f"reasoning-aware BM25: how many times the query's terms count (default {d.query_weight:g})")
    add_option(parser, "--bm25-terms", type=positive_int, metavar="M",
               help="reasoning-aware BM25: keep only the reasoning's M terms with the largest saturated tf x idf "
                    f"(RM3-style feedback terms; default {_shown(d.terms, 'every term')})")
    add_option(parser, "--bm25-reasoning-weight", type=positive_float, metavar="R",
               help="reasoning-aware BM25: scale the reasoning terms' weights to R times the query's total weight "
                    f"(default {_shown(d.weight, 'each occurrence counts 1')})")
    add_option(parser, "--bm25-k3", type=positive_float, metavar="K",
               help="reasoning-aware BM25: saturate the reasoning's term frequencies, (K + 1) tf / (K + tf) "
                    f"(BM25's query-side k3; default {_shown(d.k3, 'raw frequencies')})")


def _shown(value, unset: str) -> str:
    return unset if value is None else f"{value:g}"


#: the expansion's options (each backend with a BM25 half has them) -> :class:`BM25Expansion`'s parameters
EXPANSION_OPTIONS = {"bm25_reasoning": "reasoning", "bm25_query_weight": "query_weight", "bm25_terms": "terms",
                     "bm25_reasoning_weight": "weight", "bm25_k3": "k3"}


def expansion_of(source) -> BM25Expansion:
    """The expansion that options (a dataclass with :data:`EXPANSION_OPTIONS`' fields) or parsed flags (a mapping)
    ask for: each one given replaces :data:`DEFAULT_BM25_EXPANSION`'s setting (None: unset)."""
    get = source.get if isinstance(source, Mapping) else (lambda name: getattr(source, name, None))
    settings = {param: getattr(DEFAULT_BM25_EXPANSION, param) for param in EXPANSION_OPTIONS.values()}
    for option, param in EXPANSION_OPTIONS.items():
        value = get(option)
        if value is not None:
            settings[param] = value
    return BM25Expansion.parse(**settings)


def docstore_of(index, corpus):
    """Documents for a BM25 searcher: ``index``'s docstore (``--index``), else ``corpus`` in memory (``--corpus``),
    else None (both given: a UsageError, one of them would be ignored)."""
    if index and corpus:
        raise UsageError("--corpus and --index both give the BM25 searcher's documents: give one of them")
    if index:
        return DocStore(index)
    if corpus:
        return InMemoryDocStore(corpus)
    return None
