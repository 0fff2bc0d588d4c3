"""What every rerank stage shares: the protocol a :class:`~hopscotch.retriever.searchers.rerank.RerankedSearcher`
calls, and the interpolation of its scores with the first stage's.

A rerank stage (the MaxSim reranker of a multi-vector model,
:class:`~hopscotch.retriever.searchers.rerank.MultiVectorReranker`, or a cross-encoder's,
:class:`~hopscotch.retriever.searchers.cross_encoder_rerank.CrossEncoderReranker`) has:

* ``kind``: the model kind it reranks with (``multi_vector``, ``cross_encoder``), and ``describe()``: how it scores,
  in words (``by MaxSim``, ``by the cross-encoder``);
* ``depth``: first-stage candidates reranked per query, and ``widens_with_k``: whether a ``k`` above it reranks the
  top ``k`` instead (MaxSim: cheap per candidate) or leaves the first stage's next candidates below the reranked
  ones (a cross-encoder: :func:`with_tail`); ``first_weight``: the first stage's weight in :func:`with_first_stage`;
  ``query_input``: the variant of reasoning-aware queries; ``late_fusion``: its query mix weight, or None;
* ``rerank_batch(queries, candidates, fetch, depth) -> [[(docid, score)], ...]``: each query's (a
  :class:`~hopscotch.retriever.io.queries.Query`) top ``depth`` candidates reordered, ``fetch(docid)`` giving a
  candidate's ``{"text"[, "title"]}``.
"""

from __future__ import annotations

from collections.abc import Sequence

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.searchers.fusion import FusionSettings

Ranked = list[tuple[str, float]]


def with_first_stage(first: Sequence[tuple[str, float]], reranked: Ranked, first_weight: float) -> Ranked:
    """``reranked`` as it is (``first_weight`` 0), else each candidate scored ``w * minmax(first-stage score) +
    (1 - w) * minmax(reranker score)`` over the query's candidates (the hybrid's min-max interpolation,
    :meth:`~hopscotch.retriever.searchers.fusion.FusionSettings.convex`) and sorted by it."""
    if not first_weight or not reranked:
        return reranked

    return FusionSettings.convex(first_weight).apply(list(first), reranked, k=len(reranked))


def with_tail(reranked: Ranked, rest: Sequence[tuple[str, float]], k: int) -> Ranked:
    """The ``k`` best of ``reranked`` followed, when it is shorter than ``k``, by the first stage's next candidates
    ``rest`` in their order, each scored 1 below the previous one from the lowest reranked score down (a run file's
    scores stay in its order)."""
    out = list(reranked[:k])
    if len(out) < k and rest:
        floor = min((s for _, s in out), default=0.0)
        out.extend((docid, floor - (j + 1)) for j, (docid, _) in enumerate(rest[:k - len(out)]))
    return out


def sorted_by_score(ids: Sequence[str], scores: Sequence[float]) -> Ranked:
    """``(docid, score)`` by score, best first; ties keep the first stage's order (a stable sort)."""
    order = sorted(range(len(ids)), key=lambda j: -scores[j])
    return [(ids[j], scores[j]) for j in order]


def fetched(docids: Sequence[str], fetch) -> dict[str, dict]:
    """``{docid: fetch(docid)}`` for each distinct docid; a candidate without a text is a UsageError."""
    out = {}
    for docid in dict.fromkeys(docids):
        doc = fetch(docid)
        if doc is None:
            raise UsageError(f"reranking needs each candidate's text, and the first stage has none for {docid!r} "
                             "(give --corpus for BM25, or an --index with a docstore)")
        out[docid] = doc
    return out
