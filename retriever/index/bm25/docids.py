"""The docids of a disk BM25 index folder, on disk: row -> docid and docid -> row without holding them in RAM.

Files (rows in corpus order; :mod:`hopscotch.retriever.index.bm25.disk` owns the folder)::

    docids.txt          one docid a line (as the bm25s backend's folder has it)
    docids.offsets      little-endian uint64: the byte offset of each line, then the file's size (N + 1 entries)
    docids.hashes       little-endian uint64: each row's docid hash (:func:`~hopscotch.retriever.io.docids.docid_hash`)
    lookup_hashes.npy   the hashes sorted; lookup_rows.npy: the row of each (docid -> row by bisection)

A build appends batches (:class:`DocidAppender`; :meth:`~DocidAppender.truncate` cuts the files back to the rows a
resumed build found committed) and sorts the lookup when it is done (:func:`finish_lookup`, which refuses a docid
met twice). Docids never hold a line break: the corpus readers refuse control characters in ids.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from hopscotch.retriever.errors import FormatError, UsageError
from hopscotch.retriever.index.layout import save_npy
from hopscotch.retriever.io.corpus import locate_documents
from hopscotch.retriever.io.docids import docid_hash

DOCIDS_FILE = "docids.txt"
OFFSETS_FILE = "docids.offsets"
HASHES_FILE = "docids.hashes"
LOOKUP_HASHES, LOOKUP_ROWS = "lookup_hashes.npy", "lookup_rows.npy"
_U64 = np.dtype("<u8")


class DocidAppender:
    """Appends docids batch by batch to a folder's docid files (made when missing)."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        offsets = self.folder / OFFSETS_FILE
        if not offsets.exists() or offsets.stat().st_size < _U64.itemsize:
            for name in (DOCIDS_FILE, HASHES_FILE):
                (self.folder / name).write_bytes(b"")
            offsets.write_bytes(np.zeros(1, dtype=_U64).tobytes())

    @property
    def rows(self) -> int:
        """Rows whose docid, hash and offset are all written."""
        return min((self.folder / OFFSETS_FILE).stat().st_size // _U64.itemsize - 1,
                   (self.folder / HASHES_FILE).stat().st_size // _U64.itemsize)

    def truncate(self, rows: int) -> None:
        """Keep the first ``rows`` rows (what a resumed build found committed); UsageError if fewer are written."""
        if rows > self.rows:
            raise UsageError(f"{self.folder}: the index holds {rows:,} documents but only {self.rows:,} docids were "
                             "written; the partial build is damaged: rerun with --overwrite")
        offsets = np.fromfile(self.folder / OFFSETS_FILE, dtype=_U64, count=rows + 1)
        os.truncate(self.folder / OFFSETS_FILE, (rows + 1) * _U64.itemsize)
        os.truncate(self.folder / HASHES_FILE, rows * _U64.itemsize)
        os.truncate(self.folder / DOCIDS_FILE, int(offsets[rows]))

    def append(self, docids: Sequence[str]) -> None:
        """Write a batch's docids, hashes and offsets and sync them to disk (before the index commits them)."""
        if not docids:
            return
        raw = [d.encode("utf-8") + b"\n" for d in docids]
        start = int(np.fromfile(self.folder / OFFSETS_FILE, dtype=_U64, offset=self.rows * _U64.itemsize,
                                count=1)[0])
        ends = start + np.cumsum([len(r) for r in raw], dtype=np.uint64)
        hashes = np.fromiter((docid_hash(r[:-1]) for r in raw), dtype=_U64, count=len(raw))
        for name, data in ((DOCIDS_FILE, b"".join(raw)), (HASHES_FILE, hashes.tobytes()),
                           (OFFSETS_FILE, ends.astype(_U64).tobytes())):
            with open(self.folder / name, "ab") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())


def repeated_docid(docid: str, first: int, second: int, corpus: str | os.PathLike = "") -> FormatError:
    """The refusal of ``docid`` met at corpus positions ``first`` and ``second`` (0-based, in reading order): at the
    file and line of each when ``corpus`` is a corpus path (found by reading up to the second), else by position."""
    where = locate_documents(corpus, [first, second]) if corpus and Path(corpus).exists() else {}
    if second in where:
        (path_a, line_a), (path_b, line_b) = where[first], where[second]
        at = f"line {line_a}" if path_a == path_b else f"{path_a}:{line_a}"
        return FormatError(path_b, line_b, f"unique document ids ({docid!r} is already at {at})")
    return FormatError(corpus or "the corpus", None, "unique document ids",
                       f"{docid!r} is document {first + 1:,} and {second + 1:,}")


def finish_lookup(folder: str | os.PathLike, corpus: str | os.PathLike = "") -> int:
    """Sort the docid hashes into the lookup (``lookup_*.npy``); a repeated docid is a FormatError at the file and
    line of both (:func:`repeated_docid`). Returns the number of rows. Memory: 16 bytes a document while sorting."""
    folder = Path(folder)
    hashes = np.fromfile(folder / HASHES_FILE, dtype=_U64)
    order = np.argsort(hashes, kind="stable")
    hashes = hashes[order]
    same = np.nonzero(hashes[1:] == hashes[:-1])[0]
    if len(same):
        table = DocidTable(folder, len(hashes))
        for i in same:
            a, b = table[int(order[i])], table[int(order[i + 1])]
            if a == b:
                raise repeated_docid(a, *sorted((int(order[i]), int(order[i + 1]))), corpus)
    save_npy(folder / LOOKUP_HASHES, hashes)
    save_npy(folder / LOOKUP_ROWS, order.astype(np.int64))
    return len(hashes)


class DocidTable(Sequence):
    """The docids of a finished folder as a read-only sequence (memory-mapped: nothing per document in RAM)."""

    def __init__(self, folder: str | os.PathLike, num_docs: int | None = None):
        self.folder = Path(folder)
        try:
            self._offsets = np.memmap(self.folder / OFFSETS_FILE, dtype=_U64, mode="r")
            size = (self.folder / DOCIDS_FILE).stat().st_size
        except (OSError, ValueError) as exc:
            raise UsageError(f"{self.folder}: no readable docid table ({OFFSETS_FILE}, {DOCIDS_FILE}): {exc}; "
                             "rebuild the index with 'hopscotch bm25-index'") from None
        self._n = len(self._offsets) - 1
        if (num_docs is not None and self._n != num_docs) or int(self._offsets[-1]) != size:
            raise UsageError(f"{self.folder}: the docid table does not match the index ({self._n:,} docids, "
                             f"{num_docs or 0:,} documents); rebuild it with 'hopscotch bm25-index --overwrite'")
        self._fh = open(self.folder / DOCIDS_FILE, "rb")  # noqa: SIM115 - mapped for the table's life
        self._text = mmap.mmap(self._fh.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        self._lookup: tuple[np.ndarray, np.ndarray] | None = None

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, row):
        if isinstance(row, slice):
            return [self[i] for i in range(*row.indices(self._n))]
        row = int(row)
        if row < 0:
            row += self._n
        if not 0 <= row < self._n:
            raise IndexError(row)
        return self.many([row])[0]

    def many(self, rows) -> list[str]:
        """The docids of ``rows`` (a sequence of row numbers, each in range); a line the offsets do not frame (a
        damaged table the checks on open did not sample) is a one-line UsageError."""
        rows = np.asarray(rows, dtype=np.int64)
        text = self._text
        try:
            out = [text[a:b - 1].decode("utf-8") if b > a else None
                   for a, b in zip(self._offsets[rows].tolist(), self._offsets[rows + 1].tolist())]
        except UnicodeDecodeError:
            out = [None]
        if None in out:
            raise UsageError(f"{self.folder / OFFSETS_FILE}: its offsets do not frame the lines of {DOCIDS_FILE}; "
                             "rebuild the index with 'hopscotch bm25-index --overwrite'")
        return out

    def __iter__(self) -> Iterator[str]:
        with open(self.folder / DOCIDS_FILE, encoding="utf-8") as fh:
            for line in fh:
                yield line[:-1]

    def row(self, docid: str) -> int | None:
        """The row of ``docid`` (None: not in the index), by bisection over the sorted hashes."""
        if self._lookup is None:
            self._lookup = (np.load(self.folder / LOOKUP_HASHES, mmap_mode="r"),
                            np.load(self.folder / LOOKUP_ROWS, mmap_mode="r"))
        hashes, rows = self._lookup
        h = np.uint64(docid_hash(docid))
        i = int(np.searchsorted(hashes, h, side="left"))
        while i < len(hashes) and hashes[i] == h:
            if self[int(rows[i])] == docid:
                return int(rows[i])
            i += 1
        return None

    def close(self) -> None:
        if isinstance(self._text, mmap.mmap):
            self._text.close()
        self._fh.close()
