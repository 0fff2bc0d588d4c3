"""An on-disk document store beside the shards: fetch any document by docid or row without RAM.

Each shard keeps its documents as JSON lines (``shard_XXXXX.docs.jsonl``) plus an ``int64`` array of
line offsets (``shard_XXXXX.offsets.npy``), so a row is one ``pread``. A docid is found through
``lookup/hashes.npy`` (sorted 64-bit BLAKE2b hashes of every docid) and ``lookup/rows.npy`` (the global
row of each), searched by bisection on memory maps: 16 bytes per document on disk, nothing in RAM.

Example (not run: it needs an index folder)::

    store = DocStore("index_dir")
    store.get("ic00017")          # Document(docid='ic00017', title=..., text=...) or None
    store.get_row(42)             # by global row
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import numpy as np

from hopscotch.retriever.errors import FormatError, UsageError
from hopscotch.retriever.index.layout import LOOKUP_DIR, IndexMeta, ShardIds, load_shard_ids, save_npy, shard_file
from hopscotch.retriever.io.corpus import Document, load_corpus_dict
from hopscotch.retriever.io.docids import docid_hash
from hopscotch.retriever.io.progress import progress


def _hashes(raw_ids: np.ndarray) -> np.ndarray:
    return np.fromiter((docid_hash(bytes(r)) for r in raw_ids),
                       dtype=np.uint64, count=len(raw_ids))


def build_docid_lookup(index_dir: str | os.PathLike, meta: IndexMeta, corpus: str = "",
                       show_progress: bool = True) -> None:
    """Write ``lookup/hashes.npy`` and ``lookup/rows.npy``; raises :class:`FormatError` on repeated docids."""
    index_dir = Path(index_dir)
    hashes = np.empty(meta.num_docs, dtype=np.uint64)
    pos = 0
    for shard in progress(range(meta.num_shards), desc="docid lookup", unit="shard", show=show_progress):
        ids = load_shard_ids(index_dir, shard)
        hashes[pos:pos + len(ids)] = _hashes(ids)
        pos += len(ids)
    if pos != meta.num_docs:
        raise UsageError(f"{index_dir}: shards hold {pos} documents, the manifest says {meta.num_docs}")
    order = np.argsort(hashes, kind="stable")
    hashes = hashes[order]
    rows = order.astype(np.int64)
    same = np.nonzero(hashes[1:] == hashes[:-1])[0]
    if len(same):
        ids = ShardIds(index_dir, meta)
        for i in same:
            a, b = ids.docid(rows[i]), ids.docid(rows[i + 1])
            if a == b:
                raise FormatError(corpus or index_dir, None, "unique document ids",
                                  f"{a!r} appears at corpus positions {rows[i]} and {rows[i + 1]}")
    folder = index_dir / LOOKUP_DIR
    folder.mkdir(parents=True, exist_ok=True)
    save_npy(folder / "hashes.npy", hashes)
    save_npy(folder / "rows.npy", rows)


class DocidLookup:
    """docid -> global row by bisection over the memory-mapped sorted hash table."""

    def __init__(self, index_dir: str | os.PathLike, meta: IndexMeta | None = None):
        self.index_dir = Path(index_dir)
        folder = self.index_dir / LOOKUP_DIR
        if not (folder / "hashes.npy").is_file():
            raise UsageError(f"{index_dir}: no docid lookup table ({LOOKUP_DIR}/hashes.npy); rerun "
                             "'hopscotch index' on it to finish the index")
        self.hashes = np.load(folder / "hashes.npy", mmap_mode="r")
        self.rows = np.load(folder / "rows.npy", mmap_mode="r")
        self.ids = ShardIds(index_dir, meta)

    def row(self, docid: str) -> int | None:
        h = np.uint64(docid_hash(docid))
        i = int(np.searchsorted(self.hashes, h, side="left"))
        while i < len(self.hashes) and self.hashes[i] == h:
            row = int(self.rows[i])
            if self.ids.docid(row) == docid:
                return row
            i += 1
        return None


class ShardDocWriter:
    """Writes one shard's documents and line offsets (to temporary paths the encoder renames)."""

    def __init__(self, docs_path: str | os.PathLike):
        self.fh = open(docs_path, "wb")  # noqa: SIM115 - held across add() calls, closed by close()
        self.offsets = [0]

    def add(self, doc: Document) -> None:
        line = json.dumps({"docid": doc.docid, "title": doc.title, "text": doc.text}, ensure_ascii=False)
        data = line.encode("utf-8") + b"\n"
        self.fh.write(data)
        self.offsets.append(self.offsets[-1] + len(data))

    def close(self) -> np.ndarray:
        self.fh.flush()
        os.fsync(self.fh.fileno())
        self.fh.close()
        return np.asarray(self.offsets, dtype=np.int64)


class DocStore:
    """Read documents of a finished index folder by docid or global row; safe across threads.

    Each read opens the shard's text file, ``pread``s one line and closes it again, so any number of
    threads can read at once and no file descriptors are held between calls.
    """

    def __init__(self, index_dir: str | os.PathLike, meta: IndexMeta | None = None):
        self.index_dir = Path(index_dir)
        self.meta = meta or IndexMeta.load(index_dir)
        if not self.meta.docstore:
            raise UsageError(f"{index_dir}: built without a docstore (--no-docstore); documents cannot be fetched")
        self._offsets: dict[int, np.ndarray] = {}
        self._lock = threading.Lock()
        self._lookup: DocidLookup | None = None

    @property
    def lookup(self) -> DocidLookup:
        with self._lock:
            if self._lookup is None:
                self._lookup = DocidLookup(self.index_dir, self.meta)
            return self._lookup

    def _offsets_of(self, shard: int) -> np.ndarray:
        offsets = self._offsets.get(shard)
        if offsets is None:
            with self._lock:
                offsets = self._offsets.get(shard)
                if offsets is None:
                    offsets = np.load(shard_file(self.index_dir, shard, "offsets.npy"), mmap_mode="r")
                    self._offsets[shard] = offsets
        return offsets

    def get_row(self, row: int) -> Document:
        row = int(row)
        if row < 0 or row >= self.meta.num_docs:
            raise IndexError(f"row {row} outside the index ({self.meta.num_docs} documents)")
        shard, local = divmod(row, self.meta.shard_size)
        offsets = self._offsets_of(shard)
        start, end = int(offsets[local]), int(offsets[local + 1])
        fd = os.open(shard_file(self.index_dir, shard, "docs.jsonl"), os.O_RDONLY)
        try:
            data = os.pread(fd, end - start, start)
        finally:
            os.close(fd)
        obj = json.loads(data)
        return Document(obj["docid"], obj.get("title") or "", obj["text"])

    def get(self, docid: str) -> Document | None:
        row = self.lookup.row(docid)
        return None if row is None else self.get_row(row)


class InMemoryDocStore:
    """``get(docid)`` over a corpus held in RAM: for small corpora served without a dense index."""

    def __init__(self, corpus: str | os.PathLike):
        self.docs = load_corpus_dict(corpus)

    def get(self, docid: str) -> Document | None:
        return self.docs.get(docid)
