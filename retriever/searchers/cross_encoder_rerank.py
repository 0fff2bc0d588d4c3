"""Reranking any first stage (BM25, dense, hybrid, remote) with a cross-encoder: the rerank stage of a
``model.kind: cross_encoder`` folder (:mod:`hopscotch.retriever.model.cross_encoder`, or any sentence-transformers
``CrossEncoder`` folder).

:class:`CrossEncoderReranker` pairs each query with each of its top ``depth`` candidates (the text from the first
stage's ``get_document``) and scores every pair with the cross-encoder; the candidates come back sorted by that
logit (ties in first-stage order), or, with ``first_weight`` above 0, by its min-max interpolation with the first
stage's scores (:func:`~hopscotch.retriever.searchers.rerank_stage.with_first_stage`, as the MaxSim reranker's).

* The query side is the model's own (:meth:`~hopscotch.retriever.model.cross_encoder.CrossEncoderModel.format_queries`):
  a reasoning-aware query is written in AgentIR's template in ``--query-input`` if given, else the model's variant
  (what it trained on), the reasoning cut from the left to the model's ``query_max_len``; a plain query is the query
  alone. The document is ``title + " " + text``, cut from the right to the rest of the pair.
* Batching: a chunk of queries' pairs (all their candidates together) is scored in batches of pairs sorted by token
  length, each padded to its own longest pair
  (:meth:`~hopscotch.retriever.model.cross_encoder.CrossEncoderModel.score`), so short pairs never pay for long ones.
* Defaults: :data:`CROSS_ENCODER_DEPTH` candidates (a cross-encoder reads each pair whole: on 2 CPU cores the
  bundled MiniLM scores about 7 pairs a second at 256 tokens and 3.5 at 512, docs/benchmarks.md) and
  :data:`CROSS_ENCODER_FIRST_WEIGHT`.

Example (not run)::

    reranker = CrossEncoderReranker("runs/agent_reranker/final", depth=20)
    searcher = RerankedSearcher(build_searcher("bm25", bm25="idx/bm25", corpus="corpus.jsonl"), reranker)
    searcher.search_batch([Query("who directed Gummo", "The film came out in 1997.", reasoning_aware=True)], k=10)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.queries import Query
from hopscotch.retriever.model.config import CROSS_ENCODER, checked_count, checked_weight
from hopscotch.retriever.model.query_input import searcher_query_input
from hopscotch.retriever.searchers.base import Ranked
from hopscotch.retriever.searchers.rerank_stage import fetched, sorted_by_score, with_first_stage

#: first-stage candidates a cross-encoder reranks per query by default (``--rerank-depth``): 20 pairs take about 3 s
#: at 256 tokens on 2 CPU cores (docs/benchmarks.md, "Cross-encoder speed"), within the 0.3 queries a second the
#: documented pipeline must keep
CROSS_ENCODER_DEPTH = 20
#: the first stage's weight in a cross-encoder's reranked score (``--rerank-first-weight``), the MaxSim reranker's
#: default until a selection on the dev sets measures the cross-encoder's own
CROSS_ENCODER_FIRST_WEIGHT = 0.25
#: queries whose pairs are formatted and scored together (bounds the document texts held in memory)
QUERY_CHUNK = 16


class CrossEncoderReranker:
    """:param model: a :class:`~hopscotch.retriever.model.cross_encoder.CrossEncoderModel`, or a folder of one
    :param depth: first-stage candidates reranked per query (None: :data:`CROSS_ENCODER_DEPTH`)
    :param query_input: the variant of reasoning-aware queries (None: the model's)
    :param first_weight: the first stage's weight ``w`` in ``w * minmax(first) + (1 - w) * minmax(logit)`` (None:
        :data:`CROSS_ENCODER_FIRST_WEIGHT`; 0: the cross-encoder alone)
    :param batch_size: pairs per forward pass
    """

    kind = CROSS_ENCODER
    #: a cross-encoder has no query mix (the MaxSim reranker's ``--rerank-query-mix``)
    late_fusion = None
    #: a ``k`` above :attr:`depth` does not widen it: the first stage's next candidates follow the reranked ones
    widens_with_k = False

    def __init__(self, model, depth: int | None = None, *, query_input: str | None = None,
                 first_weight: float | None = None, batch_size: int = 32, device: str | None = None):
        from hopscotch.retriever.model.cross_encoder import CrossEncoderModel, load_cross_encoder_model

        self.model = model if isinstance(model, CrossEncoderModel) else load_cross_encoder_model(model, device=device)
        self.query_input = searcher_query_input(query_input, self.model.config.query_input)
        self.depth = checked_count(CROSS_ENCODER_DEPTH if depth is None else depth, "--rerank-depth")
        self.first_weight = checked_weight(CROSS_ENCODER_FIRST_WEIGHT if first_weight is None else first_weight,
                                           "--rerank-first-weight")
        self.batch_size = checked_count(batch_size, "batch_size")

    @staticmethod
    def describe() -> str:
        return "by the cross-encoder"

    def rerank_batch(self, queries: Sequence[Query], candidates: Sequence[Ranked], fetch: Callable[[str], dict | None],
                     depth: int | None = None) -> list[Ranked]:
        """Each query's top ``depth`` (default :attr:`depth`) candidates sorted by the cross-encoder's logit (ties
        keep first-stage order), or with :attr:`first_weight` above 0 by its interpolation with the first stage's
        scores; ``fetch(docid)`` gives a candidate's ``{"text"[, "title"]}``."""
        n, depth = len(queries), depth or self.depth
        out: list[Ranked] = []
        for start in range(0, n, QUERY_CHUNK):
            rows = range(start, min(n, start + QUERY_CHUNK))
            lists = [[d for d, _ in candidates[i][:depth]] for i in rows]
            docs = fetched([d for ids in lists for d in ids], fetch)
            texts = {d: self.model.format_documents([(doc.get("title"), doc.get("text") or "")])[0]
                     for d, doc in docs.items()}
            chunk = [queries[i] for i in rows]
            sides = self.model.format_queries([q.text for q in chunk], chunk, self.query_input,
                                              [q.reasoning_aware for q in chunk])
            flat = self.model.score([s for s, ids in zip(sides, lists) for _ in ids],
                                    [texts[d] for ids in lists for d in ids], self.batch_size)
            at = 0
            for i, ids in zip(rows, lists):
                scores, at = flat[at:at + len(ids)], at + len(ids)
                out.append(with_first_stage(candidates[i][:depth], sorted_by_score(ids, scores), self.first_weight))
        return out

    @classmethod
    def from_options(cls, options) -> CrossEncoderReranker:
        """The reranker a :class:`~hopscotch.retriever.searchers.rerank.RerankOptions` describes; the MaxSim-only
        options (``--rerank-cache``, ``--rerank-query-mix``, ``--rerank-windows``) are UsageErrors."""
        for name, flag in (("cache_dir", "--rerank-cache"), ("late_fusion", "--rerank-query-mix"),
                           ("windows", "--rerank-windows")):
            if getattr(options, name) is not None:
                raise UsageError(f"{flag} applies to a multi-vector reranker; {os.fspath(options.model)} is a "
                                 "cross-encoder (it reads each query-document pair whole)")
        return cls(options.model, depth=options.depth, query_input=options.query_input,
                   first_weight=options.first_weight)
