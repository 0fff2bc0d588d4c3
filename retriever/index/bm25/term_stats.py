"""What a query expansion reads of a BM25 index: its analyser, each term's document frequency, its size.

Example:

    >>> from hopscotch.retriever.index.bm25.analyzer import Analyzer
    >>> stats = TermStats(Analyzer(), {"gummo": 3}, 1000)
    >>> stats.frequencies(["gummo", "film"]), round(idf(3, 1000), 3)
    ([3.0, 0.0], 5.656)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass


def idf(df: float, num_docs: int) -> float:
    """BM25's (Lucene's, bm25s's) idf of a term in ``df`` of ``num_docs`` documents: ``ln(1 + (N - df + 0.5) / (df +
    0.5))``."""
    return math.log(1.0 + (num_docs - df + 0.5) / (df + 0.5))


@dataclass(frozen=True)
class TermStats:
    """``analyzer`` (text -> terms: :class:`~hopscotch.retriever.index.bm25.analyzer.Analyzer`), ``df`` (each term's
    document frequency: a mapping, or a callable taking a list of terms and returning their frequencies; 0 for a term
    the index lacks) and ``num_docs``. ``df = None``: the index does not say (a remote endpoint), which is also sent
words rather than terms (``words``)."""

    analyzer: object
    df: object = None
    num_docs: int = 0
    words: bool = False   # whether a query must keep each term's word (an index that analyses text itself)

    def frequencies(self, terms: list[str]) -> list[float] | None:
        """Each term's document frequency, or None when the index does not say."""
        if self.df is None:
            return None
        if isinstance(self.df, Mapping):
            return [float(self.df.get(t, 0)) for t in terms]
        return [float(x) for x in self.df(terms)]
