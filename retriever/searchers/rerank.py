"""Reranking any first stage (BM25, dense, hybrid) with a second model: the rerank stage, by the kind of the
``--rerank-model`` folder (:func:`reranker_from_options`): MaxSim with a multi-vector (ColBERT-style) model, below, or a
cross-encoder (:class:`~hopscotch.retriever.searchers.cross_encoder_rerank.CrossEncoderReranker`); both follow one
protocol (:mod:`~hopscotch.retriever.searchers.rerank_stage`) and :class:`RerankedSearcher` wraps the first stage with
either.

:class:`MultiVectorReranker` rescores a query's top ``depth`` candidates: each document (its text from the
first stage's ``get_document``) is encoded into token vectors by the multi-vector model
(:mod:`hopscotch.retriever.model.multi_vector`) and scored by MaxSim against the query's token vectors; the
candidates come back sorted by that score (ties in first-stage order). :class:`RerankedSearcher` wraps the
first stage so that ``search_batch`` / ``search`` return the reranked lists.

* Queries are encoded and candidates scored by the model layer's
  :class:`~hopscotch.retriever.model.multi_vector_scorer.MultiVectorScorer` (the ``multi_vector`` backend's
  scorer too): reasoning-aware queries in ``--query-input`` if given, else the model's variant; under the query
  mix (``late_fusion=w``, ``--rerank-query-mix W``, :class:`~hopscotch.retriever.model.query_mix.QueryMix`;
  default the model's recorded weight, else off) normalised MaxSim scores of the reasoning-aware and query-only
  encodings are mixed, else plain MaxSim of the one encoding a query has.
* Long documents: the model sees ``passage_max_len`` tokens; with ``windows=N`` a document also gets up to
  ``N - 1`` more windows of its text (:class:`~hopscotch.retriever.index.windows.TailWindows`, as
  ``hopscotch index --windows``), and scores as its best window (MaxP). Default 1: the first window only.
* Interpolation with the first stage (``first_weight=w``, ``--rerank-first-weight W``): each candidate's final score
  is ``w * minmax(first-stage score) + (1 - w) * minmax(MaxSim)`` over the query's reranked candidates (the
  hybrid's min-max interpolation, :meth:`~hopscotch.retriever.searchers.fusion.FusionSettings.convex`), so what the
  first stage knew is not thrown away; ``w = 0`` is a pure MaxSim reorder, ``w = 1`` the first stage's order.
  Default :data:`DEFAULT_FIRST_WEIGHT`.
* Scores are computed from float16 vectors (what the cache stores), so a search from the cache and a fresh
  one give identical runs. The cache (:mod:`~hopscotch.retriever.searchers.rerank_cache`) is keyed by
  docid and a fingerprint of the model's files and the window settings.

Flags (declared here, :meth:`MultiVectorReranker.parse_args`): ``--rerank-model M`` (a multi-vector or a
cross-encoder folder) ``[--rerank-depth N] [--rerank-cache DIR] [--rerank-query-mix W] [--rerank-windows N] [--rerank-first-weight W]``. Every backend
declares them (:func:`~hopscotch.retriever.searchers.base.add_rerank_options`) and a searcher built from flags
is reranked in one place, the argparse adapter's
:func:`~hopscotch.retriever.searchers.adapter.namespace.searcher_from_namespace` (``SearcherClass(args)``,
``searcher_from_args``, ``build_searcher``; the flags read into :class:`RerankOptions`, applied by :func:`reranked`): ``hopscotch search``, ``serve`` (REST and MCP), ``replay`` and the harnesses all take them.

Example::

    reranker = MultiVectorReranker("out/colbert", depth=100, cache_dir="cache/rerank", late_fusion=0.5)
    searcher = RerankedSearcher(build_searcher("bm25", bm25="idx/bm25", corpus="corpus.jsonl"), reranker)
    searcher.search_batch([Query("who directed Gummo", "The film came out in 1997.", reasoning_aware=True)], k=10)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.index.layout import IndexMeta, load_shard_ids
from hopscotch.retriever.index.multi_vector.build import shard_tokens
from hopscotch.retriever.index.windows import TailWindows, window_spec
from hopscotch.retriever.io.corpus import Document
from hopscotch.retriever.io.fingerprint import digest, model_fingerprint
from hopscotch.retriever.io.queries import Query, as_query
from hopscotch.retriever.model.config import MULTI_VECTOR, checked_count, checked_weight
from hopscotch.retriever.model.loading import resolve_model_path
from hopscotch.retriever.model.multi_vector_scorer import MultiVectorScorer
from hopscotch.retriever.model.query_mix import RERANK_QUERY_MIX_FLAG, QueryMix
from hopscotch.retriever.searchers.arg_types import positive_int, unit_interval
from hopscotch.retriever.searchers.base import BaseSearcher, Ranked, add_option
from hopscotch.retriever.searchers.cross_encoder_rerank import (
    CROSS_ENCODER_DEPTH,
    CROSS_ENCODER_FIRST_WEIGHT,
    CrossEncoderReranker,
)
from hopscotch.retriever.searchers.rerank_cache import TokenCache
from hopscotch.retriever.searchers.rerank_stage import fetched, sorted_by_score, with_first_stage, with_tail

#: queries whose candidates are encoded and scored together (bounds the vectors held in memory)
QUERY_CHUNK = 16
#: the first stage's weight in the reranked score (``--rerank-first-weight``); 0: a pure MaxSim reorder. 0.25 has the
#: best mean nDCG@10 on the question-level sets' tune questions, reranking reasoning-aware BM25's top 100 with the
#: agent multi-vector model (docs/benchmarks.md, "The reranker's first-stage weight"; 0: 0.517, 0.25: 0.529, 0.5:
#: 0.506, BM25 alone 0.474)
DEFAULT_FIRST_WEIGHT = 0.25
#: first-stage candidates the MaxSim reranker reorders per query by default (a larger ``--k`` widens it)
DEFAULT_DEPTH = 100

#: the reranker's flags, ``--rerank-NAME``: ``(NAME, add_option's settings)``, in ``--help``'s order
RERANK_FLAGS = (
    ("model", {"metavar": "M", "help": "rerank the first stage's candidates with this model folder: by MaxSim with a "
                                       "multi-vector (ColBERT-style) model, or by a cross-encoder (model.kind "
                                       "cross_encoder, or any sentence-transformers CrossEncoder folder)"}),
    ("depth", {"type": positive_int, "metavar": "N",
               "help": f"first-stage candidates reranked per query (default {DEFAULT_DEPTH} by MaxSim, a larger --k "
                       f"widens it, with a note; {CROSS_ENCODER_DEPTH} by a cross-encoder, the first stage's next "
                       "candidates following in its order up to --k)"}),
    ("cache", {"metavar": "DIR", "help": "keep documents' token vectors here (float16, per model fingerprint), so "
                                         "repeated searches encode only new candidates"}),
    ("query-mix", {"type": unit_interval, "metavar": "W", "dest": "rerank_late_fusion",
                   "aliases": ("--rerank-late-fusion",),
                   "help": "the query mix: score reasoning-aware queries by W * MaxSim(reasoning-aware) + (1 - W) * MaxSim(query "
                             "only), each over its query length (default: the model's recorded weight, else off)"}),
    ("first-weight", {"type": unit_interval, "metavar": "W",
                      "help": "score each reranked candidate by W * its first-stage score + (1 - W) * its reranker "
                              "score, both min-max normalised over the query's candidates (default "
                              f"{DEFAULT_FIRST_WEIGHT:g} by MaxSim, {CROSS_ENCODER_FIRST_WEIGHT:g} by a cross-encoder; "
                              "0: the reranker alone)"}),
    ("windows", {"type": positive_int, "metavar": "N", "help": "encode long documents as up to N passage windows and "
                                                               "score their best (default 1: the first "
                                                               "passage_max_len tokens)"}),
)


@dataclass(frozen=True)
class RerankOptions:
    """The rerank stage's options (``--rerank-model M [--rerank-depth N] ...``): :param model: the multi-vector or
    cross-encoder model (None: no reranking); the others as :class:`MultiVectorReranker`'s (None: the stage's
    defaults; a cross-encoder takes ``depth``, ``first_weight`` and ``query_input`` only); ``query_input``: the
    variant of reasoning-aware queries (``--query-input``, shared with the vector backends)."""

    model: str | os.PathLike | None = None
    depth: int | None = None
    cache_dir: str | os.PathLike | None = None
    late_fusion: float | None = None
    windows: int | None = None
    first_weight: float | None = None
    query_input: str | None = None


class MultiVectorReranker:
    """The MaxSim rerank stage (the protocol of :mod:`~hopscotch.retriever.searchers.rerank_stage`).

    :param model: a :class:`~hopscotch.retriever.model.multi_vector.MultiVectorModel`, or a folder / Hub id of one
    :param depth: first-stage candidates reranked per query (at least the ``k`` asked for)
    :param cache_dir: the token cache's folder (None: no cache; each search encodes its candidates)
    :param late_fusion: ``w`` of the reasoning-aware MaxSim (None: the model's recorded weight, else off)
    :param windows: passage windows per document (1: its first ``passage_max_len`` tokens)
    :param window_stride: tokens between windows (None: 80% of ``passage_max_len``)
    :param query_input: the variant of reasoning-aware queries (None: the model's)
    :param first_weight: the first stage's weight ``w`` in ``w * minmax(first) + (1 - w) * minmax(MaxSim)``
        (None: :data:`DEFAULT_FIRST_WEIGHT`; 0: MaxSim alone)
    """

    kind = MULTI_VECTOR
    #: a ``k`` above :attr:`depth` reranks the top ``k`` (a cross-encoder's stays at its depth)
    widens_with_k = True

    def __init__(self, model, depth: int = 100, cache_dir: str | os.PathLike | None = None,
                 late_fusion: float | None = None, *, windows: int = 1, window_stride: int | None = None,
                 query_input: str | None = None, batch_size: int = 32, device: str | None = None,
                 first_weight: float | None = None):
        if cache_dir is not None and Path(cache_dir).exists() and not Path(cache_dir).is_dir():
            raise UsageError(f"--rerank-cache {cache_dir}: a file, not a folder; give a folder for the token cache")
        self.scorer = MultiVectorScorer(model, query_input=query_input, batch_size=batch_size, device=device,
                                        mix=QueryMix.checked(late_fusion, flag=RERANK_QUERY_MIX_FLAG))
        self.model = self.scorer.model
        self.depth = checked_count(depth, "--rerank-depth")
        c = self.model.config
        self.first_weight = checked_weight(DEFAULT_FIRST_WEIGHT if first_weight is None else first_weight,
                                           "--rerank-first-weight")
        self.spec = window_spec(checked_count(windows, "--rerank-windows"), window_stride, c.passage_max_len)
        self.batch_size = batch_size
        self.fingerprint = _digest({"model": self.model.fingerprint, "windows": self.spec.to_json()})
        self.cache = TokenCache(cache_dir, self.fingerprint, about={
            "model": self.model.path, "model_fingerprint": self.model.fingerprint, "dim": self.model.dim,
            "windows": self.spec.to_json(), "dtype": "float16"})
        self._tail = None

    @staticmethod
    def describe() -> str:
        return "by MaxSim"

    @property
    def late_fusion(self) -> float | None:
        """The query mix's weight (``--rerank-query-mix``; None: plain MaxSim)."""
        return self.scorer.late_fusion

    @property
    def query_input(self):
        """The variant of reasoning-aware queries."""
        return self.scorer.query_input

    # -- documents -------------------------------------------------------------------------------
    def _windows_of(self, doc: dict) -> list:
        """A document's texts to encode: its first window (``title + " " + text``), then its tail windows."""
        first = [(doc.get("title"), doc.get("text") or "")]
        if not self.spec.enabled:
            return first
        if self._tail is None:
            self._tail = TailWindows(self.model.tokenizer, self.spec, self.model.st.prompts.get("document") or "")
        tail = self._tail(Document(str(doc.get("docid", "")), doc.get("title"), doc.get("text") or ""))
        return first + [(w.title, w.text) for w in tail]

    def document_vectors(self, docids: Sequence[str], fetch: Callable[[str], dict | None]):
        """``{docid: [float32 tensor per window]}`` (float16-rounded): cached ones read, the others fetched
        (``fetch(docid) -> {"text"[, "title"]}``), encoded and cached."""
        import torch

        found = self.cache.get(docids)
        missing = [d for d in dict.fromkeys(docids) if d not in found]
        if missing:
            texts, owner = [], []
            for docid, doc in fetched(missing, fetch).items():
                for window in self._windows_of({"docid": docid, **doc}):
                    texts.append(window)
                    owner.append(docid)
            encoded = self.model.encode_documents(texts, batch_size=self.batch_size)
            new: dict[str, list] = {d: [] for d in missing}
            for docid, emb in zip(owner, encoded):
                new[docid].append(emb.numpy().astype(np.float16))
            self.cache.put(new)
            found.update(new)
        return {d: [torch.from_numpy(np.asarray(w, dtype=np.float32)) for w in ws] for d, ws in found.items()}

    def seed_cache(self, index_dir: str | os.PathLike) -> int:
        """Fill the token cache from a multi-vector index built with this very model (its shards' float16 token
        vectors are what :meth:`document_vectors` would encode and cache: the same text, ``title + " " + text``),
        so that reranking a corpus that was indexed encodes nothing. Returns the documents added; an index of
        another model, or a reranker with windows, is a UsageError."""
        meta = IndexMeta.load(index_dir)
        if not meta.multi_vector or self.spec.enabled or self.model.path is None or \
                _digest(model_fingerprint(self.model.path)) != meta.model_sha256:
            raise UsageError(f"{index_dir}: the cache can be seeded only from a multi-vector index of the same model "
                             "(and without --rerank-windows)")
        added = 0
        for shard in range(meta.num_shards):
            ids = [raw.decode("utf-8") for raw in load_shard_ids(index_dir, shard)]
            tokens, doclens = shard_tokens(index_dir, shard)
            have = self.cache.get(ids)
            new = [i for i, d in enumerate(ids) if d not in have]
            offsets = np.concatenate([[0], np.cumsum(doclens)])
            self.cache.put({ids[i]: [np.asarray(tokens[offsets[i]:offsets[i + 1]])] for i in new})
            added += len(new)
        return added

    # -- scoring ---------------------------------------------------------------------------------
    def rerank_batch(self, queries: Sequence[Query], candidates: Sequence[Ranked], fetch: Callable[[str], dict | None],
                     depth: int | None = None) -> list[Ranked]:
        """Each query's top ``depth`` (default :attr:`depth`) candidates sorted by MaxSim (ties keep
        first-stage order), or with :attr:`first_weight` above 0 by its interpolation with the first stage's
        scores; ``fetch(docid)`` gives a candidate's ``{"text"[, "title"]}``."""
        n, depth = len(queries), depth or self.depth
        out: list[Ranked] = []
        for start in range(0, n, QUERY_CHUNK):
            rows = range(start, min(n, start + QUERY_CHUNK))
            lists = [[d for d, _ in candidates[i][:depth]] for i in rows]
            vectors = self.document_vectors([d for ids in lists for d in ids], fetch)
            chunk = [queries[i] for i in rows]
            encodings = self.scorer.query_vectors([q.text for q in chunk], chunk, [q.reasoning_aware for q in chunk])
            weights = self.scorer.query_weights(chunk, encodings)
            for i, ids, (q_main, q_plain), w in zip(rows, lists, encodings, weights):
                scores = self.scorer.scores(q_main, q_plain, [vectors[d] for d in ids], w)
                maxsim = sorted_by_score(ids, scores)  # ties in first-stage order
                out.append(with_first_stage(candidates[i][:depth], maxsim, self.first_weight))
        return out

    # -- flags -----------------------------------------------------------------------------------
    @classmethod
    def parse_args(cls, parser) -> None:
        for name, spec in RERANK_FLAGS:
            add_option(parser, f"--rerank-{name}", **spec)

    @classmethod
    def from_options(cls, options: RerankOptions) -> MultiVectorReranker:
        """The reranker ``options`` describe (its model given)."""
        return cls(options.model, depth=options.depth or DEFAULT_DEPTH, cache_dir=options.cache_dir,
                   late_fusion=options.late_fusion, windows=options.windows or 1, query_input=options.query_input,
                   first_weight=options.first_weight)


class RerankedSearcher(BaseSearcher):
    """``first`` (any searcher) with its top candidates reranked by ``reranker`` (a rerank stage: a
    :class:`MultiVectorReranker` or a :class:`~hopscotch.retriever.searchers.cross_encoder_rerank.CrossEncoderReranker`):
    the top ``max(k, depth)`` when the stage ``widens_with_k`` (MaxSim), else its top ``depth``, the first stage's next
    candidates following in first-stage order below them up to ``k``. Documents come from ``first``."""

    def __init__(self, first: BaseSearcher, reranker):
        # not ``self.reranker``: HarnessSearch.search applies a BrowseComp-Plus reranker of that name itself
        self.first, self.rerank_stage = first, reranker
        self.name = f"{first.name}+rerank"
        self.search_type = first.search_type
        self.local = first.local
        self.snippet_chars = first.snippet_chars

    def search_batch(self, queries: Sequence[Query | str], k: int = 10) -> list[Ranked]:
        if not queries:
            return []
        queries = [as_query(q) for q in queries]
        stage = self.rerank_stage
        depth = max(k, stage.depth) if stage.widens_with_k else stage.depth
        candidates = self.first.search_batch(queries, max(k, depth))
        reranked = stage.rerank_batch(queries, candidates, self.first.get_document, depth=depth)
        return [with_tail(r, c[depth:], k) for r, c in zip(reranked, candidates)]

    def get_document(self, docid: str) -> dict[str, Any] | None:
        return self.first.get_document(docid)

    @property
    def has_documents(self) -> bool:
        return self.first.has_documents

    @property
    def first_stage(self) -> BaseSearcher:
        return self.first

    @property
    def vector_stage(self) -> BaseSearcher | None:
        return self.first.vector_stage

    @property
    def query_input(self):
        """The reranker's query input variant (what a reasoning-aware query's final order reads)."""
        return self.rerank_stage.query_input

    @property
    def reasoning_input(self) -> str | None:
        mv = self.rerank_stage.query_input
        parts = [p for p in (self.first.reasoning_input, f"rerank {mv}" if mv.uses_reasoning else None) if p]
        return "; ".join(parts) or None

    @property
    def takes_reasoning(self) -> bool:
        return self.rerank_stage.query_input.uses_reasoning or self.first.takes_reasoning

    def close(self) -> None:
        self.first.close()


def reranked(searcher: BaseSearcher, options: RerankOptions | None) -> BaseSearcher:
    """``searcher`` reranked as ``options`` ask (:class:`RerankedSearcher`), else unchanged (None, or no model);
    a first stage without documents (:attr:`~BaseSearcher.has_documents`) is a UsageError."""
    if options is None or not options.model:
        return searcher
    if not searcher.has_documents:
        raise UsageError(f"--rerank-model needs each candidate's text, and the {searcher.name} searcher has no "
                         "documents: give a BM25 index --corpus FILE or --index DIR (a dense index with a docstore)")
    return RerankedSearcher(searcher, reranker_from_options(options))


def reranker_from_options(options: RerankOptions):
    """The rerank stage of ``options.model``'s kind: a :class:`~hopscotch.retriever.searchers.cross_encoder_rerank.
    CrossEncoderReranker` for a cross-encoder folder, else a :class:`MultiVectorReranker` (which refuses a folder of
    any other kind, saying so)."""
    from hopscotch.retriever.model.cross_encoder import CrossEncoderModel, is_cross_encoder_folder

    model = options.model
    if isinstance(model, CrossEncoderModel) or (isinstance(model, (str, os.PathLike))
                                                and is_cross_encoder_folder(resolve_model_path(model))):
        return CrossEncoderReranker.from_options(options)
    return MultiVectorReranker.from_options(options)


def _digest(obj) -> str:
    return digest(obj)


def add_rerank_options(parser) -> None:
    """``--rerank-model``, ``--rerank-depth``, ...: the reranker's flags, which every backend declares (once per
    parser); the argparse adapter reads them into :class:`RerankOptions`
    (:func:`~hopscotch.retriever.searchers.adapter.namespace.searcher_from_namespace`)."""
    MultiVectorReranker.parse_args(parser)
