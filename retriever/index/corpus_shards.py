"""Cutting a corpus into position-based shards and giving each rank a contiguous block of them.

Shard ``i`` is the corpus documents at positions ``[i * shard_size, (i + 1) * shard_size)``. With one
process the corpus is simply streamed. With several, the documents of every corpus file are counted
first (parquet: from the file's metadata; JSONL: non-blank lines, no JSON parsing), the counts are cached
in ``corpus_counts.json``, and rank ``r`` of ``W`` takes shards ``[r * S // W, (r + 1) * S // W)``: it opens
only the files that overlap its block, so each rank parses about ``1 / W`` of the corpus.

A corpus folder is read as ``counts = file_row_counts("climbmix/", cache="idx/corpus_counts.json")``, then
``for shard, docs, size in iter_shards("climbmix/", 1_000_000, block, counts): ...``; the blocks of the ranks:

>>> num_shards(2_500_000, 1_000_000)
3
>>> rank_block(num_shards(8_000_000, 1_000_000), rank=3, world_size=8), rank_block(3, rank=1, world_size=2)
(range(3, 4), range(1, 3))
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator
from pathlib import Path

from hopscotch.retriever.io.common import write_json
from hopscotch.retriever.io.corpus import Document, corpus_files, iter_file


def num_shards(num_docs: int, shard_size: int) -> int:
    return -(-num_docs // shard_size)


def rank_block(total_shards: int, rank: int, world_size: int) -> range:
    """The contiguous shards of ``rank``; blocks differ in size by at most one shard."""
    return range(rank * total_shards // world_size, (rank + 1) * total_shards // world_size)


def count_file_rows(path: str | os.PathLike) -> int:
    """Documents in one corpus file, as :func:`hopscotch.retriever.io.corpus.iter_file` would yield them."""
    path = Path(path)
    if path.name.endswith(".parquet"):
        import pyarrow.parquet as pq

        return pq.ParquetFile(path).metadata.num_rows
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        return sum(1 for line in fh if line.strip())


def file_row_counts(corpus: str | os.PathLike, cache: str | os.PathLike | None = None) -> list[int]:
    """Per-file document counts of a corpus, in :func:`corpus_files` order (cached by path, size, mtime)."""
    files = corpus_files(corpus)
    key = [[str(Path(p).resolve()), Path(p).stat().st_size, Path(p).stat().st_mtime_ns] for _, p in files]
    if cache is not None and Path(cache).is_file():
        try:
            saved = json.loads(Path(cache).read_text())
            if saved.get("files") == key:
                return saved["counts"]
        except (json.JSONDecodeError, KeyError, AttributeError):
            pass
    counts = [count_file_rows(p) for _, p in files]
    if cache is not None:
        write_json(cache, {"files": key, "counts": counts})
    return counts


def _positioned(corpus, shard_size: int, block: range | None, counts: list[int] | None
                ) -> Iterator[tuple[int, Document]]:
    """``(position, document)`` in corpus order, limited to ``block``'s positions when counts are known."""
    lo = 0 if block is None else block.start * shard_size
    hi = None if block is None else block.stop * shard_size
    pos = 0
    for i, (shard_index, path) in enumerate(corpus_files(corpus)):
        n = counts[i] if counts is not None else None
        if n is not None and (pos + n <= lo or (hi is not None and pos >= hi)):
            pos += n  # a file wholly outside this rank's block is never opened
            continue
        for doc in iter_file(path, shard_index):
            if hi is not None and counts is not None and pos >= hi:
                break
            if pos >= lo:
                yield pos, doc
            pos += 1
        if counts is not None:
            pos = sum(counts[:i + 1])


def iter_shards(corpus, shard_size: int, block: range | None = None, counts: list[int] | None = None,
                wanted=lambda shard: True) -> Iterator[tuple[int, list[Document] | None, int]]:
    """Yield ``(shard, documents, size)`` for the shards of ``block`` (all shards when None) in order;
    ``documents`` is None for a shard ``wanted(shard)`` declines (its documents are read, not kept)."""
    current, buf, keep, size = None, [], False, 0
    for pos, doc in _positioned(corpus, shard_size, block, counts):
        shard = pos // shard_size
        if shard != current:
            if current is not None:
                yield current, (buf if keep else None), size
            current, buf, keep, size = shard, [], wanted(shard), 0
        size += 1
        if keep:
            buf.append(doc)
    if current is not None:
        yield current, (buf if keep else None), size
