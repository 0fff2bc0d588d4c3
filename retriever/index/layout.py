"""The on-disk layout of a sharded dense index folder, the readers of its parts and their atomic ``.npy`` writer.

A folder written by :func:`hopscotch.retriever.index.encode.encode_corpus` looks like::

    index_dir/
      encode_config.json            # what decides the shards: corpus and model file fingerprints, flags
                                    # (a resume must match it; see hopscotch.retriever.index.shard_files)
      index.json                    # the manifest, written once every shard is done
      shards/shard_00000.emb.npy    # float16 [n, d] L2-normalised embeddings
      shards/shard_00000.ids.npy    # numpy bytes [n] UTF-8 docids (memory-mappable)
      shards/shard_00000.docs.jsonl # the documents, one JSON line each (the docstore)
      shards/shard_00000.offsets.npy# int64 [n + 1] byte offsets of those lines
      shards/shard_00000.done.json  # written last: the shard is complete
      lookup/hashes.npy, rows.npy   # sorted 64-bit docid hashes -> global row (docid -> document)
      faiss/...                     # FAISS indexes (see hopscotch.retriever.index.faiss_index)

Shard ``i`` holds the corpus documents at positions ``[i * shard_size, i * shard_size + n_i)``, so the
global row of a document is ``shard * shard_size + local_row``. Everything is read through
memory maps: a 553M-document index never needs its ids or texts in RAM.

Example (not run: it needs an index folder)::

    meta = IndexMeta.load("index_dir")
    emb = load_shard_embeddings("index_dir", 0)          # memory-mapped float16
    docid = ShardIds("index_dir", meta).docid(12345)     # global row -> docid
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from hopscotch.retriever.errors import FormatError, UsageError
from hopscotch.retriever.io.common import atomic_write, write_json
from hopscotch.retriever.model import loading

META_FILE = "index.json"
ENCODE_CONFIG_FILE = "encode_config.json"
SHARD_DIR = "shards"
LOOKUP_DIR = "lookup"
FAISS_DIR = "faiss"
#: the folder of the long documents' further windows (:mod:`hopscotch.retriever.index.windows`), an index folder itself
WINDOWS_DIR = "windows"
#: what encoding derives from the source in an index folder (with :data:`ENCODE_CONFIG_FILE` and a multi-vector
#: index's folder, the whole index): what re-encoding removes first
DERIVED_PARTS = (SHARD_DIR, LOOKUP_DIR, FAISS_DIR, WINDOWS_DIR, META_FILE)
LAYOUT_VERSION = 1
_SHARD_RE = re.compile(r"^shard_(\d{5,})\.done\.json$")


def remove_parts(index_dir: str | os.PathLike, names, ignore_errors: bool = False) -> None:
    """Remove the files and folders ``names`` of ``index_dir`` that exist (``ignore_errors``: of a folder's removal,
    as :func:`shutil.rmtree`)."""
    for name in names:
        path = Path(index_dir) / name
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=ignore_errors)
        elif path.exists():
            path.unlink()


def shard_name(shard: int) -> str:
    return f"shard_{shard:05d}"


def shard_file(index_dir: str | os.PathLike, shard: int, kind: str) -> Path:
    """Path of one part of a shard: ``kind`` is ``emb.npy``, ``ids.npy``, ``docs.jsonl``, ``offsets.npy``
    or ``done.json``."""
    return Path(index_dir) / SHARD_DIR / f"{shard_name(shard)}.{kind}"


def done_shards(index_dir: str | os.PathLike) -> list[int]:
    """Indices of the shards whose ``done.json`` marker exists, sorted."""
    folder = Path(index_dir) / SHARD_DIR
    if not folder.is_dir():
        return []
    out = []
    for f in folder.iterdir():
        m = _SHARD_RE.match(f.name)
        if m:
            out.append(int(m.group(1)))
    return sorted(out)


def read_done_marker(index_dir: str | os.PathLike, shard: int) -> dict | None:
    path = shard_file(index_dir, shard, "done.json")
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except json.JSONDecodeError:
        return None  # a marker is written atomically; an unreadable one means "not done"


@dataclass
class IndexMeta:
    """The manifest of a finished index folder (``index.json``)."""

    model: str                      # as given (``minilm``, a Hub id or a path): for display
    model_path: str                 # the resolved folder, absolute (see :meth:`load` for old relative ones)
    max_length: int | None
    dim: int
    num_docs: int
    num_shards: int
    shard_size: int
    reasoning_aware: bool = False   # queries for this model should use the reasoning-aware template
    query_input: str | None = None  # the model's query input variant (model/query_input.py); None: not recorded
    docstore: bool = True
    corpus: str = ""
    passage_prefix: str = ""        # prepended to every document before encoding (trained models)
    faiss: dict = field(default_factory=dict)   # {default, built: {name: entry}}: see index.faiss_index
    version: int = LAYOUT_VERSION
    model_cwd: str = ""             # the working directory a relative model_path was given in
    model_relpath: str = ""         # model_path relative to the index folder (found again when both move)
    model_sha256: str = ""          # digest of the model folder's files (weights, configs, tokenizer): its identity
    encode_sha256: str = ""         # digest of encode_config.json (corpus content, model files, flags); '' if imported
    windows: dict = field(default_factory=dict)  # {dir, max_windows, stride, max_length, rows}: index.windows
    multi_vector: dict = field(default_factory=dict)  # {dir, nbits, num_centroids, num_tokens, ...}: multi_vector/
    truncate_dim: int | None = None  # index --dim D: each vector is the model's first D dims, renormalised (= dim)

    def __post_init__(self):
        if self.model_path and not os.path.isabs(self.model_path):  # made absolute where it was typed
            self.model_cwd = self.model_cwd or os.getcwd()
            self.model_path = os.path.normpath(os.path.join(self.model_cwd, self.model_path))

    @classmethod
    def load(cls, index_dir: str | os.PathLike) -> IndexMeta:
        path = Path(index_dir) / META_FILE
        if not path.is_file():
            hint = (" (its shards are not all encoded yet: rerun 'hopscotch index' with the same flags to resume)"
                    if (Path(index_dir) / ENCODE_CONFIG_FILE).is_file() else "")
            raise UsageError(f"{index_dir}: not a Hopscotch dense index (no {META_FILE}){hint}; build one with "
                             "'hopscotch index --corpus PATH --model M --out DIR'")
        try:
            raw = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise UsageError(f"{path}: unreadable index manifest ({exc.msg})") from None
        known = {f for f in cls.__dataclass_fields__}
        missing = {"model", "model_path", "dim", "num_docs", "num_shards", "shard_size"} - set(raw)
        if missing:
            raise UsageError(f"{path}: index manifest lacks {sorted(missing)}")
        meta = cls(**{k: v for k, v in raw.items() if k in known}, **_old_relative_base(raw, Path(index_dir)))
        meta.model_path = _located_model(meta, Path(index_dir))
        return meta

    def save(self, index_dir: str | os.PathLike) -> None:
        """Write ``index.json``, recording where the model lies relative to ``index_dir`` too."""
        try:
            self.model_relpath = os.path.relpath(self.model_path, os.path.abspath(index_dir)) if self.model_path else ""
        except ValueError:  # another drive
            self.model_relpath = ""
        write_json(Path(index_dir) / META_FILE, asdict(self))

    def shard_rows(self, shard: int) -> int:
        """Number of documents in ``shard``."""
        if shard < self.num_shards - 1:
            return self.shard_size
        return self.num_docs - self.shard_size * (self.num_shards - 1)


def _old_relative_base(raw: dict, index_dir: Path) -> dict:
    """For a manifest written before paths were made absolute (a relative ``model_path``, no ``model_cwd``):
    the first of the working directory, the index folder and its parents under which that path exists."""
    rel = str(raw.get("model_path") or "")
    if not rel or os.path.isabs(rel) or raw.get("model_cwd"):
        return {}
    here = index_dir.absolute()
    for base in (Path.cwd(), here, *here.parents):
        if (base / rel).is_dir():
            return {"model_cwd": str(base)}
    return {}


def _located_model(meta: IndexMeta, index_dir: Path) -> str:
    """``meta.model_path`` when it exists; else the same folder beside the (moved) index (``model_relpath``),
    the bundled model again for an alias, or a Hub id's snapshot in the local cache (never downloaded)."""
    if not meta.model_path or os.path.isdir(meta.model_path):  # '': no model recorded (imported vectors)
        return meta.model_path
    if meta.model_relpath:
        moved = os.path.normpath(os.path.join(index_dir.absolute(), meta.model_relpath))
        if os.path.isdir(moved):
            return moved
    if meta.model.lower() in loading.MODEL_ALIASES:
        return loading.bundled_minilm_path()
    if loading.looks_like_hub_id(meta.model):
        return loading.cached_hub_snapshot(meta.model) or meta.model_path
    return meta.model_path


def save_npy(path: str | os.PathLike, arr: np.ndarray) -> None:
    """Write ``arr`` as a ``.npy`` file atomically (a temp file beside it, then a rename)."""
    with atomic_write(path, "wb", encoding=None) as fh:
        np.save(fh, arr)


def _load_shard_npy(path: Path, mmap: bool) -> np.ndarray:
    """``np.load`` of one shard file; a missing, truncated or corrupt file is a one-line :class:`FormatError`."""
    try:
        return np.load(path, mmap_mode="r" if mmap else None)
    except (OSError, ValueError, EOFError) as exc:
        got = "no such file" if isinstance(exc, FileNotFoundError) else str(exc).split(". ")[0] or type(exc).__name__
        raise FormatError(path, None, "a .npy shard file written by 'hopscotch index' (the file is damaged: rebuild "
                                      "the index with --overwrite)", got) from None


def load_shard_embeddings(index_dir: str | os.PathLike, shard: int, mmap: bool = True) -> np.ndarray:
    """The ``float16 [n, d]`` embeddings of one shard (memory-mapped by default); a missing, truncated or corrupt
    file is a :class:`FormatError` naming it."""
    return _load_shard_npy(shard_file(index_dir, shard, "emb.npy"), mmap)


def load_shard_ids(index_dir: str | os.PathLike, shard: int, mmap: bool = True) -> np.ndarray:
    """The docids of one shard as a numpy bytes array (decode with ``.decode('utf-8')``); a damaged file is a
    :class:`FormatError` naming it."""
    return _load_shard_npy(shard_file(index_dir, shard, "ids.npy"), mmap)


def iter_shard_docids(index_dir: str | os.PathLike, shard: int):
    for raw in load_shard_ids(index_dir, shard):
        yield raw.decode("utf-8")


class ShardIds:
    """Global row -> docid through the memory-mapped per-shard id arrays."""

    def __init__(self, index_dir: str | os.PathLike, meta: IndexMeta | None = None):
        self.index_dir = Path(index_dir)
        self.meta = meta or IndexMeta.load(index_dir)
        self._ids: dict[int, np.ndarray] = {}

    def _shard(self, shard: int) -> np.ndarray:
        arr = self._ids.get(shard)
        if arr is None:
            arr = self._ids[shard] = load_shard_ids(self.index_dir, shard)
        return arr

    def docid(self, row: int) -> str:
        shard, local = divmod(int(row), self.meta.shard_size)
        if row < 0 or shard >= self.meta.num_shards:
            raise IndexError(f"row {row} outside the index ({self.meta.num_docs} documents)")
        return self._shard(shard)[local].decode("utf-8")

    def docids(self, rows) -> list[str]:
        return [self.docid(r) for r in rows]


def embedding_rows(index_dir: str | os.PathLike, meta: IndexMeta, rows: np.ndarray, cache: dict | None = None
                   ) -> np.ndarray:
    """Gather the float32 embeddings of arbitrary global ``rows`` (``-1`` gives zeros) from the shards.

    ``cache`` (a dict) keeps the shard memory maps open between calls.
    """
    rows = np.asarray(rows, dtype=np.int64).ravel()
    out = np.zeros((len(rows), meta.dim), dtype=np.float32)
    valid = rows >= 0
    shards = np.where(valid, rows // meta.shard_size, -1)
    cache = {} if cache is None else cache
    for shard in np.unique(shards[valid]):
        sel = np.nonzero(shards == shard)[0]
        emb = cache.get(int(shard))
        if emb is None:
            emb = cache[int(shard)] = load_shard_embeddings(index_dir, int(shard))
        out[sel] = emb[rows[sel] - shard * meta.shard_size]
    return out
