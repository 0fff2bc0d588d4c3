"""The query input variant: which part of an agent step's context goes into the reasoning slot.

One knob, spelled the same in a recipe (``model.query_input``), a saved model's ``hopscotch_config.json``,
``hopscotch search`` / ``serve`` (``--query-input``) and the dense searcher:

=====================  ===============================================================================
``query``              the query only: ``{instruction}{query}`` (``reasoning_aware: false``)
``prior_queries``      the earlier queries of the same trajectory, one per line, then the query
``reasoning``          the full reasoning so far (the step's ``reasoning`` field; ``reasoning_aware: true``)
``current_reasoning``  only the reasoning written since the last tool result (``current_reasoning``;
                       a step without that field falls back to its ``reasoning``)
``reasoning_tail:N``   the last ``N`` tokens of the reasoning: the model tokenizer's tokens when one is
                       given (the encoders and the trainer always give theirs), else whitespace words
``with_documents``     the previous call's results (``title: snippet`` lines, each snippet cut to
                       :data:`SNIPPET_CHARS`) spliced into the reasoning where they arrived: before
                       ``current_reasoning`` when the reasoning ends with it, else before the reasoning
=====================  ===============================================================================

Every variant but ``query`` is written in AgentIR's template
``{instruction}Reasoning: {text or 'Empty'}\\n\\nQuery: {query}`` (see
:mod:`~hopscotch.retriever.model.query_template`, which also cuts ``text`` from the left to fit the
query length). :func:`reasoning_text` builds ``text`` for a variant from a step's context fields
(:class:`QueryContext`: ``reasoning``, ``current_reasoning``, ``prior_queries``, ``prior_results``); the
trainer's collator, the dense encoder and searcher and DR-Synth all go through it.

Example::

    variant = QueryInput.parse("reasoning_tail:64")
    text = reasoning_text(variant, {"reasoning": long_thinking}, tokenizer)
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hopscotch.retriever.errors import UsageError

#: the variant names; ``reasoning_tail`` is written ``reasoning_tail:N``
KINDS = ("query", "prior_queries", "reasoning", "current_reasoning", "reasoning_tail", "with_documents")
ALLOWED = "query, prior_queries, reasoning, current_reasoning, reasoning_tail:N (N >= 1), with_documents"
#: characters of each previous result's snippet that ``with_documents`` keeps (cut at a word boundary)
SNIPPET_CHARS = 300


@dataclass(frozen=True, slots=True)
class QueryInput:
    """A parsed variant: ``kind`` (one of :data:`KINDS`) and, for ``reasoning_tail``, ``tail`` tokens."""

    kind: str
    tail: int | None = None

    @classmethod
    def parse(cls, value: str | QueryInput, where: str = "query input") -> QueryInput:
        """``"reasoning_tail:64"`` -> ``QueryInput("reasoning_tail", 64)``; UsageError naming the allowed values."""
        if isinstance(value, QueryInput):
            return value
        text = value.strip() if isinstance(value, str) else ""
        kind, sep, arg = text.partition(":")
        kind = kind.strip()
        if kind == "reasoning_tail" and sep:
            arg = arg.strip()
            if arg.isdigit() and int(arg) >= 1:
                return cls(kind, int(arg))
        elif kind in KINDS and kind != "reasoning_tail" and not sep:
            return cls(kind)
        raise UsageError(f"{where}: unknown query input {value!r}; use one of {ALLOWED}")

    def __str__(self) -> str:
        return f"{self.kind}:{self.tail}" if self.kind == "reasoning_tail" else self.kind

    @property
    def uses_reasoning(self) -> bool:
        """Whether queries go in AgentIR's ``Reasoning: ...`` template (every variant but ``query``)."""
        return self.kind != "query"


QUERY = QueryInput("query")
REASONING = QueryInput("reasoning")


def default_query_input(reasoning_aware: bool) -> QueryInput:
    """The variant ``reasoning_aware`` stands for: ``reasoning`` when true, ``query`` when false."""
    return REASONING if reasoning_aware else QUERY


@dataclass(frozen=True, slots=True)
class QueryContext:
    """What an agent step knows before its query; None: the step's source does not say.

    ``prior_results`` entries are ``{"title", "snippet"}`` dicts (title may be empty).
    """

    reasoning: str | None = None
    current_reasoning: str | None = None
    prior_queries: tuple[str, ...] | None = None
    prior_results: tuple[dict, ...] | None = None

    def has_extra(self) -> bool:
        """Whether the context says more than its ``reasoning``."""
        return (self.current_reasoning, self.prior_queries, self.prior_results) != (None, None, None)


class ReasoningContext(str):
    """A step's full reasoning as a ``str`` that also carries its :class:`QueryContext`.

    Searchers take ``reasonings`` as strings; this one is today's reasoning to every backend that only
    wants the string (BM25, the remote client, the REST ``reason`` parameter) while the dense searcher
    reads the step's other context fields from :attr:`context`.
    """

    def __new__(cls, context: QueryContext):
        obj = super().__new__(cls, context.reasoning or "")
        obj.context = context
        return obj

    def __getnewargs__(self):
        return (self.context,)

    @classmethod
    def of(cls, step) -> str | None:
        """``step.reasoning`` (a Query, TrainingTuple, TraceStep, ...), as a ReasoningContext when the step
        carries more context than its reasoning."""
        context = as_context(step)
        return cls(context) if context.has_extra() else context.reasoning


def as_context(value) -> QueryContext:
    """A :class:`QueryContext` from None, a reasoning string, a ReasoningContext, a mapping with the
    context keys, or any object with those attributes (Query, TrainingTuple, TraceStep)."""
    if isinstance(value, ReasoningContext):
        return value.context
    if value is None or isinstance(value, str):
        return QueryContext(reasoning=value)
    if isinstance(value, QueryContext):
        return value
    get = value.get if isinstance(value, Mapping) else (lambda key: getattr(value, key, None))
    queries, results = get("prior_queries"), get("prior_results")
    return QueryContext(get("reasoning"), get("current_reasoning"),
                        None if queries is None else tuple(queries),
                        None if results is None else tuple(_result(r) for r in results))


def _result(item) -> dict:
    if isinstance(item, str):
        return {"title": "", "snippet": item}
    return {"title": item.get("title") or "", "snippet": item.get("snippet") or item.get("text") or ""}


def clip_text(text: str, max_chars: int = SNIPPET_CHARS) -> str:
    """``text`` with its whitespace collapsed, cut to ``max_chars`` (at a word boundary when one is near)."""
    text = " ".join(text.split())
    if len(text) <= max_chars:
        return text
    cut = text[:max_chars]
    space = cut.rfind(" ")
    return cut[:space] if space > max_chars * 0.8 else cut


def results_text(results: Sequence[dict] | None) -> str:
    """The ``with_documents`` block: ``Results:`` then one ``title: snippet`` line per result."""
    lines = []
    for r in results or ():
        r = _result(r)
        snippet, title = clip_text(r["snippet"], SNIPPET_CHARS), clip_text(r["title"], SNIPPET_CHARS)
        line = f"{title}: {snippet}" if title and snippet else title or snippet
        if line:
            lines.append(line)
    return "Results:\n" + "\n".join(lines) if lines else ""


def tail_text(text: str, n: int, tokenizer=None) -> str:
    """The last ``n`` tokens of ``text`` (the tokenizer's, when it is a fast one with offsets; else
    whitespace words), cut at a word start so that at most ``n`` tokens remain."""
    text = text.strip()
    if not text:
        return ""
    starts = None
    if tokenizer is not None and getattr(tokenizer, "is_fast", False):
        offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True,
                            verbose=False)["offset_mapping"]
        starts = [s for s, e in offsets if e > s]
    if starts is None:
        starts = [m.start() for m in re.finditer(r"\S+", text)]
    if len(starts) <= n:
        return text
    start = starts[-n]
    if start > 0 and not text[start - 1].isspace():  # inside a word: move on to the next word
        nxt = re.search(r"\s\S", text[start:])
        start = start + nxt.start() + 1 if nxt else start
    return text[start:].strip()


def _with_documents(context: QueryContext) -> str:
    docs = results_text(context.prior_results)
    reasoning = (context.reasoning or "").strip()
    current = (context.current_reasoning or "").strip()
    if not docs:
        return reasoning
    if current and reasoning.endswith(current):
        before = reasoning[: len(reasoning) - len(current)].strip()
        return "\n\n".join(part for part in (before, docs, current) if part)
    return "\n\n".join(part for part in (docs, reasoning) if part)


def reasoning_text(variant: QueryInput | str, context, tokenizer=None) -> str | None:
    """The text that fills ``Reasoning: ...`` for ``variant``, from a step's context (anything
    :func:`as_context` takes); None for the ``query`` variant. For ``reasoning`` on a plain reasoning
    string this is the string itself, so today's inputs are unchanged."""
    variant = QueryInput.parse(variant)
    context = as_context(context)
    kind = variant.kind
    if kind == "query":
        return None
    if kind == "reasoning":
        return context.reasoning
    if kind == "current_reasoning":
        return context.reasoning if context.current_reasoning is None else context.current_reasoning
    if kind == "prior_queries":
        return "\n".join(q.strip() for q in context.prior_queries or () if q and q.strip())
    if kind == "reasoning_tail":
        return tail_text(context.reasoning or "", variant.tail, tokenizer)
    return _with_documents(context)
