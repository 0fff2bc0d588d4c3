"""TREC run files: ``qid Q0 docid rank score tag``, read and written (whole, or streamed with :class:`RunWriter`).

A run line carries no quoting, so ids and the tag must hold no whitespace or control character and a
score must be finite: the reader refuses such a line with a :class:`FormatError` naming file and line
(also a non-integer or negative rank), and the writer refuses to write one (:class:`UsageError`) rather
than produce a line that reads back shifted.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from hopscotch.retriever.errors import FormatError, UsageError
from hopscotch.retriever.io.atomic import check_target
from hopscotch.retriever.io.common import atomic_write, iter_lines
from hopscotch.retriever.io.docids import canonical_docid
from hopscotch.retriever.io.validate import check_id, count, finite_number

if TYPE_CHECKING:
    from typing_extensions import Self

Run = dict[str, dict[str, float]]


def read_run(path: str | os.PathLike) -> Run:
    """Read a TREC run into ``{qid: {docid: score}}``.

    Docids are read through :func:`~hopscotch.retriever.io.docids.canonical_docid`; a document listed
    twice for one query (e.g. in both ClimbMix spellings) keeps its highest score.
    """
    run: Run = {}
    for lineno, line in iter_lines(path):
        parts = line.split()
        if len(parts) != 6:
            raise FormatError(path, lineno, "6 columns 'qid Q0 docid rank score tag'", line)
        qid, _, docid, rank, score, _ = parts
        qid = check_id(qid, path, lineno, "a query id in column 1", whitespace=False)
        docid = check_id(docid, path, lineno, "a docid in column 3", whitespace=False)
        count(rank, path, lineno, "a rank in column 4")
        value = finite_number(score, path, lineno, "a numeric score in column 5")
        docs = run.setdefault(qid, {})
        docid = canonical_docid(docid)
        if docid not in docs or value > docs[docid]:
            docs[docid] = value
    return run


def ranked(docs: dict[str, float]) -> list[tuple[str, float]]:
    """Documents by descending score, ties broken by docid for determinism."""
    return sorted(docs.items(), key=lambda kv: (-kv[1], kv[0]))


class RunWriter:
    """Stream a run to ``path`` one query at a time; the file appears (atomically) only when the ``with``
    block ends without an exception. The path is checked when the writer is made
    (:func:`~hopscotch.retriever.io.atomic.check_target`: a device node, FIFO, socket, folder or unwritable
    parent is a :class:`UsageError` before any searching).

    A searcher's hits are written as they come (``for qid, hits in iter_search(searcher, queries, k=100)``):

    >>> with RunWriter("bm25.trec", tag="bm25") as out:
    ...     out.write("q1", {"d1": 2.5, "d2": 1.25})      # {docid: score}
    ...     out.write("q2", [("d3", 0.5)])                # or [(docid, score), ...]
    >>> print(open("bm25.trec").read())
    q1 Q0 d1 1 2.500000 bm25
    q1 Q0 d2 2 1.250000 bm25
    q2 Q0 d3 1 0.500000 bm25
    <BLANKLINE>
    """

    def __init__(self, path: str | os.PathLike, tag: str = "hopscotch", k: int | None = None):
        check_target(path)
        self.path, self.tag, self.k = path, tag, k
        self._context = self._fh = None

    def __enter__(self) -> Self:
        self._context = atomic_write(self.path)
        self._fh = self._context.__enter__()
        return self

    def __exit__(self, *exc) -> bool | None:
        context, self._context, self._fh = self._context, None, None
        return context.__exit__(*exc)

    def write(self, qid: str, docs: dict[str, float] | Iterable[tuple[str, float]]) -> None:
        """One query's documents, ranked by descending score (ties by docid), ranks from 1, cut to ``k``.

        A qid, docid or tag with whitespace or a control character, or a score that is not a finite
        number, raises :class:`UsageError` before anything of the query is written.
        """
        if self._fh is None:
            raise RuntimeError("RunWriter.write outside its 'with' block")
        qid = self._column(qid, "query id")
        tag = self._column(self.tag, "run tag")
        scores: dict[str, float] = {}
        for docid, score in dict(docs).items():
            docid = self._column(docid, f"docid (query {qid})")
            if isinstance(score, bool) or not isinstance(score, numbers.Real) or not math.isfinite(score):
                raise UsageError(f"{self.path}: cannot write a TREC run line for query {qid}, docid {docid}: "
                                 f"the score {score!r} is not a finite number")
            scores[docid] = float(score)
        self._fh.write("".join(f"{qid} Q0 {docid} {rank} {score:.6f} {tag}\n"
                               for rank, (docid, score) in enumerate(ranked(scores)[:self.k], start=1)))

    def _column(self, value, what: str) -> str:
        """``value`` as one TREC column, or :class:`UsageError` (what :func:`read_run` checks, at write time)."""
        try:
            return check_id(value, self.path, None, f"a {what}", whitespace=False)
        except FormatError as exc:
            raise UsageError(f"{self.path}: cannot write a TREC run line: expected {exc.expected} "
                             f"(got {exc.got!r})") from None


def write_run(path: str | os.PathLike, run: Run, tag: str = "hopscotch", k: int | None = None) -> None:
    """Atomically write a run as TREC 6-column lines, ranks from 1."""
    with RunWriter(path, tag=tag, k=k) as out:
        for qid, docs in run.items():
            out.write(qid, docs)
