"""Dense searcher over a local sharded index folder (``hopscotch index``): encoder + FAISS + docstore."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.index.faiss_index import ShardedFaissIndex
from hopscotch.retriever.index.layout import IndexMeta, ShardIds
from hopscotch.retriever.index.windows import best_per_document, search_windows
from hopscotch.retriever.io.queries import Query, as_query
from hopscotch.retriever.model.config import model_settings
from hopscotch.retriever.model.dense_encoder import DenseEncoder
from hopscotch.retriever.model.matryoshka import warn_untrained
from hopscotch.retriever.model.query_input import ALLOWED, QueryInput, searcher_query_input  # noqa: F401
from hopscotch.retriever.model.query_mix import QueryMix
from hopscotch.retriever.model.query_template import format_queries
from hopscotch.retriever.searchers.adapter.flags import options_of
from hopscotch.retriever.searchers.arg_types import positive_int
from hopscotch.retriever.searchers.base import BaseSearcher, Ranked, add_option
from hopscotch.retriever.searchers.encoder_flags import add_encoder_options
from hopscotch.retriever.searchers.index_documents import IndexFolderDocuments
from hopscotch.retriever.searchers.multi_vector_index import (
    MultiVectorIndexSearcher,
    MultiVectorSearchOptions,
    is_multi_vector_index,
)
from hopscotch.retriever.searchers.registry import backend_dests, backend_options, register_searcher
from hopscotch.retriever.searchers.rerank import add_rerank_options


@dataclass
class DenseOptions:
    """The ``dense`` backend's options (its flags' destinations): what :meth:`DenseSearcher.from_options` builds,
    ``index`` (a finished index folder), ``model`` (None: the index's) and ``encoder`` (an already-loaded one), and
    the query-time settings below (the constructor takes the first three as its own arguments).

    :param faiss_name: which built FAISS index to use (default: the folder's default, else exact Flat)
    :param nprobe, ef_search, refine: query-time FAISS parameters (see :mod:`hopscotch.retriever.index.faiss_index`)
    :param instruction: prefix of every encoded query (None: the trained model's own instruction, else "")
    :param query_input: the query input variant of reasoning-aware queries (None: the trained model's own
        variant; ``reasoning`` for a model without one or whose variant is ``query``); ``query`` makes every
        query plain
    :param batch_size, device: for the query encoder it loads; ``use_gpu``: for FAISS (None: when available)
    :param late_fusion: ``w`` in 0..1 to score reasoning-aware queries by ``w * s_reasoning + (1 - w) * s_query``
        (their reasoning-aware and their plain query embedding against the one index; None: the trained
        model's recorded default when ``query_input`` is not given either, else off)
    :param late_fusion_max_words: reasoning contexts longer than this many words are searched with query-mix
        weight ``late_fusion_long`` (None: the model's recorded default under the same rule, else no limit)
    :param late_fusion_long: the weight of contexts over ``late_fusion_max_words`` (None: the model's recorded one
        under the same rule, else 0: the query alone)
    :param first_windows_only: ignore an index's extra passage windows (``windows/``) and score each document
        by its first window only (the usual truncated row)
    :param dim: search with the first ``dim`` dimensions of each query vector, renormalised (Matryoshka); the
        index must hold documents truncated alike (``hopscotch index --dim``): None searches an index so built
        at its recorded ``truncate_dim``, and another ``dim`` than the index's is refused
    """

    index: str | os.PathLike | None = None
    model: str | os.PathLike | None = None
    encoder: Any = None
    faiss_name: str | None = None
    nprobe: int | None = None
    ef_search: int | None = None
    refine: int | None = None  # None: the index's recorded default (--spec auto), else 1
    instruction: str | None = None
    query_input: str | None = None
    batch_size: int = 64
    device: str | None = None
    use_gpu: bool | None = None
    late_fusion: float | None = None
    late_fusion_max_words: int | None = None
    late_fusion_long: float | None = None
    first_windows_only: bool = False
    dim: int | None = None


@register_searcher("dense")
class DenseSearcher(IndexFolderDocuments, BaseSearcher):
    """:param index_dir: a finished index folder
    :param model: encoder for queries; default the model recorded in the index
    :param options: a :class:`DenseOptions`, or its fields as keywords (``DenseSearcher(d, nprobe=64)``)
    :param encoder: an already-loaded :class:`~hopscotch.retriever.model.dense_encoder.DenseEncoder` (shares a model in-process)

    Reasoning-aware queries follow :func:`~hopscotch.retriever.model.query_template.format_queries`: the
    reasoning slot holds what the query input variant (:attr:`query_input`) picks from each query's
    context (a :class:`~hopscotch.retriever.io.queries.Query`'s reasoning and other context fields);
    when it does not fit the query length (a trained model's ``query_max_len``, else the encoder's max
    length) its *earliest* words are dropped, so the query itself is never cut. A trained model with
    separate towers encodes queries with its ``query_encoder/``.

    The query mix (``--query-mix W``, :attr:`late_fusion`): a reasoning-aware query is encoded twice, in
    its variant (``q_r``) and plain (``q_q``), and scored ``W * <q_r, d> + (1 - W) * <q_q, d>``; for
    inner-product indexes that is one FAISS search with the vector ``W * q_r + (1 - W) * q_q``. ``W = 1``
    is the reasoning-aware search, ``W = 0`` the plain one; plain queries are unaffected.

    Flags: ``--index DIR [--model M] [--instruction TEXT] [--query-input VARIANT] [--query-mix W]
    [--nprobe N] [--ef-search N] [--refine R] [--faiss NAME] [--dim D]`` and the reranker's ``--rerank-*``;
    :func:`~hopscotch.retriever.searchers.registry.build_searcher` also takes ``encoder=``.
    """

    #: its options dataclass (:meth:`from_options`; ``build_searcher(DenseOptions(...))``)
    options_type = DenseOptions

    extra_options = ("encoder",)

    def __init__(self, index_dir: str | os.PathLike, model: str | os.PathLike | None = None,
                 options: DenseOptions | None = None, encoder=None, **settings):
        if options is not None and settings:
            raise TypeError("give DenseOptions or its fields as keywords, not both")
        opts = options or DenseOptions(**settings)
        self.meta = IndexMeta.load(index_dir)
        self.index_dir = index_dir
        model = model or self.meta.model_path
        self.settings = model_settings(model)
        dim = _query_dim(opts.dim, self.meta, index_dir)  # None: whole vectors
        if encoder is None:
            tower = self.settings.query_tower or model
            # this encoder encodes queries only: their budget is the model's query_max_len, not the
            # passage length the index was built with (a long reasoning query would lose its query)
            encoder = DenseEncoder(tower, max_length=self.settings.query_max_len or self.meta.max_length,
                                   batch_size=opts.batch_size, device=opts.device, truncate_dim=dim)
        elif getattr(encoder, "truncate_dim", None) != dim:
            encoder = encoder.truncated(dim)  # the same model, its vectors cut as the index's are (or whole)
        self.encoder = encoder
        warn_untrained(dim, self.settings.matryoshka_dims, str(model))
        self.query_max_len = self.settings.query_max_len or self.encoder.model.max_seq_length
        if self.encoder.dim != self.meta.dim:
            raise UsageError(f"model {model} encodes {self.encoder.dim}-d vectors but {index_dir} holds "
                             f"{self.meta.dim}-d ones (built with {self.meta.model})")
        self.index = ShardedFaissIndex.load(index_dir, name=opts.faiss_name, use_gpu=opts.use_gpu, meta=self.meta)
        self.index.check_search_params(opts.nprobe, opts.ef_search, opts.refine)  # none given that would do nothing
        self.ids = ShardIds(index_dir, self.meta)
        self.windows = None if opts.first_windows_only else _window_index(index_dir, self.meta, opts)
        self.nprobe, self.ef_search, self.refine = opts.nprobe, opts.ef_search, opts.refine
        self.instruction = self.settings.instruction if opts.instruction is None else opts.instruction
        self.query_input = searcher_query_input(opts.query_input, self.settings.query_input)
        self._query_input_given = opts.query_input is not None
        given = QueryMix.checked(opts.late_fusion, opts.late_fusion_max_words, opts.late_fusion_long)
        recorded = QueryMix(self.settings.late_fusion, self.settings.late_fusion_max_words,
                            self.settings.late_fusion_long)
        self.query_mix = given.or_recorded(recorded, variant_given=opts.query_input is not None)

    @property
    def late_fusion(self) -> float | None:
        """The query mix's weight (:attr:`query_mix`; ``--query-mix``)."""
        return self.query_mix.weight

    @property
    def late_fusion_max_words(self) -> int | None:
        return self.query_mix.max_words

    @property
    def late_fusion_long(self) -> float | None:
        return self.query_mix.long_weight

    @classmethod
    def parse_args(cls, parser) -> None:
        add_encoder_options(parser)
        add_option(parser, "--instruction", allow_empty=True,
                   help="prefix of every encoded query (default: a trained model's own instruction, else none; '': "
                        "none)")
        add_option(parser, "--query-mix-max-words", type=int, metavar="N", dest="late_fusion_max_words",
                   aliases=("--late-fusion-max-words",),
                   help="search reasoning contexts longer than N words with query-mix weight --query-mix-long "
                        "(default 0: the query alone; default N: the trained model's recorded limit under the same "
                        "rule as --query-mix, else none)")
        add_option(parser, "--query-mix-long", type=float, metavar="W", dest="late_fusion_long",
                   aliases=("--late-fusion-long",),
                   help="the query-mix weight of reasoning contexts over --query-mix-max-words words (0..1; "
                        "default: the trained model's recorded one under the same rule as --query-mix, else 0)")
        add_option(parser, "--ef-search", type=positive_int, help="HNSW search breadth")
        add_option(parser, "--refine", type=positive_int,
                   help="re-score k*R approximate hits exactly from the shards (default: what the index "
                        "recorded at build, e.g. by --spec auto, else 1)")
        add_option(parser, "--first-windows-only", action="store_true",
                   help="score each document by its first window only, ignoring the extra passage windows "
                        "an index built with --windows holds")
        add_option(parser, "--dim", type=positive_int, metavar="D",
                   help="search with the first D dimensions of each query vector, renormalised (Matryoshka); the "
                        "index must be built with 'hopscotch index --dim D' (default: the index's recorded dim; "
                        "another D is refused)")
        add_option(parser, "--faiss", "--faiss-name", dest="faiss_name",
                   help="which FAISS index of --index (default: the last built)")
        add_rerank_options(parser)

    @classmethod
    def selected_by(cls, flags) -> bool:
        return (bool(flags.get("index")) and not (flags.get("bm25") or flags.get("bm25_url"))  # those: hybrid
                and not is_multi_vector_index(flags.get("index")))

    @classmethod
    def effective_backend(cls, flags) -> type[BaseSearcher]:
        """The multi-vector searcher when ``--index`` is a multi-vector index (``--searcher-type dense`` and
        BrowseComp-Plus's ``dense`` keep working on one), else this class."""
        return MultiVectorIndexSearcher if is_multi_vector_index(flags.get("index")) else cls

    @classmethod
    def unused_flag_message(cls, option, dest, users, flags) -> str:
        if dest == "fusion":
            return "--fusion needs both --bm25 and --index"
        if "multi_vector" in users and flags.get("index"):
            return (f"{option} applies to a multi-vector index only; {flags.get('index')} is a single-vector "
                    "index: drop it")
        return super().unused_flag_message(option, dest, users, flags)

    @classmethod
    def from_flags(cls, flags) -> BaseSearcher:
        if flags.get("fusion"):
            raise UsageError("--fusion needs both --bm25 and --index")
        return cls.component_from_flags(flags, "dense")

    @classmethod
    def component_from_flags(cls, flags, kind: str) -> BaseSearcher:
        """The vector searcher of a ``kind`` (``dense`` or ``hybrid``) searcher's flags (:meth:`component_options`)."""
        options = cls.component_options(flags, kind)
        owner = cls if isinstance(options, DenseOptions) else MultiVectorIndexSearcher
        return owner.from_options(options)

    @classmethod
    def component_options(cls, flags, kind: str) -> DenseOptions | MultiVectorSearchOptions:
        """The options of a ``kind`` (``dense`` or ``hybrid``) searcher's vector half from its flags: this class's
        over a single-vector index, :class:`MultiVectorIndexSearcher`'s over a multi-vector one
        (:meth:`effective_backend`). A flag of the other kind set in ``flags`` (a namespace built in Python, which
        the registry's check of the command line does not see) is refused here the same way."""
        if not flags.get("index"):
            raise UsageError(f"the {kind} searcher needs a dense index folder (--index)")
        actual = cls.effective_backend(flags)
        other = MultiVectorIndexSearcher if actual is cls else cls
        for dest in sorted(backend_dests(other) - backend_dests(actual)):
            if flags.get(dest) not in (None, False):
                option = backend_options(other)[dest]
                raise UsageError(actual.unused_flag_message(option, dest, [other.name], flags))
        if actual is not cls:
            return options_of(MultiVectorSearchOptions, flags)
        return options_of(DenseOptions, flags, backend_dests(cls) | set(cls.extra_options))

    @classmethod
    def from_options(cls, options: DenseOptions) -> DenseSearcher:
        """The searcher of ``options.index`` (with ``options.model`` and ``options.encoder``) and these settings."""
        if not options.index:
            raise UsageError("the dense searcher needs a dense index folder (--index)")
        if is_multi_vector_index(options.index):
            raise UsageError(f"{options.index} is a multi-vector index: search it with MultiVectorSearchOptions (the "
                             "multi_vector searcher)")
        return cls(options.index, model=options.model, options=options, encoder=options.encoder)

    @property
    def reasoning_input(self) -> str | None:
        return str(self.query_input) if self.takes_reasoning else None

    @property
    def vector_stage(self) -> BaseSearcher:
        return self

    @property
    def takes_reasoning(self) -> bool:
        """A trained reasoning-aware model (its saved variant reads the reasoning), or ``--query-input`` given
        with a variant that reads it; a plain model (``minilm``, an untrained folder) is not."""
        if self._query_input_given:
            return self.query_input.uses_reasoning
        return bool(self.settings.trained and self.settings.reasoning_aware)

    def query_texts(self, queries: Sequence[Query | str]) -> list[str]:
        """The encoder text of each query: ``{instruction}{query}``, or for a reasoning-aware one the template with
        what the query input variant picks from its context (:func:`~hopscotch.retriever.model.query_template.
        format_queries`)."""
        queries = [as_query(q) for q in queries]
        return format_queries(self.encoder.model.tokenizer, self.query_max_len, [q.text for q in queries], queries,
                              instruction=self.instruction, reasoning_aware=[q.reasoning_aware for q in queries],
                              query_input=self.query_input)

    def query_embeddings(self, queries: Sequence[Query | str], show_progress: bool = False):
        """The search vectors: each query's encoding, or under the query mix (:attr:`query_mix`,
        :class:`~hopscotch.retriever.model.query_mix.QueryMix`) the weighted sum ``w * q_reasoning + (1 - w) *
        q_query`` of the reasoning-aware ones, ``w`` per query (w = 1, 0: exactly one of them)."""
        queries = [as_query(q) for q in queries]
        texts = self.query_texts(queries)
        if self.query_mix.is_identity:
            return self.encoder.encode_texts(texts, show_progress=show_progress, desc="encode queries")
        plain = self.query_texts([q.with_reasoning(False) for q in queries])
        weights = np.array([self.query_mix.weight_for(q, text != simple)
                            for text, simple, q in zip(texts, plain, queries)], dtype=np.float32)
        out = np.zeros((len(texts), self.encoder.dim), dtype=np.float32)
        aware = np.flatnonzero(weights > 0)
        if aware.size:
            emb = self.encoder.encode_texts([texts[i] for i in aware], show_progress=show_progress,
                                            desc="encode queries")
            out[aware] = weights[aware, None] * emb
        simple = np.flatnonzero(weights < 1)
        if simple.size:
            emb = self.encoder.encode_texts([plain[i] for i in simple], desc="encode plain queries")
            out[simple] += (1.0 - weights[simple, None]) * emb
        return out

    def search_batch(self, queries: Sequence[Query | str], k: int = 10) -> list[Ranked]:
        if not queries:
            return []
        return self.search_embeddings(self.query_embeddings(queries), k)

    def search_embeddings(self, emb, k: int) -> list[Ranked]:
        """The top ``k`` documents of each search vector (rows of ``emb``); with windows, each document scored
        by its best row (MaxP)."""
        scores, rows = self.index.search(emb, k, nprobe=self.nprobe, ef_search=self.ef_search, refine=self.refine)
        out = []
        for srow, rrow in zip(scores, rows):
            out.append([(self.ids.docid(r), float(s)) for s, r in zip(srow, rrow) if r >= 0])
        if self.windows is None:
            return out

        index, ids = self.windows
        hits = search_windows(lambda q, depth: index.search(q, depth, nprobe=self.nprobe, ef_search=self.ef_search,
                                                            refine=self.refine),
                              ids.docid, ids.meta.num_docs, emb, k)
        return [best_per_document(main, extra, k) for main, extra in zip(out, hits)]


def _window_index(index_dir, meta, opts: DenseOptions):
    """``(FAISS index, ShardIds)`` of the index's passage windows (``windows/``), or None when it has none."""
    if not meta.windows.get("rows"):
        return None
    folder = Path(index_dir) / meta.windows["dir"]
    wmeta = IndexMeta.load(folder)
    name = opts.faiss_name if opts.faiss_name in (wmeta.faiss.get("built") or {}) else None
    return ShardedFaissIndex.load(folder, name=name, use_gpu=opts.use_gpu, meta=wmeta), ShardIds(folder, wmeta)


def _query_dim(given: int | None, meta, index_dir) -> int | None:
    """The query truncation a search of ``index_dir`` needs: the index's recorded ``truncate_dim`` (None: whole
    vectors); a ``--dim`` other than the index's is refused (truncated queries against whole documents, or
    against documents cut at another width, score nothing meaningful)."""
    recorded = meta.truncate_dim
    if given is None or given == (recorded or meta.dim):
        return recorded
    if recorded:
        raise UsageError(f"--dim {given}: {index_dir} holds the first {recorded} dimensions of {meta.model}'s "
                         f"vectors (built with 'hopscotch index --dim {recorded}'): search it with --dim {recorded} "
                         f"or without --dim, or build another index with --dim {given}")
    raise UsageError(f"--dim {given}: {index_dir} holds whole {meta.dim}-d vectors, and truncated queries need "
                     f"documents truncated alike: build an index with 'hopscotch index --dim {given}'")
