"""The ``multi_vector`` backend: full-corpus late-interaction search over a multi-vector index (PLAID-style;
:mod:`hopscotch.retriever.index.multi_vector.store`).

``hopscotch search --index DIR`` (and every command, service and harness that builds the ``dense`` backend) gives
this searcher when ``DIR`` was built from a multi-vector model (the registry selects it by the index; ``dense``
asked for by name resolves to it, :meth:`~hopscotch.retriever.searchers.dense.DenseSearcher.effective_backend`).
Its flags: ``--index DIR [--model M] [--query-input VARIANT] [--query-mix W] [--nprobe N] [--mv-candidates N]``
and the reranker's ``--rerank-*``; a single-vector flag (``--instruction``, ``--refine``, ``--dim``, ...) is
refused by name. Search: candidates come from the token centroids
(``--nprobe`` centroids per query token, the best ``--mv-candidates`` by centroid interaction), and those are
scored by exact MaxSim on their decompressed token vectors, with the same query encoding, query input variants and
query mix (``--query-mix W``) as the MaxSim reranker: both score with the model layer's
:class:`~hopscotch.retriever.model.multi_vector_scorer.MultiVectorScorer`,
so a full-index search and a rerank of the same candidates give the same scores up to the residual compression.

Example::

    searcher = MultiVectorIndexSearcher("mv_index", nprobe=4, candidates=256)
    searcher.search_batch([Query("expert comparisons", "find studies ...", reasoning_aware=True)], k=10)
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.index.layout import IndexMeta, ShardIds
from hopscotch.retriever.index.multi_vector.store import MultiVectorStore
from hopscotch.retriever.io.queries import Query, as_query
from hopscotch.retriever.model.multi_vector_scorer import MultiVectorScorer
from hopscotch.retriever.model.query_mix import QueryMix
from hopscotch.retriever.searchers.adapter.flags import options_of
from hopscotch.retriever.searchers.arg_types import positive_int
from hopscotch.retriever.searchers.base import BaseSearcher, Ranked, add_option
from hopscotch.retriever.searchers.encoder_flags import add_encoder_options
from hopscotch.retriever.searchers.index_documents import IndexFolderDocuments
from hopscotch.retriever.searchers.registry import register_searcher
from hopscotch.retriever.searchers.rerank import add_rerank_options

DEFAULT_NPROBE = 4
DEFAULT_CANDIDATES = 256


@dataclass(frozen=True)
class MultiVectorSearchOptions:
    """The ``multi_vector`` backend's options (its flags' destinations): the ``index`` folder, the query encoder
    ``model`` (None: the index's), ``nprobe`` centroids per query token and ``mv_candidates`` documents scored
    exactly (None: :data:`DEFAULT_NPROBE`, :data:`DEFAULT_CANDIDATES`), the ``query_input`` variant and the query
    mix's ``late_fusion`` weight (None: the model's)."""

    index: str | os.PathLike | None = None
    model: str | os.PathLike | None = None
    nprobe: int | None = None
    mv_candidates: int | None = None
    query_input: str | None = None
    late_fusion: float | None = None


@register_searcher("multi_vector")
class MultiVectorIndexSearcher(IndexFolderDocuments, BaseSearcher):
    """:param index_dir: a finished multi-vector index folder; :param model: the query encoder (default: the
    index's model); :param nprobe: centroids probed per query token; :param candidates: documents kept by
    centroid interaction and scored exactly; :param query_input, late_fusion: as for the reranker."""

    #: its options dataclass (:meth:`from_options`; ``build_searcher(MultiVectorSearchOptions(...))``)
    options_type = MultiVectorSearchOptions

    @classmethod
    def parse_args(cls, parser) -> None:
        add_encoder_options(parser)
        add_option(parser, "--mv-candidates", type=positive_int, metavar="N",
                   help="a multi-vector index: documents kept by centroid interaction and scored by exact MaxSim "
                        f"(default {DEFAULT_CANDIDATES}; a larger --k widens it, with a note)")
        add_rerank_options(parser)

    @classmethod
    def selected_by(cls, flags) -> bool:
        return (bool(flags.get("index")) and not (flags.get("bm25") or flags.get("bm25_url"))  # those: hybrid
                and is_multi_vector_index(flags.get("index")))

    @classmethod
    def unused_flag_message(cls, option, dest, users, flags) -> str:
        if dest == "dim":
            return "--dim: a multi-vector index's token vectors have no Matryoshka prefixes"
        if dest == "fusion":
            return "--fusion needs both --bm25 and --index"
        if "dense" in users and flags.get("index"):
            return f"{option} does nothing on a multi-vector index ({flags.get('index')}): drop it"
        return super().unused_flag_message(option, dest, users, flags)

    @classmethod
    def from_flags(cls, flags) -> MultiVectorIndexSearcher:
        return cls.from_options(options_of(MultiVectorSearchOptions, flags))

    @classmethod
    def from_options(cls, options: MultiVectorSearchOptions) -> MultiVectorIndexSearcher:
        index = options.index
        if not index:
            raise UsageError("the multi_vector searcher needs a multi-vector index folder (--index)")
        if not is_multi_vector_index(index):
            raise UsageError(f"--index {index} is not a multi-vector index (hopscotch index with a multi-vector "
                             "--model): search it with the dense searcher")
        return cls(index, model=options.model, nprobe=options.nprobe, candidates=options.mv_candidates,
                   query_input=options.query_input, late_fusion=options.late_fusion)

    def __init__(self, index_dir: str | os.PathLike, model: str | os.PathLike | None = None, *,
                 nprobe: int | None = None, candidates: int | None = None, query_input: str | None = None,
                 late_fusion: float | None = None, batch_size: int = 32, device: str | None = None):
        self.meta = IndexMeta.load(index_dir)
        self.index_dir = index_dir
        self.store = MultiVectorStore(index_dir, self.meta)
        self.nprobe = nprobe or DEFAULT_NPROBE
        self.candidates = candidates or DEFAULT_CANDIDATES
        self.scorer = MultiVectorScorer(model or self.meta.model_path, query_input=query_input,
                                        mix=QueryMix.checked(late_fusion), batch_size=batch_size, device=device)
        if self.scorer.model.dim != self.store.dim:
            raise UsageError(f"model {model} encodes {self.scorer.model.dim}-d token vectors but {index_dir} holds "
                             f"{self.store.dim}-d ones (built with {self.meta.model})")
        self._query_input_given = query_input is not None
        self.ids = ShardIds(index_dir, self.meta)

    @property
    def query_input(self):
        return self.scorer.query_input

    @property
    def late_fusion(self) -> float | None:
        return self.scorer.late_fusion

    @property
    def vector_stage(self) -> BaseSearcher:
        return self

    @property
    def takes_reasoning(self) -> bool:
        if self._query_input_given:
            return self.query_input.uses_reasoning
        return self.scorer.query_input.uses_reasoning

    def search_batch(self, queries: Sequence[Query | str], k: int = 10) -> list[Ranked]:
        if not queries:
            return []
        queries = [as_query(q) for q in queries]
        out = []
        pairs = self.scorer.query_vectors([q.text for q in queries], queries, [q.reasoning_aware for q in queries])
        for (q_main, q_plain), w in zip(pairs, self.scorer.query_weights(queries, pairs)):
            rows, _ = self.store.candidates(q_main.numpy(), self.nprobe, max(self.candidates, k),
                                            plain=None if q_plain is None else q_plain.numpy(), weight=w)
            if not len(rows):
                out.append([])
                continue
            scores = self.scorer.scores(q_main, q_plain, [[v] for v in self.store.document_vectors(rows)], w)
            order = np.argsort(-np.asarray(scores), kind="stable")[:k]
            out.append([(self.ids.docid(rows[i]), float(scores[i])) for i in order])
        return out


def is_multi_vector_index(index_dir: str | os.PathLike) -> bool:
    """Whether ``index_dir``'s manifest records a multi-vector token index."""
    try:
        return bool(json.loads((Path(index_dir) / "index.json").read_text()).get("multi_vector"))
    except (OSError, ValueError, AttributeError):
        return False
