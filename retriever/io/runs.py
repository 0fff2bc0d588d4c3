"""TREC run files: ``qid Q0 docid rank score tag``, read and written."""

from __future__ import annotations

import os

from hopscotch.retriever.errors import FormatError
from hopscotch.retriever.io.common import atomic_write, iter_lines

Run = dict[str, dict[str, float]]


def read_run(path: str | os.PathLike) -> Run:
    """Read a TREC run into ``{qid: {docid: score}}``."""
    run: Run = {}
    for lineno, line in iter_lines(path):
        parts = line.split()
        if len(parts) != 6:
            raise FormatError(path, lineno, "6 columns 'qid Q0 docid rank score tag'", line)
        qid, _, docid, _, score, _ = parts
        try:
            run.setdefault(qid, {})[docid] = float(score)
        except ValueError:
            raise FormatError(path, lineno, "a numeric score in column 5", score) from None
    return run


def ranked(docs: dict[str, float]) -> list[tuple[str, float]]:
    """Documents by descending score, ties broken by docid for determinism."""
    return sorted(docs.items(), key=lambda kv: (-kv[1], kv[0]))


def write_run(path: str | os.PathLike, run: Run, tag: str = "hopscotch", k: int | None = None) -> None:
    """Atomically write a run as TREC 6-column lines, ranks from 1."""
    with atomic_write(path) as fh:
        for qid, docs in run.items():
            for rank, (docid, score) in enumerate(ranked(docs)[:k], start=1):
                fh.write(f"{qid} Q0 {docid} {rank} {score:.6f} {tag}\n")
