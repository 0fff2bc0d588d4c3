"""How queries and documents become encoder input text.

A reasoning-aware query follows AgentIR's convention::

    {instruction}Reasoning: {reasoning or 'Empty'}\\n\\nQuery: {query}

Documents encode as ``title + " " + text`` (just ``text`` when there is no title).
"""

from __future__ import annotations

EMPTY_REASONING = "Empty"


def format_query(query: str, reasoning: str | None = None, instruction: str = "",
                 reasoning_aware: bool = True) -> str:
    """Encoder input for a query; plain ``instruction + query`` when ``reasoning_aware`` is False."""
    if not reasoning_aware:
        return f"{instruction}{query}"
    reasoning = reasoning.strip() if reasoning and reasoning.strip() else EMPTY_REASONING
    return f"{instruction}Reasoning: {reasoning}\n\nQuery: {query}"


def format_document(title: str | None, text: str) -> str:
    """Encoder input for a document: ``title + " " + text``."""
    return f"{title} {text}" if title else text
