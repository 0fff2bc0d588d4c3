"""The query mix (``--query-mix``; ``--late-fusion`` is its deprecated alias): how much of a reasoning-aware query's score comes from its reasoning-aware
encoding and how much from its query-only one. One rule for every searcher that reads a reasoning.

A reasoning-aware query is encoded twice, in its query input variant (``q_r``) and plain (``q_q``), and scored
``w * s(q_r, d) + (1 - w) * s(q_q, d)``. The weight ``w`` of one query is :meth:`QueryMix.weight_for`: the mix's
:attr:`~QueryMix.weight` (None: 1, the reasoning-aware encoding alone), or :attr:`~QueryMix.long_weight`
(None: 0, the query alone) when its reasoning context is longer than :attr:`~QueryMix.max_words` words.
Where a mix's values come from is :meth:`QueryMix.or_recorded`: the ones given, else the model's recorded ones.

Its two users apply the weight where their scores allow:

* the dense searcher mixes *vectors* (``w * q_r + (1 - w) * q_q``: inner products are linear, so that is one
  FAISS search); a query whose two texts are the same (no reasoning in its variant) keeps its one encoding;
* the MaxSim scorer (:mod:`hopscotch.retriever.model.multi_vector_scorer`: the reranker and the multi-vector
  index) mixes *scores*, each side's MaxSim normalised by its number of query vectors
  (:func:`~hopscotch.retriever.model.multi_vector.late_fusion_scores`), and, so that every query's scores share
  that scale, mixes a plain query's with itself too (``mix_plain``).
"""

from __future__ import annotations

from dataclasses import dataclass

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.model.config import checked_count, checked_weight
from hopscotch.retriever.model.query_input import as_context

#: the dense searcher's flags of the mix (``--query-mix``, ``--query-mix-max-words``, ``--query-mix-long``)
QUERY_MIX_FLAG = "--query-mix"
#: the MaxSim reranker's flag of the mix (its weight only)
RERANK_QUERY_MIX_FLAG = "--rerank-query-mix"
#: the mix's flags' former names (``--late-fusion``, ``--late-fusion-max-words``, ``--late-fusion-long``,
#: ``--rerank-late-fusion``): deprecated aliases, still accepted with a note
LATE_FUSION_FLAG = "--late-fusion"
RERANK_LATE_FUSION_FLAG = "--rerank-late-fusion"


@dataclass(frozen=True)
class QueryMix:
    """:param weight: ``w`` of the reasoning-aware encoding in 0..1 (None: no mix; the reasoning-aware encoding
        alone, and the MaxSim scorer's plain, unnormalised MaxSim)
    :param max_words: reasoning contexts longer than this many words get :attr:`long_weight` (None: no limit)
    :param long_weight: the weight of those contexts (None: 0, the query alone); a mix in use needs
        :attr:`max_words` with it (:meth:`or_recorded` refuses it alone)

    Built from flags or recipe keys by :meth:`checked`, the one validator of the three flags."""

    weight: float | None = None
    max_words: int | None = None
    long_weight: float | None = None

    @classmethod
    def checked(cls, weight=None, max_words=None, long_weight=None, *, flag: str = QUERY_MIX_FLAG) -> QueryMix:
        """The mix of these values, each checked and named as its flag (``FLAG``, ``FLAG-max-words``,
        ``FLAG-long``) in the UsageError of a bad one."""
        return cls(checked_weight(weight, flag), checked_count(max_words, f"{flag}-max-words"),
                   checked_weight(long_weight, f"{flag}-long"))

    @property
    def given(self) -> bool:
        """Whether any value of the mix is set."""
        return (self.weight, self.max_words, self.long_weight) != (None, None, None)

    def or_recorded(self, recorded: QueryMix, *, variant_given: bool = False) -> QueryMix:
        """This mix, or ``recorded`` (the model's) when none of its values is set and, with ``variant_given``, no
        query input variant was chosen either: a variant picked at search time is searched as it is, not with
        the mix tuned for the model's own variant (the dense searcher's rule; the MaxSim scorer keeps the
        model's weight whatever the variant, ``variant_given=False``)."""
        chosen = self if self.given or variant_given else recorded
        if chosen.long_weight is not None and chosen.max_words is None:
            raise UsageError(f"{QUERY_MIX_FLAG}-long weighs contexts over {QUERY_MIX_FLAG}-max-words: "
                             "give that limit too")
        return chosen

    @property
    def is_identity(self) -> bool:
        """Whether every query is searched with its reasoning-aware encoding alone (no weight below 1, no limit)."""
        return self.weight in (None, 1.0) and self.max_words is None

    def weight_for(self, context, differs: bool = True, *, mix_plain: bool = False) -> float:
        """``w`` of one query: :attr:`weight` (None: 1), or :attr:`long_weight` (None: 0) when its reasoning
        ``context`` (a reasoning string, or a query with its context: :func:`~hopscotch.retriever.model.query_input.
        as_context`) has more than :attr:`max_words` words. A query whose two encodings are the same
        (``differs`` False) keeps its one encoding (1.0), or with ``mix_plain`` (scores normalised per side, so
        that all queries score on one scale) is mixed with itself at :attr:`weight`."""
        w = 1.0 if self.weight is None else self.weight
        if not differs:
            return w if mix_plain else 1.0
        if self.max_words is not None and len((as_context(context).reasoning or "").split()) > self.max_words:
            return self.long_weight or 0.0
        return w
