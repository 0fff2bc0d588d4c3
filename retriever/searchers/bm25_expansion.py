"""Reasoning-aware BM25: the query expanded with the agent's reasoning (query2doc-style), one rule for every path.

A BM25 query is a bag of weighted terms. With a reasoning, the bag is::

    query_weight x (the query's terms)  +  1 x (the terms of the reasoning text the variant picks)

which is the query repeated ``query_weight`` times followed by the reasoning text (query2doc's "query x n +
pseudo-document" for sparse retrieval), tokenized by the index's own analyzer (stemmer, stopwords). The
reasoning text is picked by a query input variant (:mod:`hopscotch.retriever.model.query_input`), counted in
whitespace words: ``reasoning_tail:N`` (the last N words), ``current_reasoning``, ``reasoning`` (all of it),
``reasoning_focus:N``, ... ``query`` turns the expansion off. A query without reasoning (or with an empty
one) is plain BM25, exactly: the searcher does not take the weighted path at all.

The defaults (:data:`DEFAULT_BM25_EXPANSION`) were chosen on the agent dev sets whose labels no retriever
bounded (the maximin rule over their tune questions: ``scripts/bm25_expansion_grid.py``; docs/benchmarks.md).
Flags: ``--bm25-query-weight W`` and ``--bm25-reasoning VARIANT`` on every backend with a BM25 half (bm25,
hybrid); ``hopscotch search --reasoning`` (and a REST ``reason=``, an MCP ``reason``, a harness's reasoning
argument, ``replay``) turns it on.

Example::

    expansion = BM25Expansion.parse("reasoning_tail:64", query_weight=3)
    weights = expansion.text_parts("Gummo director", "I think the film is Gummo. Who directed it?")
    # -> (("Gummo director", 3.0), ("I think the film is Gummo. Who directed it?", 1.0))
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.model.query_input import QueryInput, reasoning_text


@dataclass(frozen=True, slots=True)
class BM25Expansion:
    """How a query is expanded with its reasoning: ``reasoning`` (the variant that picks the text, whitespace
    words for ``:N``) and ``query_weight`` (how many times the query's terms count, relative to the text's)."""

    reasoning: QueryInput
    query_weight: float = 1.0

    def __post_init__(self) -> None:
        if not (isinstance(self.query_weight, (int, float)) and math.isfinite(self.query_weight)
                and self.query_weight > 0):
            raise UsageError(f"--bm25-query-weight must be a positive number, got {self.query_weight!r}")

    @classmethod
    def parse(cls, reasoning: str | QueryInput, query_weight: float = 1.0) -> BM25Expansion:
        return cls(QueryInput.parse(reasoning, "--bm25-reasoning"), float(query_weight))

    @property
    def enabled(self) -> bool:
        """Whether a reasoning changes the query at all (``--bm25-reasoning query``: never)."""
        return self.reasoning.uses_reasoning

    def expansion_text(self, query: str, reasoning) -> str:
        """The reasoning text added to ``query`` ("" when there is none, or the expansion is off); ``reasoning``:
        a string or anything :func:`~hopscotch.retriever.model.query_input.as_context` takes."""
        if not self.enabled or reasoning is None:
            return ""
        return (reasoning_text(self.reasoning, reasoning, None, query=query) or "").strip()

    def text_parts(self, query: str, reasoning) -> tuple[tuple[str, float], ...] | None:
        """``((query, query_weight), (reasoning text, 1.0))``, or None when the query stays plain."""
        text = self.expansion_text(query, reasoning)
        return ((query, self.query_weight), (text, 1.0)) if text else None

    def describe(self) -> str:
        return f"query x{self.query_weight:g} + {self.reasoning}" if self.enabled else "off"


#: chosen on the tune questions of the dev sets no retriever bounded (docs/benchmarks.md, "Reasoning-aware BM25")
DEFAULT_BM25_EXPANSION = BM25Expansion(QueryInput("reasoning_tail", 16), 7.0)
