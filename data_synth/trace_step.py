"""One search step of an agent trace: what every trace reader yields and DR-Synth consumes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class TraceStep:
    """One search step of an agent: the query it issued and the reasoning before it.

    ``reasoning`` is the full reasoning so far; the other context fields, None when the trace does not
    say, are ``current_reasoning`` (written since the last tool result), ``prior_queries`` (the
    trajectory's earlier queries) and ``prior_results`` (the previous call's results as
    ``{"title", "snippet"}`` dicts); which of them the encoder sees is the query input variant
    (:mod:`hopscotch.retriever.model.query_input`). ``gold_docids`` is set when the trace itself knows the
    step's gold documents (the embedded world); ``failed`` when the original tool call failed (an invalid
    call the agent retried); ``source`` is ``file:line`` for messages.
    """

    question_id: str
    step: int
    reasoning: str
    query: str
    gold_docids: tuple[str, ...] | None = None
    failed: bool = False
    source: str = ""
    current_reasoning: str | None = None
    prior_queries: tuple[str, ...] | None = None
    prior_results: tuple[dict, ...] | None = None

    @property
    def query_id(self) -> str:
        return f"{self.question_id}_turn{self.step}"
