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
``reasoning_focus:N``  reasoning selection instead of a length gate: the reasoning's sentences that share
                       the most content words with the query (and, less, with the task statement), newest
                       first on ties, kept in their order within ``N`` tokens (counted as for
                       ``reasoning_tail``); see :func:`focus_text`
``with_documents``     the previous call's results (``title: snippet`` lines, each snippet cut to
                       :data:`SNIPPET_CHARS`) spliced into the reasoning where they arrived: before
                       ``current_reasoning`` when the reasoning ends with it, else before the reasoning
=====================  ===============================================================================

Every variant but ``query`` is written in AgentIR's template
``{instruction}Reasoning: {text or 'Empty'}\\n\\nQuery: {query}`` (see
:mod:`~hopscotch.retriever.model.query_template`, which also cuts ``text`` from the left to fit the
query length). :func:`reasoning_text` builds ``text`` for a variant from a step's context fields
(:class:`QueryContext`: ``reasoning``, ``current_reasoning``, ``prior_queries``, ``prior_results``) and,
for ``reasoning_focus``, the query; the trainer's collator, the dense encoder and searcher and DR-Synth
all go through it.

Without a tokenizer (``reasoning_text(variant, context, tokenizer)``), tokens are whitespace words:

>>> QueryInput.parse("reasoning_tail:4")
QueryInput(kind='reasoning_tail', tail=4)
>>> reasoning_text("reasoning_tail:4", {"reasoning": "The film came out in 1997 and Korine directed it."})
'and Korine directed it.'
>>> reasoning_text("query", {"reasoning": "The film came out in 1997."}) is None
True
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hopscotch.retriever.errors import UsageError

#: the variant names; ``reasoning_tail`` and ``reasoning_focus`` are written ``NAME:N``
KINDS = ("query", "prior_queries", "reasoning", "current_reasoning", "reasoning_tail", "reasoning_focus",
         "with_documents")
#: the variants that take a token budget ``:N``
BUDGETED = ("reasoning_tail", "reasoning_focus")
ALLOWED = ("query, prior_queries, reasoning, current_reasoning, reasoning_tail:N (N >= 1), "
           "reasoning_focus:N (N >= 1), with_documents")
#: characters of each previous result's snippet that ``with_documents`` keeps (cut at a word boundary)
SNIPPET_CHARS = 300


@dataclass(frozen=True, slots=True)
class QueryInput:
    """A parsed variant: ``kind`` (one of :data:`KINDS`) and, for ``reasoning_tail`` and ``reasoning_focus``
    (:data:`BUDGETED`), their token budget ``N`` as ``tail``."""

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
        if kind in BUDGETED and sep:
            arg = arg.strip()
            if arg.isdigit() and int(arg) >= 1:
                return cls(kind, int(arg))
        elif kind in KINDS and kind not in BUDGETED and not sep:
            return cls(kind)
        raise UsageError(f"{where}: unknown query input {value!r}; use one of {ALLOWED}")

    def __str__(self) -> str:
        return f"{self.kind}:{self.tail}" if self.kind in BUDGETED else self.kind

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


def as_context(value) -> QueryContext:
    """A :class:`QueryContext` from None, a reasoning string, a mapping with the context keys, or any object with
    those attributes (a :class:`~hopscotch.retriever.io.queries.Query`, TrainingTuple, TraceStep)."""
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


def _token_starts(text: str, tokenizer=None) -> list[int]:
    """Where each token of ``text`` starts: the tokenizer's tokens when it is a fast one with offsets, else
    whitespace words."""
    if tokenizer is not None and getattr(tokenizer, "is_fast", False):
        offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True,
                            verbose=False)["offset_mapping"]
        return [s for s, e in offsets if e > s]
    return [m.start() for m in re.finditer(r"\S+", text)]


def tail_text(text: str, n: int, tokenizer=None) -> str:
    """The last ``n`` tokens of ``text`` (the tokenizer's, when it is a fast one with offsets; else
    whitespace words), cut at a word start so that at most ``n`` tokens remain."""
    text = text.strip()
    if not text:
        return ""
    if tokenizer is None or not getattr(tokenizer, "is_fast", False):   # whitespace words: read from the end only
        parts = text.rsplit(None, n)
        return text if len(parts) <= n else text[len(parts[0]):].strip()
    starts = _token_starts(text, tokenizer)
    if len(starts) <= n:
        return text
    start = starts[-n]
    if start > 0 and not text[start - 1].isspace():  # inside a word: move on to the next word
        nxt = re.search(r"\s\S", text[start:])
        start = start + nxt.start() + 1 if nxt else start
    return text[start:].strip()


#: words that say nothing about what a sentence is about (``reasoning_focus``): common English ones and an
#: agent's own ``answer`` / ``search`` / ``question`` talk; words under 3 letters go anyway
FOCUS_STOPWORDS = frozenset("""
about above after again against all also although among and another any anything are aren around because
been before being below between both but can cannot could couldn did didn does doesn doing done don down
during each either else even every few for from further get gets got had hadn has hasn have haven having
her here hers herself him himself his how however into isn its itself just let lets like maybe might mine
more most much must need needs nor not now off once one only other others our ours out over own per
perhaps probably same shall she should shouldn since some something still such than that the their theirs
them themselves then there these they thing things think this those though through thus too under until
upon very was wasn way well were weren what whatever when where whether which while who whom whose why
will with within without won would wouldn yes yet you your yours okay wait hmm actually
answer answers question questions search searches searching find look know recall check try use
""".split())
#: what a content word shared with the task statement adds to a sentence's score (one shared with the query: 1)
FOCUS_QUESTION_WEIGHT = 0.5


def _focus_stem(word: str) -> str:
    """A light suffix stripping, so that ``films`` / ``film`` and ``directed`` / ``directing`` / ``direct`` meet."""
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) > 3:
        word = word[:-1]
    if word.endswith("ing") and len(word) > 5:
        word = word[:-3]
    elif word.endswith("ed") and len(word) > 4:
        word = word[:-2]
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    if word.endswith("y") and len(word) > 3:
        word = word[:-1] + "i"
    return word


def _focus_words(text: str) -> set[str]:
    """The stemmed content words of ``text``: lower case, letters and digits, 3+ long, no stopwords."""
    return {_focus_stem(w) for w in re.findall(r"[^\W_]+", text.lower()) if len(w) >= 3 and w not in FOCUS_STOPWORDS}


def _focus_sentences(text: str) -> list[tuple[int, int, int]]:
    """``(start, end, line)`` of each sentence of ``text``: lines split at ``.``, ``!`` or ``?`` (with any
    closing quotes or brackets) followed by whitespace; a line without one is one sentence."""
    sentence = re.compile(r"\S.*?(?:[.!?]+[\"'\u201d\u2019)\]]*(?=\s|$)|$)")
    out = []
    for number, line in enumerate(re.finditer(r"[^\n]+", text)):
        for m in sentence.finditer(text, line.start(), line.end()):
            end = m.start() + len(m.group().rstrip())
            if end > m.start():
                out.append((m.start(), end, number))
    return out


def focus_text(text: str, n: int, query: str | None = None, tokenizer=None, question: str | None = None) -> str:
    """``reasoning_focus:N``: the sentences of ``text`` most related to ``query`` that fit ``n`` tokens.

    ``text`` is split into lines and each line into sentences (:func:`_focus_sentences`). A sentence scores
    1 per distinct content word (lower case, 3+ letters, not in :data:`FOCUS_STOPWORDS`, lightly stemmed)
    it shares with ``query``, plus :data:`FOCUS_QUESTION_WEIGHT` per one it shares with the task statement:
    ``question`` when given, else the reasoning's first sentence (which restates the question in agents'
    traces; that sentence itself then scores by the query alone). The newest sentence is taken first if it
    fits; then the others by score, newest first on ties (so sentences sharing nothing come last, newest
    first), each kept while the total stays within ``n`` tokens (the tokenizer's, when it is a fast one with
    offsets; else whitespace words, as :func:`tail_text` counts). The kept sentences are written in their
    order, joined by a space within a line and a newline across lines. A ``text`` of at most ``n`` tokens
    comes back whole; when no sentence fits, this is :func:`tail_text`.
    """
    text = text.strip()
    if not text:
        return ""
    starts = _token_starts(text, tokenizer)
    if len(starts) <= n:
        return text
    units = _focus_sentences(text)
    counts = [0] * len(units)
    j = 0
    for s in starts:  # each token to the sentence it starts in (whitespace tokens to the one before)
        while j + 1 < len(units) and units[j + 1][0] <= s:
            j += 1
        counts[j] += 1
    asked = _focus_words(query or "")
    task = _focus_words(question) if question else _focus_words(text[units[0][0]:units[0][1]])
    scores = []
    for i, (a, b, _) in enumerate(units):
        words = _focus_words(text[a:b])
        score = float(len(words & asked))
        if question or i > 0:
            score += FOCUS_QUESTION_WEIGHT * len(words & task)
        scores.append(score)
    newest = len(units) - 1
    order = [newest] + sorted(range(newest), key=lambda i: (-scores[i], -i))
    kept, used = [], 0
    for i in order:
        if used + counts[i] <= n:
            kept.append(i)
            used += counts[i]
    while kept:
        parts, line = [], None
        for i in sorted(kept):
            a, b, number = units[i]
            if parts:
                parts.append(" " if number == line else "\n")
            parts.append(text[a:b])
            line = number
        out = "".join(parts)
        if len(_token_starts(out, tokenizer)) <= n:  # joining may tokenize differently: check, drop the last kept
            return out
        kept.pop()
    return tail_text(text, n, tokenizer)


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


def reasoning_text(variant: QueryInput | str, context, tokenizer=None, *, query: str | None = None) -> str | None:
    """The text that fills ``Reasoning: ...`` for ``variant``, from a step's context (anything
    :func:`as_context` takes) and, for ``reasoning_focus``, the step's ``query``; None for the ``query``
    variant. For ``reasoning`` on a plain reasoning string this is the string itself, so today's inputs are
    unchanged."""
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
    if kind == "reasoning_focus":
        return focus_text(context.reasoning or "", variant.tail, query, tokenizer,
                          question=getattr(context, "question", None))
    return _with_documents(context)


def searcher_query_input(given: str | None, model_variant: str | None) -> QueryInput:
    """The variant of reasoning-aware queries: ``given`` (``--query-input``), else the model's own; a model
    without one, or whose own is ``query``, gets ``reasoning`` (``--reasoning`` asks for the template)."""
    if given is not None:
        return QueryInput.parse(given, "--query-input")
    variant = QueryInput.parse(model_variant) if model_variant else REASONING
    return variant if variant.uses_reasoning else REASONING
