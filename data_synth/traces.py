"""Agent trace steps ``(question_id, step, reasoning, query)`` from any supported trace file.

``read_traces(paths)`` detects the format of each file from its first record (IRCoT, Tongyi,
BrowseComp-Plus runs, the world's ``traces.jsonl``, generic JSONL; see :mod:`data_synth.trace_readers`)
unless ``trace_format`` names it. A folder is read file by file in sorted order (``*.jsonl``, and
``*.json`` files holding one run record each, as BrowseComp-Plus run folders do).
``question_only_steps(qa)`` makes the no-trace baseline: each question is its own single query.

Example::

    from data_synth.traces import read_traces
    for step in read_traces(["../shared/data/hotpotqa_ircot/cot_steps.jsonl"]):
        print(step.query_id, step.query)
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from retriever.errors import FormatError, UsageError
from retriever.formats import read_jsonl

TRACE_FORMATS = ("auto", "ircot", "tongyi", "browsecomp", "world", "generic")


@dataclass(slots=True)
class TraceStep:
    """One search step of an agent: the query it issued and the reasoning before it.

    ``gold_docids`` is set when the trace itself knows the step's gold documents (the embedded world);
    ``failed`` when the original tool call failed (an invalid call the agent retried);
    ``source`` is ``file:line`` for messages.
    """

    question_id: str
    step: int
    reasoning: str
    query: str
    gold_docids: tuple[str, ...] | None = None
    failed: bool = False
    source: str = ""

    @property
    def query_id(self) -> str:
        return f"{self.question_id}_turn{self.step}"


def _trace_files(path: Path) -> list[Path]:
    if not path.exists():
        raise UsageError(f"--traces {path}: no such file or folder")
    if path.is_file():
        return [path]
    files = sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith((".jsonl", ".jsonl.gz", ".json")))
    if not files:
        raise UsageError(f"--traces {path}: the folder holds no *.jsonl or *.json trace files")
    return files


def _records(path: Path) -> Iterator[tuple[int, dict]]:
    if path.name.endswith(".json"):
        try:
            obj = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise FormatError(path, exc.lineno, "one JSON run record", f"invalid JSON: {exc.msg}") from None
        if not isinstance(obj, dict):
            raise FormatError(path, 1, "one JSON run record (an object)", type(obj).__name__)
        yield 1, obj
        return
    yield from read_jsonl(path, "a JSON trace record")


def _read_file(path: Path, trace_format: str) -> Iterator[TraceStep]:
    from data_synth.trace_readers import READERS, detect_format

    records = _records(path)
    first = next(records, None)
    if first is None:
        return
    fmt = trace_format
    if fmt == "auto":
        fmt = detect_format(first[1])
        if fmt is None:
            raise FormatError(path, first[0], "a trace record of a known format: IRCoT {qid, cumulative_cot, "
                              "new_sentence}, Tongyi {query_id, search_query}, BrowseComp-Plus {query_id, "
                              "result}, or {question_id, reasoning, query}", f"keys {sorted(first[1])[:10]}")

    def chained():
        yield first
        yield from records

    yield from READERS[fmt](chained(), path)


def read_traces(paths: Iterable[str | os.PathLike], trace_format: str = "auto") -> Iterator[TraceStep]:
    """Stream the steps of every trace file in order; raises FormatError naming file and line."""
    if trace_format not in TRACE_FORMATS:
        raise UsageError(f"unknown trace format {trace_format!r}; choose from {', '.join(TRACE_FORMATS)}")
    for path in paths:
        for f in _trace_files(Path(path)):
            yield from _read_file(f, trace_format)


def question_only_steps(questions) -> Iterator[TraceStep]:
    """The standard (non-reasoning) baseline: each question is a single step 0, reasoning empty."""
    for q in questions:
        yield TraceStep(q.qid, 0, "", q.text.strip(), source="question")
