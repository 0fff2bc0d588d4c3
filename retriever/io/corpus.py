"""Corpus readers: JSONL, parquet, BEIR folders and ClimbMix-style shard folders, all streamed.

Every reader yields :class:`Document` records one at a time, so a corpus of any size can be counted,
sharded or encoded in constant memory (:func:`read_corpus` keeps the docids it has seen, to refuse a
repeat; ``unique=False`` and :func:`iter_file` do not).

Checks (the input boundary, :mod:`.validate`): bytes, gzip and JSON through :mod:`.common`; a docid is a
string or an integer without control or line-break characters (a newline in one would shift every later
docid of a BM25 index's ``docids.txt``); text and title are strings. Any failure is a :class:`FormatError`
naming the file and line (parquet: the 1-based row).

Ids: a record's id is taken from ``_id`` | ``docid`` | ``id`` | ``doc_id`` and passed through
:func:`~hopscotch.retriever.io.docids.canonical_docid` (a zero-padded ClimbMix id such as
``shard_00045_06622`` reads as ``shard_00045_6622``). Records without one (ClimbMix shards of ``{text}``)
get ``shard_<5-digit shard index>_<row>``, the row counted from 0 within the shard file and not
zero-padded (already canonical). The shard index is the number a file's name ends in, its value
(:func:`shard_number`: ``part_00012.parquet`` and ``part_12.jsonl`` -> 12). In a folder of shards two files
with one number (``a_45.jsonl``, ``b_045.jsonl``) are a :class:`FormatError` naming both, and so is a file
without a number beside numbered ones; a folder none of whose files has a number is numbered by position
in sorted order (0, 1, ...). A single file without a number (a BEIR ``corpus.jsonl``) is shard 0.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from hopscotch.retriever.errors import FormatError
from hopscotch.retriever.io.common import first_key, parquet_rows, read_jsonl
from hopscotch.retriever.io.docids import canonical_docid
from hopscotch.retriever.io.validate import UniqueIds, check_id, check_text

ID_KEYS = ("_id", "docid", "id", "doc_id")
TEXT_KEYS = ("text", "contents", "content")
CORPUS_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".parquet")


@dataclass(slots=True)
class Document:
    """One corpus entry."""

    docid: str
    title: str
    text: str

    def to_beir(self) -> dict:
        return {"_id": self.docid, "title": self.title, "text": self.text}


def climbmix_id(shard: int, row: int) -> str:
    """The id ClimbMix-style corpora assign from a document's position: ``shard_00003_17``."""
    return f"shard_{shard:05d}_{row}"


def _record_to_document(obj: dict, path, lineno: int | None, shard: int, row: int) -> Document:
    text = first_key(obj, TEXT_KEYS)
    if not isinstance(text, str):
        raise FormatError(path, lineno, "a document with a string 'text' or 'contents' field",
                          f"keys {sorted(obj)[:8]}")
    text = check_text(text, path, lineno, "a document 'text'")
    docid = first_key(obj, ID_KEYS)
    docid = climbmix_id(shard, row) if docid is None else canonical_docid(check_id(docid, path, lineno, "a docid"))
    title = obj.get("title") or ""
    if not isinstance(title, str):
        raise FormatError(path, lineno, "a string 'title'", type(title).__name__)
    return Document(docid, check_text(title, path, lineno, "a string 'title'"), text)


def _iter_jsonl_corpus(path: Path, shard: int) -> Iterator[tuple[int, Document]]:
    for row, (lineno, obj) in enumerate(read_jsonl(path, "a JSON object with 'text'")):
        yield lineno, _record_to_document(obj, path, lineno, shard, row)


def _parquet_columns(names: list[str], path) -> list[str]:
    if not set(names) & set(TEXT_KEYS):
        raise FormatError(path, None, "a parquet column 'text' or 'contents'", f"columns {sorted(names)}")
    return [c for c in (*ID_KEYS, *TEXT_KEYS, "title") if c in names]


def _iter_parquet_corpus(path: Path, shard: int) -> Iterator[tuple[int, Document]]:
    # parquet has no lines: the 1-based row stands in for the line
    for row, obj in enumerate(parquet_rows(path, lambda names: _parquet_columns(names, path))):
        yield row + 1, _record_to_document(obj, path, row + 1, shard, row)


def _numbered_docs(path: Path, shard: int) -> Iterator[tuple[int, Document]]:
    """``(line, document)`` of one corpus file: the JSONL line, or the 1-based parquet row."""
    if path.name.endswith(".parquet"):
        return _iter_parquet_corpus(path, shard)
    return _iter_jsonl_corpus(path, shard)


def iter_file(path: str | os.PathLike, shard: int = 0) -> Iterator[Document]:
    """Stream one corpus file (JSONL, optionally gzipped, or parquet)."""
    return (doc for _, doc in _numbered_docs(Path(path), shard))


def shard_number(name: str) -> int | None:
    """The ClimbMix shard number of a corpus file name: the last integer of its stem (before the first dot),
    by value (``part_00045.jsonl`` and ``b_045.jsonl`` -> 45); None when it holds no digit."""
    nums = re.findall(r"\d+", name.split(".")[0])
    return int(nums[-1]) if nums else None


def shard_files(folder: str | os.PathLike) -> list[tuple[int, Path]]:
    """The corpus files of a shard folder with their shard numbers (module doc), in shard order."""
    folder = Path(folder)
    files = sorted(f for f in folder.iterdir() if f.is_file() and f.name.endswith(CORPUS_SUFFIXES))
    if not files:
        raise FormatError(folder, None, "a folder holding *.jsonl or *.parquet corpus files", "none found")
    numbers = [shard_number(f.name) for f in files]
    if all(n is None for n in numbers):
        return list(enumerate(files))
    if None in numbers:
        unnumbered, numbered = files[numbers.index(None)], next(f for f, n in zip(files, numbers) if n is not None)
        raise FormatError(unnumbered, None, f"a shard number in the file name, like {numbered.name} beside it "
                          "(ClimbMix ids shard_<number>_<row> come from it)", unnumbered.name)
    first: dict[int, Path] = {}
    for n, f in zip(numbers, files):
        if first.setdefault(n, f) != f:
            raise FormatError(f, None, f"a shard number of its own: {first[n].name} and {f.name} are both shard {n} "
                              f"(ids shard_{n:05d}_<row> would clash)")
    return sorted(zip(numbers, files))


def corpus_files(path: str | os.PathLike) -> list[tuple[int, Path]]:
    """Resolve a corpus path to ``[(shard_index, file)]``.

    Accepts a file, a BEIR folder (``corpus.jsonl`` inside) or a folder of shards.
    """
    p = Path(path)
    if not p.exists():
        raise FormatError(p, None, "an existing corpus file or folder", "no such path")
    if p.is_file():
        return [(shard_number(p.name) or 0, p)]
    for name in ("corpus.jsonl", "corpus.jsonl.gz", "corpus.parquet"):
        if (p / name).is_file():
            return [(0, p / name)]
    return shard_files(p)


def read_corpus(path: str | os.PathLike, unique: bool = True) -> Iterator[Document]:
    """Stream every document of a corpus file, BEIR folder or shard folder.

    With ``unique`` (the default) a docid met a second time (canonical: both ClimbMix spellings of one
    document count as one) is a :class:`FormatError` naming the file and line of both; this keeps one
    entry per docid in memory.
    """
    seen = UniqueIds("document ids") if unique else None
    for shard, f in corpus_files(path):
        for lineno, doc in _numbered_docs(f, shard):
            if seen is not None:
                seen.add(doc.docid, f, lineno)
            yield doc


def locate_documents(path: str | os.PathLike, positions) -> dict[int, tuple[Path, int | None]]:
    """``{position: (file, line)}`` of the documents at 0-based ``positions`` of a corpus in reading order (parquet:
    the 1-based row for the line), read up to the last of them (for messages: a repeated docid a build found by
    position)."""
    wanted = set(positions)
    out: dict[int, tuple[Path, int | None]] = {}
    if not wanted:
        return out
    last, position = max(wanted), 0
    for shard, f in corpus_files(path):
        for lineno, _ in _numbered_docs(f, shard):
            if position in wanted:
                out[position] = (f, lineno)
            if position >= last:
                return out
            position += 1
    return out


def count_documents(path: str | os.PathLike) -> int:
    """Count documents without keeping them (constant memory; repeated docids are not looked for)."""
    return sum(1 for _ in read_corpus(path, unique=False))


def load_corpus_dict(path: str | os.PathLike) -> dict[str, Document]:
    """Load a (small) corpus into ``{docid: Document}``; a repeated docid is a :class:`FormatError`."""
    return {doc.docid: doc for doc in read_corpus(path)}
