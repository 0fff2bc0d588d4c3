"""Hybrid searcher: BM25 and dense lists fused by (weighted) RRF or Pyserini-style interpolation.

A reasoning-aware query reaches both halves: BM25 expands the query with the reasoning
(:mod:`~hopscotch.retriever.searchers.bm25_expansion`), the dense half encodes it when its model reads reasoning
(:attr:`~hopscotch.retriever.searchers.dense.DenseSearcher.takes_reasoning`: a trained reasoning-aware model, or
``--query-input``); a plain model's dense half searches with the query alone.

The BM25 half is a local index (``--bm25 DIR``) or a Pyserini-compatible REST endpoint (``--bm25-url
ROOT/v1/NAME``, e.g. the cmass ClimbMix service: :mod:`~hopscotch.retriever.searchers.remote_bm25`), whose list is
fused with the local dense index's (``--index``) exactly as a local BM25 list is; the expansion is sent as
repeated plain text, which a bag-of-words endpoint scores as the local weighted query."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.queries import Query, as_query
from hopscotch.retriever.io.runs import ranked
from hopscotch.retriever.searchers.arg_types import finite_float, non_negative_float, positive_int
from hopscotch.retriever.searchers.base import BaseSearcher, Ranked, add_option
from hopscotch.retriever.searchers.rerank import add_rerank_options
from hopscotch.retriever.searchers.bm25 import EXPANSION_OPTIONS, BM25Searcher, expansion_of
from hopscotch.retriever.searchers.dense import DenseOptions, DenseSearcher
from hopscotch.retriever.searchers.fusion import (
    DEFAULT_ADAPTIVE,
    DEFAULT_FUSION,
    DEFAULT_INTERP,
    DEFAULT_RRF,
    FUSION_METHODS,
    NORMALIZATIONS,
    FusionSettings,
    parse_rrf_weights,
    read_fusion_config,
)
from hopscotch.retriever.searchers.multi_vector_index import MultiVectorIndexSearcher
from hopscotch.retriever.searchers.registry import backend_dests, register_searcher
from hopscotch.retriever.searchers.remote import add_timeout_option
from hopscotch.retriever.searchers.remote_bm25 import (
    RemoteBM25Index,
    dense_docids,
    remote_index_from_flags,
    split_index_url,
)

#: the flags of a remote BM25 half (``--bm25-url``), used only with it
REMOTE_BM25_DESTS = frozenset({"bm25_url", "bm25_token", "remote_timeout"})
#: where the BM25 half's token comes from when ``--bm25-token`` is not given (the variable cmass's client reads)
TOKEN_ENV = "PYSERINI_API_TOKEN"
#: candidates taken from each list before fusing (``--depth``), one default for ``search``, ``serve`` and ``replay``:
#: the depth the fusion defaults were chosen at on the agent dev sets (experiments/ablations/fusion_defaults.py)
DEFAULT_DEPTH = 100


@dataclass(frozen=True)
class HybridOptions:
    """The ``hybrid`` backend's options: its BM25 half, a local index (``bm25``, a folder or a loaded index) or an
    endpoint (``bm25_url``, with ``bm25_token`` (None: ``$PYSERINI_API_TOKEN``) and ``remote_timeout``), and the
    expansion's options (``bm25_reasoning``, ``bm25_query_weight``, ``bm25_terms``, ``bm25_reasoning_weight``,
    ``bm25_k3``: :data:`~hopscotch.retriever.searchers.bm25.EXPANSION_OPTIONS`); its vector half's options (``vector``: a
    :class:`~hopscotch.retriever.searchers.dense.DenseOptions` or a
    :class:`~hopscotch.retriever.searchers.multi_vector_index.MultiVectorSearchOptions`); the ``fusion`` (None: the
    learnt default) and ``depth``, candidates from each list."""

    bm25: Any = None
    bm25_url: str | None = None
    bm25_token: str | None = None
    remote_timeout: float | None = None
    bm25_reasoning: str | None = None
    bm25_query_weight: float | None = None
    bm25_terms: int | None = None
    bm25_reasoning_weight: float | None = None
    bm25_k3: float | None = None
    vector: Any = None
    fusion: FusionSettings | None = None
    depth: int = DEFAULT_DEPTH


@register_searcher("hybrid")
class HybridSearcher(BaseSearcher):
    """:param bm25: a :class:`~hopscotch.retriever.searchers.bm25.BM25Searcher`
    :param dense: a :class:`~hopscotch.retriever.searchers.dense.DenseSearcher`
    :param fusion: ``rrf`` or ``interp``
    :param alpha: interpolation weight on the (normalised) BM25 score: ``alpha * bm25 + dense``
        (``bm25 + alpha * dense`` with ``weight_on_dense``)
    :param rrf_k: the RRF constant
    :param depth: candidates taken from each list before fusing (at least ``k``)
    :param weights: weighted RRF: ``(w_bm25, w_dense)``; None is plain RRF
    :param weight_on_dense: interpolation: put ``alpha`` on the dense score
    :param normalization: interpolation: ``zscore`` or ``minmax`` (Pyserini's) score normalisation

    Flags: the BM25 and the dense searchers' flags plus ``--fusion rrf|interp``, ``--alpha``,
    ``--normalization``, ``--rrf-k``, ``--rrf-weights``, ``--depth`` (defaults learnt on the agent dev sets: :data:`~hopscotch.retriever.searchers.fusion.DEFAULT_INTERP`,
    :data:`~hopscotch.retriever.searchers.fusion.DEFAULT_RRF`) and ``--fusion-config tuned.json`` (method and parameters from ``hopscotch tune-fusion``,
    in place of ``--fusion``/``--alpha``/``--rrf-k``); the BM25 side reads its documents from the dense index.
    ``--rerank-model`` reranks the fused list (the hybrid searcher as a whole, not its halves).

    A remote BM25 half: ``--bm25-url ROOT/v1/NAME`` in place of ``--bm25 DIR`` (``--bm25-token T``, else
    ``$PYSERINI_API_TOKEN``; ``--remote-timeout S``): the endpoint is asked for ``--depth`` hits per query (no text)
    and probed once when the searcher is built; the reasoning-aware expansion is sent as repeated text (a
    ``--bm25-query-weight`` that is a fraction with a denominator up to 10); each hit's docid must be in the dense
    index; documents come from the dense index's docstore, else from the endpoint's ``/doc/`` route
    (:mod:`~hopscotch.retriever.searchers.remote_bm25`). ``--bm25-url`` without ``--index`` is refused (the
    remote searcher, ``--url ROOT --name NAME``, searches an endpoint alone).

    Before fusing, each list's tied documents (equal scores) are put in docid order, the order a run file holds
    them in (:func:`~hopscotch.retriever.io.runs.ranked`): every engine breaks ties its own way (bm25s, Lucene,
    FAISS) and RRF reads ranks, so the fused list does not depend on which engine answered, and equals the fusion
    of the two halves' run files (what ``hopscotch tune-fusion`` measures).
    """

    #: its options dataclass (:meth:`from_options`; ``build_searcher(HybridOptions(...))``)
    options_type = HybridOptions

    extra_options = DenseSearcher.extra_options

    def __init__(self, bm25, dense, fusion: str = DEFAULT_FUSION, alpha: float = DEFAULT_INTERP.alpha,
                 rrf_k: float = DEFAULT_RRF.rrf_k, depth: int = DEFAULT_DEPTH,
                 weights: tuple[float, float] | None = None, weight_on_dense: bool = False,
                 normalization: str = DEFAULT_INTERP.normalization, adapt: float = 0.0, shift: float = 0.0,
                 agreement_k: int = 10):
        if fusion not in FUSION_METHODS:
            raise UsageError(f"unknown fusion {fusion!r}: use one of {', '.join(FUSION_METHODS)}")
        self.bm25, self.dense = bm25, dense
        self.fusion, self.alpha, self.rrf_k, self.depth = fusion, alpha, rrf_k, depth
        self.weights, self.weight_on_dense, self.normalization = weights, weight_on_dense, normalization
        self.adapt, self.shift, self.agreement_k = adapt, shift, agreement_k
        _ = self.settings  # validates the parameters now, not at the first search
        if getattr(self.bm25, "docstore", None) is None:
            self.bm25.docstore = dense.docstore
        remote = self.remote_bm25
        if remote is not None and remote.known is None:  # a foreign docid means the two corpora differ
            remote.known = dense_docids(dense)
            remote.known_what = f"the dense index {getattr(dense, 'index_dir', '')}".rstrip()

    @property
    def remote_bm25(self) -> RemoteBM25Index | None:
        """The endpoint the BM25 half asks (``--bm25-url``), or None for a local BM25 index."""
        index = getattr(self.bm25, "index", None)
        return index if isinstance(index, RemoteBM25Index) else None

    @property
    def vector_stage(self) -> BaseSearcher | None:
        """The vector half's (:attr:`dense`)."""
        return self.dense.vector_stage

    @property
    def settings(self) -> FusionSettings:
        """The fusion this searcher applies (built from its attributes)."""
        return FusionSettings(self.fusion, alpha=self.alpha, weight_on_dense=self.weight_on_dense,
                              rrf_k=self.rrf_k, weights=self.weights, normalization=self.normalization,
                              adapt=self.adapt, shift=self.shift, agreement_k=self.agreement_k)

    @classmethod
    def from_settings(cls, bm25, dense, settings: FusionSettings, depth: int = DEFAULT_DEPTH) -> HybridSearcher:
        """A hybrid searcher applying ``settings``."""
        return cls(bm25, dense, fusion=settings.method, alpha=settings.alpha, rrf_k=settings.rrf_k, depth=depth,
                   weights=settings.weights, weight_on_dense=settings.weight_on_dense,
                   normalization=settings.normalization, adapt=settings.adapt, shift=settings.shift,
                   agreement_k=settings.agreement_k)

    @classmethod
    def parse_args(cls, parser) -> None:
        BM25Searcher.parse_args(parser)
        DenseSearcher.parse_args(parser)
        MultiVectorIndexSearcher.parse_args(parser)
        add_option(parser, "--fusion", choices=list(FUSION_METHODS),
                   help=f"how BM25 and dense lists are fused (default {DEFAULT_FUSION}, chosen on the dev sets; rrf "
                        "when only --rrf-k / --rrf-weights are given; adaptive: a BM25 weight per query from the "
                        "two lists' own scores)")
        add_option(parser, "--adapt", type=non_negative_float,
                   help="adaptive: how strongly each query's lists move the BM25 weight (0: fixed interpolation; "
                        f"default {DEFAULT_ADAPTIVE.adapt:g}, learnt on the dev sets)")
        add_option(parser, "--adapt-shift", type=finite_float,
                   help="adaptive: the standout difference (BM25 - dense) at which neither list is favoured "
                        f"(default {DEFAULT_ADAPTIVE.shift:g}, learnt on the dev sets)")
        add_option(parser, "--alpha", type=non_negative_float,
                   help="interp: weight of the normalised BM25 score (score = alpha * bm25 + dense; default "
                        f"{DEFAULT_INTERP.alpha:.4g}, i.e. BM25 weight {DEFAULT_INTERP.sparse_weight:g} of 1, "
                        "learnt on the dev sets: docs/benchmarks.md)")
        add_option(parser, "--normalization", choices=list(NORMALIZATIONS),
                   help="interp: how each list's scores are normalised before mixing: zscore (minus the mean, "
                        f"over the standard deviation) or minmax (Pyserini's); default {DEFAULT_INTERP.normalization}, "
                        "learnt on the dev sets")
        add_option(parser, "--rrf-k", type=non_negative_float,
                   help=f"rrf: the constant k in 1 / (k + rank) (default {DEFAULT_RRF.rrf_k:g}, learnt on the dev sets)")
        add_option(parser, "--rrf-weights", metavar="W_BM25,W_DENSE",
                   help="rrf: weights of the BM25 and the dense list (default "
                        f"{DEFAULT_RRF.weights[0]:g},{DEFAULT_RRF.weights[1]:g}, learnt on the dev sets; 1,1 is plain RRF)")
        add_option(parser, "--depth", type=positive_int, default=DEFAULT_DEPTH,
                   help=f"hybrid: candidates from each list before fusing (default {DEFAULT_DEPTH}, in search, serve "
                        "and replay alike: the depth the fusion defaults were chosen at; a larger --k widens it, with "
                        "a note)")
        add_option(parser, "--bm25-url", metavar="URL",
                   help="hybrid: a Pyserini-compatible REST endpoint as the BM25 half, in place of --bm25: the index's "
                        "URL ROOT/v1/NAME (e.g. http://api.castorini.uwaterloo.ca/v1/climbmix-400b, or what hopscotch "
                        "serve prints); needs --index (the dense half, and the documents)")
        add_option(parser, "--bm25-token", metavar="TOKEN",
                   help=f"hybrid: bearer token of --bm25-url (default ${TOKEN_ENV}, as cmass's client reads it; a "
                        "flag's value is visible to other users in ps)")
        add_timeout_option(parser)
        add_option(parser, "--fusion-config", metavar="JSON",
                   help="hybrid: fusion method and parameters from 'hopscotch tune-fusion --out' (replaces "
                        "--fusion/--alpha/--rrf-k; weighted RRF only this way)")
        add_rerank_options(parser)  # also declared by both halves: once per parser

    @classmethod
    def selected_by(cls, flags) -> bool:
        """``--index`` with ``--bm25`` or ``--bm25-url``; ``--bm25-url`` alone too (no other backend takes it), for
        :meth:`from_flags` to say what it lacks."""
        url = flags.get("bm25_url")
        if flags.get("index"):
            return bool(flags.get("bm25") or url)
        return bool(url) and not flags.get("bm25") and not flags.get("url")

    @classmethod
    def used_dests(cls, flags, dests_of=backend_dests) -> frozenset[str]:
        """BM25's flags, the fusion's, and those of the backend the vector half is (dense or multi-vector, by
        ``--index``): ``--instruction`` does nothing on a multi-vector index, ``--mv-candidates`` nothing on a
        single-vector one."""
        halves = dests_of(DenseSearcher) | dests_of(MultiVectorIndexSearcher)
        half = cls._vector_half(flags)
        used = (dests_of(cls) - halves | dests_of(BM25Searcher) | dests_of(half)) - {"corpus"}
        # a remote BM25 half's flags with --bm25-url, and then no local --bm25
        return used - {"bm25"} if flags.get("bm25_url") else used - REMOTE_BM25_DESTS

    @staticmethod
    def _vector_half(flags):
        """The backend the vector half is (by ``--index``; dense without one, which :meth:`from_flags` refuses)."""
        return DenseSearcher.effective_backend(flags) if flags.get("index") else DenseSearcher

    @classmethod
    def unused_flag_message(cls, option, dest, users, flags) -> str:
        if dest == "corpus":
            return "--corpus does nothing for the hybrid searcher: its documents come from --index's docstore: drop it"
        if dest == "bm25" and flags.get("bm25_url"):
            return "give --bm25 DIR (a local BM25 index) or --bm25-url URL (an endpoint), not both"
        if dest in REMOTE_BM25_DESTS and not flags.get("bm25_url"):
            return f"{option} applies to a remote BM25 half only (--bm25-url URL in place of --bm25 DIR): drop it"
        half = cls._vector_half(flags)
        if dest in backend_dests(DenseSearcher) | backend_dests(MultiVectorIndexSearcher):
            return half.unused_flag_message(option, dest, users, flags)
        return super().unused_flag_message(option, dest, users, flags)

    @classmethod
    def from_flags(cls, flags) -> HybridSearcher:
        url = flags.get("bm25_url")
        cls._check_bm25_source(flags, url)
        if flags.get("corpus"):  # a harness's namespace, which the registry's flag check does not see
            raise UsageError(cls.unused_flag_message("--corpus", "corpus", ["bm25"], flags))
        # a bad config fails before a model loads
        fusion = fusion_from_flags(flags)
        return cls.from_options(HybridOptions(
            bm25=flags.get("bm25"), bm25_url=url, bm25_token=flags.get("bm25_token"),
            remote_timeout=flags.get("remote_timeout"), fusion=fusion, depth=flags.get("depth", DEFAULT_DEPTH),
            vector=DenseSearcher.component_options(flags, "hybrid"),
            **{option: flags.get(option) for option in EXPANSION_OPTIONS}))

    @classmethod
    def from_options(cls, options: HybridOptions) -> HybridSearcher:
        """The hybrid of ``options``: its BM25 half (a local index, or the endpoint ``bm25_url``, checked before the
        vector half loads its model), its vector half (dense or multi-vector, by the type of ``options.vector``)."""
        if (options.bm25 is None) == (options.bm25_url is None) or options.vector is None:
            raise UsageError("the hybrid searcher needs a BM25 index folder (--bm25) or endpoint (--bm25-url), not "
                             "both, and a dense index folder (--index)")
        expansion = expansion_of(options)
        remote = None
        if options.bm25_url:  # the endpoint checked (URL, weight, one probe) before the dense model loads
            token = options.bm25_token or os.environ.get(TOKEN_ENV) or None
            remote = remote_index_from_flags(options.bm25_url, token, options.remote_timeout, expansion)
        owner = DenseSearcher if isinstance(options.vector, DenseOptions) else MultiVectorIndexSearcher
        dense = owner.from_options(options.vector)
        sparse = BM25Searcher(remote or options.bm25, docstore=dense.docstore, expansion=expansion)
        return cls.from_settings(sparse, dense, options.fusion or fusion_settings(),
                                 depth=options.depth)

    @classmethod
    def _check_bm25_source(cls, flags, url) -> None:
        """One BM25 half (``--bm25`` or ``--bm25-url``), a dense one, and the remote half's flags only with it (the
        registry checks a command line; a harness's namespace comes here unchecked)."""
        if url and flags.get("bm25"):
            raise UsageError(cls.unused_flag_message("--bm25", "bm25", ["bm25"], flags))
        if not url:
            for dest, option in (("bm25_token", "--bm25-token"), ("remote_timeout", "--remote-timeout")):
                if flags.get(dest) is not None:
                    raise UsageError(cls.unused_flag_message(option, dest, ["hybrid"], flags))
        if url and not flags.get("index"):
            root, name = split_index_url(url)
            raise UsageError(f"--bm25-url is the BM25 half of a hybrid search and needs --index DIR (the dense half); "
                             f"to search the endpoint alone use the remote searcher: --url {root} --name {name}")
        if flags.get("index") and not flags.get("bm25") and not url:  # check before loading a model
            raise UsageError("the hybrid searcher needs a BM25 index folder (--bm25) or endpoint (--bm25-url)")

    def search_batch(self, queries: Sequence[Query | str], k: int = 10) -> list[Ranked]:
        queries = [as_query(q) for q in queries]
        depth = max(k, self.depth)
        sparse = self.bm25.search_batch(queries, depth)
        # the dense half reads the reasoning only when its model does (a plain model's template input is worse
        # than its query alone); BM25 expands with it whenever it is given
        dense = self.dense.search_batch(queries if self.dense.takes_reasoning else
                                        [q.with_reasoning(False) for q in queries], depth)
        settings = self.settings
        # tied documents in docid order, as in a run file: each engine (bm25s, Lucene, FAISS) breaks ties its own
        # way, and RRF reads ranks, so a BM25 endpoint fuses as the local index does (and as tune-fusion's runs)
        return [settings.apply(ranked(dict(s)), ranked(dict(d)), k) for s, d in zip(sparse, dense)]

    @property
    def reasoning_input(self) -> str | None:
        """The dense half's variant and BM25's expansion, those that read the reasoning (``; ``-joined)."""
        parts = [p for p in (self.dense.reasoning_input, getattr(self.bm25, "reasoning_input", None)) if p]
        return "; ".join(parts) or None

    @property
    def takes_reasoning(self) -> bool:
        """Whether either half reads a reasoning (the dense side's model, or BM25's expansion)."""
        return self.dense.takes_reasoning or bool(getattr(self.bm25, "takes_reasoning", False))

    def get_document(self, docid: str) -> dict[str, Any] | None:
        """From the dense index's docstore; from a remote BM25 half's ``/doc/`` route when the index has none."""
        remote = self.remote_bm25
        if remote is not None and not self.dense.has_documents:
            return remote.get_document(docid)
        return self.dense.get_document(docid)

    @property
    def has_documents(self) -> bool:
        return self.dense.has_documents or self.remote_bm25 is not None


#: the flags (destinations) of the fusion, :func:`fusion_settings`'s arguments
FUSION_FLAGS = ("fusion", "fusion_config", "normalization", "alpha", "rrf_k", "rrf_weights", "adapt", "adapt_shift")


def fusion_from_flags(flags) -> FusionSettings:
    """The fusion the flags ask for (:func:`fusion_settings` of ``--fusion``, ``--fusion-config``, ...; ``flags``: a
    :class:`~hopscotch.retriever.searchers.adapter.flags.FlagValues` or any mapping of their destinations)."""
    return fusion_settings(**{name: flags.get(name) for name in FUSION_FLAGS})


def fusion_settings(fusion: str | None = None, fusion_config=None, normalization: str | None = None,
                    alpha: float | None = None, rrf_k: float | None = None, rrf_weights: str | None = None,
                    adapt: float | None = None, adapt_shift: float | None = None) -> FusionSettings:
    """The hybrid's fusion from its flags' values (None: not given): ``fusion_config`` if given (a differing
    ``fusion`` is an error), else ``fusion``/``alpha``/``rrf_k``/``rrf_weights``/... over the learnt defaults
    (:data:`DEFAULT_INTERP`, :data:`DEFAULT_RRF`, :data:`DEFAULT_ADAPTIVE`); all None: the default fusion."""
    given_values = {"alpha": alpha, "rrf_k": rrf_k, "rrf_weights": rrf_weights, "adapt": adapt,
                    "adapt_shift": adapt_shift}
    method, path, norm = fusion, fusion_config, normalization
    if path:
        given = [f for f, v in given_values.items() if v is not None]
        if given:
            raise UsageError(f"--{given[0].replace('_', '-')} contradicts --fusion-config {path} (the file sets "
                             "every parameter)")
        settings = read_fusion_config(path)
        if method and method != settings.method:
            raise UsageError(f"--fusion {method} contradicts --fusion-config {path} ({settings.method})")
        if norm and norm != settings.normalization:
            raise UsageError(f"--normalization {norm} contradicts --fusion-config {path} ({settings.normalization})")
        return settings
    weights = parse_rrf_weights(rrf_weights)
    shift = adapt_shift
    if method is None:  # a method's own flags select it; none at all: the default method
        if adapt is not None or shift is not None:
            method = "adaptive"
        elif (rrf_k is not None or weights is not None) and alpha is None:
            method = "rrf"
        elif alpha is not None or norm is not None:
            method = "interp"
        else:
            method = DEFAULT_FUSION
    if method != "adaptive" and (adapt is not None or shift is not None):
        raise UsageError(f"--adapt / --adapt-shift apply to --fusion adaptive only (this search fuses by {method})")
    if method != "rrf" and (rrf_k is not None or weights is not None):
        raise UsageError(f"--rrf-k / --rrf-weights apply to --fusion rrf only (this search fuses by {method})")
    if method == "rrf" and alpha is not None:
        raise UsageError("--alpha applies to --fusion interp or adaptive only (this search fuses by rrf)")
    if method == "adaptive":
        d = DEFAULT_ADAPTIVE
        base = d if alpha is None else FusionSettings("interp", alpha=alpha)
        return FusionSettings("adaptive", alpha=base.alpha, weight_on_dense=base.weight_on_dense,
                              normalization=norm or d.normalization, adapt=d.adapt if adapt is None else adapt,
                              shift=d.shift if shift is None else shift, agreement_k=d.agreement_k)
    if method == "interp":
        norm = norm or DEFAULT_INTERP.normalization
        if alpha is None:
            return replace(DEFAULT_INTERP, normalization=norm)
        return FusionSettings("interp", alpha=alpha, normalization=norm)
    if norm:
        raise UsageError(f"--normalization {norm} applies to --fusion interp only (this search fuses by rrf)")
    weights = DEFAULT_RRF.weights if weights is None else weights
    return FusionSettings("rrf", rrf_k=DEFAULT_RRF.rrf_k if rrf_k is None else rrf_k,
                          weights=None if weights == (1.0, 1.0) else weights)
