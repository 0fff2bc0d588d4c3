"""The multi-vector reranker's token cache: each document's token vectors on disk, per model fingerprint.

Layout (``--rerank-cache DIR``)::

    DIR/<fingerprint>/              # one folder per fingerprint: the model's files and the window settings
      cache.json                    # what the fingerprint stands for (model folder, dim, windows), for people
      <shard>/docs.npz              # docids (str), windows per document (int32), vectors per window (int32)
      <shard>/vectors.npy           # float16 (all vectors, dim): each document's windows' vectors, in order

A search writes one shard with the documents it had to encode, whole through
:func:`~hopscotch.retriever.io.atomic.atomic_folder` (a crash leaves no partial shard); shard names carry
the time, the pid and a random part, so concurrent searches never collide, and a docid found in two shards
reads the same vectors from either. Readers map ``vectors.npy`` and copy only the rows they need. A
different model (or window setting) has another fingerprint, hence another folder: the cache never serves
one model's vectors to another. Delete a fingerprint folder (or all of ``DIR``) to reclaim the space.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from hopscotch.retriever.io.atomic import atomic_folder
from hopscotch.retriever.io.common import write_json

DOCS_FILE, VECTORS_FILE, ABOUT_FILE = "docs.npz", "vectors.npy", "cache.json"


class _Shard:
    """One shard's index (docid -> position) and its lazily mapped vectors."""

    def __init__(self, folder: Path):
        self.folder = folder
        with np.load(folder / DOCS_FILE, allow_pickle=False) as docs:
            self.docids = [str(d) for d in docs["docids"]]
            windows = docs["windows"].astype(np.int64)
            self.lengths = docs["lengths"].astype(np.int64)
        self.window_start = np.concatenate([[0], np.cumsum(windows)])
        self.row_start = np.concatenate([[0], np.cumsum(self.lengths)])
        self._vectors = None

    def windows(self, i: int) -> list[np.ndarray]:
        if self._vectors is None:
            self._vectors = np.load(self.folder / VECTORS_FILE, mmap_mode="r", allow_pickle=False)
        return [np.array(self._vectors[self.row_start[w]:self.row_start[w] + self.lengths[w]])
                for w in range(self.window_start[i], self.window_start[i + 1])]


class TokenCache:
    """Token vectors by docid for one fingerprint under ``root`` (None: a cache that holds nothing).

    ``get(docids)`` returns the cached ones (each a list of float16 ``(n_tokens, dim)`` arrays, one per
    window); ``put({docid: windows})`` stores new ones as one shard. ``about`` (JSON-able) is written once as
    ``cache.json``.
    """

    def __init__(self, root: str | os.PathLike | None, fingerprint: str, about: Mapping | None = None):
        self.folder = None if root is None else Path(root) / fingerprint
        self.about = dict(about or {})
        self._where: dict[str, tuple[_Shard, int]] = {}
        self._shards: set[str] = set()
        self.hits = self.misses = 0
        self._scan()

    def _scan(self) -> None:
        """Index the shards not seen yet (another process may have added some)."""
        if self.folder is None or not self.folder.is_dir():
            return
        for entry in sorted(os.scandir(self.folder), key=lambda e: e.name):
            if entry.name.startswith(".") or entry.name in self._shards or not entry.is_dir():
                continue
            if not (Path(entry.path) / DOCS_FILE).is_file():
                continue
            shard = _Shard(Path(entry.path))
            self._shards.add(entry.name)
            for i, docid in enumerate(shard.docids):
                self._where.setdefault(docid, (shard, i))

    def get(self, docids: Iterable[str]) -> dict[str, list[np.ndarray]]:
        docids = list(dict.fromkeys(docids))
        if any(d not in self._where for d in docids):
            self._scan()
        out = {d: self._where[d][0].windows(self._where[d][1]) for d in docids if d in self._where}
        self.hits += len(out)
        self.misses += len(docids) - len(out)
        return out

    def put(self, vectors: Mapping[str, Sequence[np.ndarray]]) -> None:
        """Store ``{docid: [window arrays]}`` (float16) as one new shard; nothing without a folder."""
        if self.folder is None or not vectors:
            return

        self.folder.mkdir(parents=True, exist_ok=True)
        if self.about and not (self.folder / ABOUT_FILE).is_file():
            write_json(self.folder / ABOUT_FILE, self.about)
        docids = list(vectors)
        windows = [list(vectors[d]) for d in docids]
        flat = [np.asarray(w, dtype=np.float16) for ws in windows for w in ws]
        dim = flat[0].shape[1] if flat else 0
        name = f"{time.time_ns():016x}-{os.getpid()}-{secrets.token_hex(3)}"
        with atomic_folder(self.folder / name) as build:
            build.mkdir()
            np.savez(build / DOCS_FILE, docids=np.array(docids, dtype=str),
                     windows=np.array([len(ws) for ws in windows], dtype=np.int32),
                     lengths=np.array([w.shape[0] for w in flat], dtype=np.int32))
            np.save(build / VECTORS_FILE, np.concatenate(flat) if flat else np.zeros((0, dim), np.float16))
        self._scan()
