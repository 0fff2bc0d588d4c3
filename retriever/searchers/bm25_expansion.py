"""Reasoning-aware BM25: the query expanded with the agent's reasoning, one rule for every path.

A BM25 query is a bag of weighted terms, scored ``sum_t w_t * bm25(t, d)``. With a reasoning, the bag is the
query's terms plus terms of the reasoning text that a query-input variant picks
(:mod:`hopscotch.retriever.model.query_input`: ``reasoning``, the whole of it; ``reasoning_tail:N``, its last N
words; ``reasoning_focus:N``; ...). How the reasoning's terms weigh in is the expansion's other settings:

* the **raw bag** (``terms`` and ``weight`` unset): ``query_weight x`` (the query's terms) ``+ 1 x`` (each
  occurrence of a term of the text), query2doc's "query repeated + pseudo-document" for sparse retrieval;
* **saturation** (``k3``): a reasoning term occurring ``tf`` times counts ``(k3 + 1) tf / (k3 + tf)`` times
  instead of ``tf`` (BM25's query-side ``k3``, as BRIGHT's BM25 reads long queries): a word the thinking repeats
  forty times no longer outweighs the query;
* **term selection** (``terms = m``): the reasoning as a feedback document, RM3-style: only its ``m`` terms with
  the largest saturated ``tf x idf`` (idf from the index: ``ln(1 + (N - df + 0.5) / (df + 0.5))``) are kept, so
  generic words and rare one-off names drop out unless the thinking dwells on them;
* **normalised weight** (``weight = r``): the kept reasoning terms' weights (their saturated frequencies) are
  scaled to sum to ``r`` times the query's total weight, so the expansion counts the same against a three-word
  and a ten-word query, whatever the thinking's length.

A query without reasoning (or with an empty one) is plain BM25, exactly: the searcher does not take the weighted
path at all. Every path reaches this one rule through :class:`~hopscotch.retriever.searchers.bm25.BM25Searcher`:
``search --bm25 --reasoning``, the hybrid, REST ``reason=``, MCP ``reason``, ``replay --reasoning``, the
harness adapters, DR-Synth's candidates.

The defaults (:data:`DEFAULT_BM25_EXPANSION`: ``reasoning_focus:256``, the query x8) were chosen by the selection
rule of :mod:`hopscotch.retriever.evaluation.selection` among 120 settings (:data:`DEFAULT_BM25_EXPANSION_CHOSEN`;
``scripts/bm25_expansion_grid.py``; docs/benchmarks.md, "Defaults for agent traffic"). Term selection and saturation
gained a little more on the current-turn calls but lost significantly on MuSiQue hops or the long synthetic world,
so they are options, not the default. Flags: ``--bm25-reasoning VARIANT``, ``--bm25-query-weight W``, ``--bm25-terms M``,
``--bm25-reasoning-weight R``, ``--bm25-k3 K`` on every backend with a BM25 half (bm25, hybrid).

Example:

    >>> from hopscotch.retriever.index.bm25.analyzer import Analyzer
    >>> from hopscotch.retriever.index.bm25.term_stats import TermStats
    >>> expansion = BM25Expansion.parse("reasoning", query_weight=1, terms=2, weight=2.0, k3=1.2)
    >>> stats = TermStats(Analyzer(), {"gummo": 3, "director": 40, "film": 900, "korin": 5}, 1000)
    >>> q = expansion.term_query("director", "Harmony Korine made the film Gummo; Gummo was his first film.", stats)
    >>> sorted((t, round(w, 2)) for t, w in q.weights.items())
    [('director', 1.0), ('gummo', 1.16), ('korin', 0.84)]
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.index.bm25.term_stats import TermStats, idf
from hopscotch.retriever.model.query_input import QueryInput, reasoning_text


def _positive(value, flag: str, allow_none: bool = True) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise UsageError(f"{flag} must be a positive number, got {value!r}")


@dataclass(frozen=True)
class TermQuery:
    """A weighted BM25 query: ``weights`` (analysed term -> weight) and, per term, a ``word`` of the text it came
    from (for an endpoint that analyses the text it is sent: :mod:`~hopscotch.retriever.searchers.remote_bm25`)."""

    weights: dict[str, float]
    words: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BM25Expansion:
    """How a query is expanded with its reasoning (module doc): ``reasoning`` (the variant that picks the text,
    whitespace words for ``:N``), ``query_weight`` (how many times the query's terms count), ``terms`` (keep the
    reasoning's top-m terms by saturated tf x idf; None: all), ``weight`` (the reasoning terms' total weight as a
    multiple of the query's; None: each occurrence counts 1) and ``k3`` (saturation; None: raw frequencies)."""

    reasoning: QueryInput
    query_weight: float = 1.0
    terms: int | None = None
    weight: float | None = None
    k3: float | None = None

    def __post_init__(self) -> None:
        _positive(self.query_weight, "--bm25-query-weight", allow_none=False)
        _positive(self.weight, "--bm25-reasoning-weight")
        _positive(self.k3, "--bm25-k3")
        if self.terms is not None and (isinstance(self.terms, bool) or not isinstance(self.terms, int)
                                       or self.terms < 1):
            raise UsageError(f"--bm25-terms must be a whole number >= 1, got {self.terms!r}")

    @classmethod
    def parse(cls, reasoning: str | QueryInput, query_weight: float = 1.0, terms: int | None = None,
              weight: float | None = None, k3: float | None = None) -> BM25Expansion:
        return cls(QueryInput.parse(reasoning, "--bm25-reasoning"), float(query_weight), terms,
                   None if weight is None else float(weight), None if k3 is None else float(k3))

    @property
    def enabled(self) -> bool:
        """Whether a reasoning changes the query at all (``--bm25-reasoning query``: never)."""
        return self.reasoning.uses_reasoning

    @property
    def raw_bag(self) -> bool:
        """Whether this is the raw bag (no selection, no saturation, no normalised weight): the query and the text
        as two weighted parts (:meth:`text_parts`)."""
        return self.terms is None and self.weight is None and self.k3 is None

    def expansion_text(self, query: str, reasoning) -> str:
        """The reasoning text added to ``query`` ("" when there is none, or the expansion is off); ``reasoning``:
        a string or anything :func:`~hopscotch.retriever.model.query_input.as_context` takes."""
        if not self.enabled or reasoning is None:
            return ""
        return (reasoning_text(self.reasoning, reasoning, None, query=query) or "").strip()

    def text_parts(self, query: str, reasoning) -> tuple[tuple[str, float], ...] | None:
        """The raw bag as ``((query, query_weight), (reasoning text, 1.0))``, or None when the query stays plain."""
        text = self.expansion_text(query, reasoning)
        return ((query, self.query_weight), (text, 1.0)) if text else None

    def term_query(self, query: str, reasoning, stats: TermStats) -> TermQuery | None:
        """The expanded query as weighted terms (module doc), or None when the query stays plain (no reasoning
        text). The raw bag gives the same weights as :meth:`text_parts` scored by the index."""
        text = self.expansion_text(query, reasoning)
        if not text:
            return None
        weights, words = _counted(stats.analyzer, query, self.query_weight, stats.words)
        counts, text_words = _counted(stats.analyzer, text, 1.0, stats.words)
        for term, word in text_words.items():
            words.setdefault(term, word)
        if not counts:
            return TermQuery(weights, words)
        k3 = self.k3
        sat = {t: ((k3 + 1.0) * n / (k3 + n) if k3 else n) for t, n in counts.items()}
        chosen = self._select(sat, stats) if self.terms is not None else list(sat)
        extra = {t: sat[t] for t in chosen}
        if self.weight is not None and extra:
            total = sum(extra.values())
            target = self.weight * max(sum(weights.values()), 1.0)
            extra = {t: w * target / total for t, w in extra.items()}
        for t, w in extra.items():
            weights[t] = weights.get(t, 0.0) + w
        return TermQuery(weights, words)

    def _select(self, sat: dict[str, float], stats: TermStats) -> list[str]:
        """The reasoning's :attr:`terms` terms with the largest saturated tf x idf (ties: first occurrence); terms
        the index lacks are never chosen (they cannot match). Without document frequencies: by saturated tf."""
        terms = list(sat)
        df = stats.frequencies(terms)
        if df is None:
            score = {t: sat[t] for t in terms}
        else:
            score = {t: sat[t] * idf(f, stats.num_docs) for t, f in zip(terms, df) if f > 0}
        ranked = sorted(score, key=lambda t: -score[t])   # stable: first occurrence breaks ties
        return ranked[: self.terms]

    def describe(self) -> str:
        if not self.enabled:
            return "off"
        parts = [f"query x{self.query_weight:g}", str(self.reasoning)]
        if self.terms is not None:
            parts.append(f"top {self.terms} terms by tf x idf")
        if self.k3 is not None:
            parts.append(f"k3 {self.k3:g}")
        if self.weight is not None:
            parts.append(f"reasoning weight {self.weight:g} x the query's")
        return " + ".join(parts[:2]) + ("" if len(parts) == 2 else " (" + ", ".join(parts[2:]) + ")")


def _counted(analyzer, text: str, weight: float, words: bool) -> tuple[dict[str, float], dict[str, str]]:
    """``({term: weight x occurrences}, {term: its first word})`` of ``text``; the words only when asked for (an
    endpoint that analyses text itself needs them)."""
    if not words:
        return {t: weight * n for t, n in Counter(analyzer.terms(text)).items()}, {}
    counts: dict[str, float] = {}
    first: dict[str, str] = {}
    for word in analyzer.words(text):
        term = analyzer.term_of(word)
        if term:
            counts[term] = counts.get(term, 0.0) + weight
            first.setdefault(term, word)
    return counts, first


#: the default expansion: the reasoning's 256 words that share the most with the query (its whole text when shorter),
#: beside the query counted 8 times; chosen by the selection rule (:data:`DEFAULT_BM25_EXPANSION_CHOSEN`)
DEFAULT_BM25_EXPANSION = BM25Expansion(QueryInput("reasoning_focus", 256), 8.0)
#: where :data:`DEFAULT_BM25_EXPANSION` came from: the selection rule of
#: :mod:`hopscotch.retriever.evaluation.selection`, its sets and split (``python scripts/bm25_expansion_grid.py``;
#: docs/benchmarks.md, "Defaults for agent traffic")
DEFAULT_BM25_EXPANSION_CHOSEN = {
    "rule": "objective: mean tune ndcg@10 over the real agent sets tongyi_turn, tongyi_pages_turn; a guard set "
            "disqualifies on a significant loss against its baseline (paired randomisation p < 0.05 and delta < "
            "-0.01, tune questions)",
    "objective_sets": ["tongyi_turn", "tongyi_pages_turn"],
    "guard_sets": ["hotpotqa", "musique", "world", "world_long", "tongyi_question", "tongyi_pages_question",
                   "tongyi_turn_new", "tongyi_pages_turn_new", "tongyi_question_new", "tongyi_pages_question_new"],
    "split": "tune", "baseline": "plain BM25", "candidates": 120,
    "pick": "--bm25-reasoning reasoning_focus:256 --bm25-query-weight 8", "objective": 0.5095,
    "runner_up": "--bm25-reasoning reasoning_focus:256 --bm25-query-weight 5", "runner_up_objective": 0.5094,
    "command": "python scripts/bm25_expansion_grid.py --work WORK",
}
