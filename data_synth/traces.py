"""Agent trace steps ``(question_id, step, reasoning, query)`` from any supported trace file, with the
context fields each format knows (``current_reasoning``, ``prior_queries``, ``prior_results``).

``read_traces(paths)`` detects the format of each file from its first record (IRCoT, Tongyi,
BrowseComp-Plus runs, the world's ``traces.jsonl``, generic JSONL; see :mod:`hopscotch.data_synth.trace_readers`)
unless ``trace_format`` names it. A folder is read file by file in sorted order (``*.jsonl``, and
``*.json`` files holding one run record each, as BrowseComp-Plus run folders do).
``question_only_steps(qa)`` makes the no-trace baseline: each question is its own single query.
``unique_steps(steps)`` passes steps on and refuses a (question, step) met twice, naming both lines: synth
and replay read traces through it, so a duplicated record is never labelled or replayed twice.

Example::

    from hopscotch.data_synth.traces import read_traces
    for step in read_traces(["../shared/data/hotpotqa_ircot/cot_steps.jsonl"]):
        print(step.query_id, step.query)
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from hopscotch.data_synth.trace_readers import READERS, SNIPPETS_FILE, detect_format
from hopscotch.data_synth.trace_step import TraceStep
from hopscotch.retriever.errors import FormatError, UsageError
from hopscotch.retriever.io.agent_runs import read_run_file
from hopscotch.retriever.io.common import read_jsonl

TRACE_FORMATS = ("auto", "ircot", "tongyi", "browsecomp", "world", "generic")


def _trace_files(path: Path) -> list[Path]:
    if not path.exists():
        raise UsageError(f"--traces {path}: no such file or folder")
    if path.is_file():
        return [path]
    files = sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith((".jsonl", ".jsonl.gz", ".json"))
                   and p.name != SNIPPETS_FILE)  # a Tongyi folder's snippets are read by its steps' reader
    if not files:
        raise UsageError(f"--traces {path}: the folder holds no *.jsonl or *.json trace files")
    return files


def _records(path: Path) -> Iterator[tuple[int, dict]]:
    if path.name.endswith(".json"):
        yield 1, read_run_file(path)
        return
    yield from read_jsonl(path, "a JSON trace record")


def _read_file(path: Path, trace_format: str) -> Iterator[TraceStep]:
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


def unique_steps(steps: Iterable[TraceStep]) -> Iterator[TraceStep]:
    """``steps`` as they come; a :class:`FormatError` where a (question, step) appears again, naming the first."""
    seen: dict[str, str] = {}
    for step in steps:
        if step.query_id in seen:
            path, _, line = step.source.rpartition(":")
            raise FormatError(path or step.source, int(line) if line.isdigit() else None,
                              f"a unique (question, step); {step.query_id} was already read at {seen[step.query_id]}")
        seen[step.query_id] = step.source
        yield step


def question_only_steps(questions) -> Iterator[TraceStep]:
    """The standard (non-reasoning) baseline: each question is a single step 0, reasoning empty."""
    for q in questions:
        yield TraceStep(q.qid, 0, "", q.text.strip(), source="question")
