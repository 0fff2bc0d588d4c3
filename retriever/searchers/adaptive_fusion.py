"""Per-query adaptive fusion weights: how much to trust BM25 against the dense list, query by query, without labels.

One global BM25 weight trusts the same list on every query. On agent traffic the better list changes from
query to query (keyword-dense queries over long pages favour BM25; paraphrased ones favour the dense model),
and a per-query oracle choosing the better list gains far more than any fixed weight. This module gives
each query its own convex BM25 weight from two label-free signals of the two ranked lists:

* **standout** of a list (:func:`standout`): how far its top score stands above the rest of the list, in
  units of the list's own standard deviation, ``(s_1 - mean(s_1..s_n)) / sd(s_1..s_n)`` over the list cut to
  its depth. A list whose best document is a clear outlier is usually right about it (a rare-term BM25 hit, a
  near-paraphrase for the dense model); a flat list (all candidates alike) knows nothing. It is a
  dimensionless score-distribution query-performance predictor of the NQC / score-gap family, so the two
  lists' values can be compared although their raw scores cannot.
* **agreement** of the two lists (:func:`agreement`): the share of their top ``agreement_k`` documents they
  have in common. When the lists agree, either weight gives nearly the same ranking; when they disagree, one
  of them is failing on this query, and the standout difference says which.

The weight on BM25 is::

    logit(w_q) = logit(w) + adapt * (1 - agreement) * (standout(bm25) - standout(dense) - shift)

``w`` is the base weight (what a fixed interpolation would use), ``adapt >= 0`` how strongly the signals move
it (0: the fixed z-score interpolation at ``w``), ``shift`` the standout difference at which neither list is
favoured (BM25's heavy-tailed scores stand out more than cosine scores on average; ``hopscotch tune-fusion``
learns it with ``w`` and ``adapt``). A list that is empty for a query gets weight 0 (the other is followed);
an all-equal list has standout 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Hits = Sequence[tuple[str, float]]

#: the logit is clipped here, so that w_q stays strictly inside (0, 1) and exp never overflows
MAX_LOGIT = 30.0


def standout(scores: Sequence[float]) -> float:
    """``(max - mean) / sd`` of ``scores`` (population sd); 0 for fewer than two scores or equal scores."""
    n = len(scores)
    if n < 2:
        return 0.0
    mean = math.fsum(scores) / n
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in scores) / n)
    return (max(scores) - mean) / sd if sd > 0 else 0.0


def agreement(sparse: Hits, dense: Hits, k: int = 10) -> float:
    """The share of the two lists' top ``k`` documents they have in common (0 to 1; 0 when either is empty)."""
    a = {d for d, _ in list(sparse)[:k]}
    b = {d for d, _ in list(dense)[:k]}
    if not a or not b:
        return 0.0
    return len(a & b) / min(k, len(a), len(b))


def _logit(p: float) -> float:
    p = min(max(p, 1e-9), 1 - 1e-9)
    return math.log(p / (1 - p))


def adaptive_weight(sparse: Hits, dense: Hits, sparse_weight: float, adapt: float, shift: float = 0.0,
                    agreement_k: int = 10) -> float:
    """The convex BM25 weight for one query (see the module docstring): 1 when the dense list is empty, 0 when
    BM25's is, ``sparse_weight`` when ``adapt`` is 0."""
    if not dense:
        return 1.0 if sparse else sparse_weight
    if not sparse:
        return 0.0
    if adapt == 0 or sparse_weight in (0.0, 1.0):
        return sparse_weight
    gap = standout([s for _, s in sparse]) - standout([s for _, s in dense]) - shift
    z = _logit(sparse_weight) + adapt * (1.0 - agreement(sparse, dense, agreement_k)) * gap
    z = min(max(z, -MAX_LOGIT), MAX_LOGIT)
    return 1.0 / (1.0 + math.exp(-z))
