"""Late-interaction scoring: queries encoded into token vectors by a multi-vector model and documents' token
vectors scored by MaxSim, under the query mix. The one scorer of the MaxSim reranker
(:class:`~hopscotch.retriever.searchers.rerank.MultiVectorReranker`, documents encoded from their text) and of
the ``multi_vector`` backend (:class:`~hopscotch.retriever.searchers.multi_vector_index.MultiVectorIndexSearcher`,
documents decompressed from the index), so a rerank and a full-index search of the same candidates score alike.

* Queries are formatted by the model (:meth:`~hopscotch.retriever.model.multi_vector.MultiVectorModel.format_queries`):
  reasoning-aware ones in the query input variant given, else the model's (``reasoning`` for a ``query`` model).
* The query mix (:class:`~hopscotch.retriever.model.query_mix.QueryMix`, the given one else the model's recorded
  ``late_fusion``): off, a query scores plain MaxSim of its one encoding; on, every query scores
  ``w * MaxSim(q_r, d) / |q_r| + (1 - w) * MaxSim(q_q, d) / |q_q|``
  (:func:`~hopscotch.retriever.model.multi_vector.late_fusion_scores`), a plain query mixed with itself
  (``mix_plain``) so that all queries score on one scale.
* A document given as several windows scores as its best window (MaxP).

Example (not run: it needs a multi-vector model)::

    scorer = MultiVectorScorer("out/colbert", mix=QueryMix(0.5))
    pairs = scorer.query_vectors(["who directed Gummo"], ["The film came out in 1997."], [True])
    weights = scorer.query_weights(["The film came out in 1997."], pairs)
    scorer.scores(*pairs[0], [[doc_tokens]], weights[0])
"""

from __future__ import annotations

from collections.abc import Sequence

from hopscotch.retriever.model.query_input import searcher_query_input
from hopscotch.retriever.model.query_mix import QueryMix


class MultiVectorScorer:
    """:param model: a :class:`~hopscotch.retriever.model.multi_vector.MultiVectorModel`, or a folder / Hub id of one
    :param query_input: the variant of reasoning-aware queries (None: the model's)
    :param mix: the query mix asked for (checked by its caller, :meth:`QueryMix.checked`, under its own flag's
        name); none set: the model's recorded weight, else off
    :param batch_size, device: for encoding queries (and loading the model)"""

    def __init__(self, model, *, query_input: str | None = None, mix: QueryMix | None = None, batch_size: int = 32,
                 device: str | None = None):
        from hopscotch.retriever.model.multi_vector import MultiVectorModel, load_multi_vector_model

        self.model = model if isinstance(model, MultiVectorModel) else load_multi_vector_model(model, device=device)
        c = self.model.config
        self.query_input = searcher_query_input(query_input, c.query_input)
        self.query_mix = (mix or QueryMix()).or_recorded(QueryMix(c.late_fusion))
        self.batch_size = batch_size

    @property
    def late_fusion(self) -> float | None:
        """The query mix's weight (None: plain MaxSim)."""
        return self.query_mix.weight

    def query_vectors(self, queries: Sequence[str], reasonings: Sequence, aware: Sequence[bool]) -> list[tuple]:
        """Per query ``(q_main, q_plain)``: the encoding in use and, under the query mix, the query-only one (the
        very ``q_main`` object when the two texts are the same; None without a mix)."""
        model = self.model
        main = model.encode_queries(queries, reasonings, self.query_input, aware, batch_size=self.batch_size)
        if self.query_mix.weight is None:
            return [(q, None) for q in main]
        texts = model.format_queries(queries, reasonings, self.query_input, aware)
        plain_texts = model.format_queries(queries, None, self.query_input, False)
        differ = [i for i, (a, b) in enumerate(zip(texts, plain_texts)) if a != b]
        plain = list(main)
        if differ:
            encoded = model.encode_queries([queries[i] for i in differ], None, self.query_input, False,
                                           batch_size=self.batch_size)
            for i, q in zip(differ, encoded):
                plain[i] = q
        return list(zip(main, plain))

    def query_weights(self, reasonings: Sequence, pairs: Sequence[tuple]) -> list[float]:
        """Each query's mix weight (:meth:`QueryMix.weight_for`, scores mixed for plain queries too) for the pairs
        :meth:`query_vectors` returned for these ``reasonings``."""
        return [self.query_mix.weight_for(context, plain is not None and plain is not main, mix_plain=True)
                for context, (main, plain) in zip(reasonings, pairs)]

    def scores(self, q_main, q_plain, windows: Sequence, weight: float | None = None) -> list[float]:
        """One score per document (``windows``: each document's window tensors): its best window's MaxSim, or with
        ``q_plain`` the mixed normalised MaxSim at ``weight`` (:meth:`query_weights`; None: the mix's weight)."""
        from hopscotch.retriever.model.multi_vector import late_fusion_scores, maxsim

        flat = [w for ws in windows for w in ws]
        if q_plain is None:
            per_window = maxsim(q_main, flat)
        else:
            w = self.query_mix.weight_for(None, mix_plain=True) if weight is None else weight
            per_window = late_fusion_scores(q_main, q_plain, flat, w)
        if all(len(ws) == 1 for ws in windows):  # one window a document: its window's score, no loop of maxima
            return per_window.tolist()
        out, start = [], 0
        for ws in windows:
            out.append(float(per_window[start:start + len(ws)].max()))
            start += len(ws)
        return out
