"""FAISS indexes over the encoded shards: any ``index_factory`` spec, one index per shard or one merged.

``Flat`` needs no files: the float16 shards are loaded into ``IndexFlatIP`` at search time (exact inner
product). Every other spec (``IVF{n},PQ{m}``, ``OPQ{m},IVF{n},PQ{m}``, ``HNSW32``, ``IVF{n},SQ8`` ...) is
trained once on a uniform sample of the corpus and written under ``faiss/<name>/``: ``trained.faiss``
plus ``shard_XXXXX.faiss`` per shard (``layout="shards"``, resumable shard by shard) or
``merged.faiss`` (``layout="merged"``). Searching several shards keeps each shard's top-k and merges
them into one top-k ordered by (score desc, global row asc), so a sharded ``Flat`` search returns
exactly what one ``Flat`` index over the whole corpus returns.

Exact (``Flat``) search over a large part runs FAISS's BLAS kernel with wide database blocks
(:mod:`~hopscotch.retriever.index.faiss_flat`): FAISS 1.15 takes its sequential kernel while
``queries * dim < 128,000`` (below 334 queries at 384 dimensions), which streams the whole part from RAM once per
query, and its BLAS blocks (4,096 queries x 1,024 vectors) make many small products for a batch of a few hundred
queries. Exact either way.

``nprobe`` (IVF) and ``efSearch`` (HNSW) are set at query time; ``refine=R`` re-scores the top ``k * R``
approximate hits exactly against the float16 vectors of the shards (FAISS ``IndexRefine`` over a float16
copy loaded on first use: 2 bytes per dimension per document of RAM). faiss-gpu is used
when installed (``pip install hopscotch[gpu]``) and a GPU is visible; CPU otherwise.

Example (not run here: docs/python.md builds a Flat index)::

    build_faiss_index("index_dir", "OPQ64,IVF4096,PQ64", layout="shards")
    index = ShardedFaissIndex.load("index_dir")
    scores, rows = index.search(query_emb, k=100, nprobe=64, refine=4)
"""

from __future__ import annotations

import os
import re
import shutil
import threading
from pathlib import Path

import numpy as np

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.index.faiss_flat import (  # noqa: F401 (re-exported)
    FLAT_BLAS_BLOCK_FLOATS,
    flat_blas_settings,
    flat_search_settings,
)
from hopscotch.retriever.index.faiss_spec import (  # noqa: F401 (make_index, check_spec_syntax: re-exported)
    _faiss,
    auto_layout,
    auto_spec,
    check_spec,
    check_spec_syntax,
    default_train_size,
    is_auto,
    is_flat,
    make_index,
)
from hopscotch.retriever.index.faiss_spec import ivf_or_none as _ivf_or_none
from hopscotch.retriever.index.layout import FAISS_DIR, IndexMeta, embedding_rows, load_shard_embeddings, shard_name
from hopscotch.retriever.io.progress import progress

LAYOUTS = ("shards", "merged")


def gpu_count() -> int:
    """GPUs faiss can use (0 with faiss-cpu)."""
    faiss = _faiss()
    return faiss.get_num_gpus() if hasattr(faiss, "get_num_gpus") else 0


def index_name(spec: str, layout: str) -> str:
    """Folder name for a spec and layout, e.g. ``OPQ64_IVF4096_PQ64.shards``."""
    return re.sub(r"[^A-Za-z0-9]+", "_", spec).strip("_") + f".{layout}"


def _is_ivf(index) -> bool:
    return _ivf_or_none(index) is not None


def _write_index(index, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    _faiss().write_index(index, str(tmp))
    os.replace(tmp, path)


def _sample_rows(meta: IndexMeta, size: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if size >= meta.num_docs:
        return np.arange(meta.num_docs, dtype=np.int64)
    return np.sort(rng.choice(meta.num_docs, size=size, replace=False)).astype(np.int64)


def train_index(index_dir, meta: IndexMeta, spec: str, train_size: int | None, seed: int, use_gpu: bool):
    """An empty index of ``spec`` trained on a uniform sample of the corpus."""
    faiss = _faiss()
    index = check_spec(spec, meta.dim, meta.num_docs, train_size)
    if index.is_trained:
        return index
    size = train_size or default_train_size(index, meta.num_docs)
    ivf = _ivf_or_none(index)
    sample = embedding_rows(index_dir, meta, _sample_rows(meta, size, seed))
    if use_gpu and ivf is not None:
        ivf.clustering_index = faiss.index_cpu_to_all_gpus(faiss.IndexFlatIP(meta.dim))
    try:
        index.train(sample)
    except RuntimeError as exc:  # what check_spec does not foresee: one line, not a C++ trace
        last = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"FAISS could not train {spec!r} on {len(sample):,} vectors of {index_dir}: {last}") from None
    return index


def build_faiss_index(index_dir: str | os.PathLike, spec: str = "Flat", layout: str = "shards",
                      train_size: int | None = None, seed: int = 0, use_gpu: bool | None = None,
                      set_default: bool = True, show_progress: bool = True) -> dict:
    """Build (or resume building) the FAISS index ``spec`` over a finished index folder.

    ``spec="auto"`` picks one by the folder's document count (:func:`~hopscotch.retriever.index.faiss_spec.auto_spec`)
    and records its search defaults (``nprobe``, ``refine``) in the entry, which searches use unless told
    otherwise; ``layout="auto"``: ``shards`` for Flat, else ``merged``.

    :return: the entry recorded in ``index.json`` under ``faiss.built[name]``
    """
    index_dir = Path(index_dir)
    meta = IndexMeta.load(index_dir)
    search_defaults = {}
    if is_auto(spec):
        spec, search_defaults = auto_spec(meta.num_docs, meta.dim)
    if layout == "auto":
        layout = auto_layout(spec)
    if layout not in LAYOUTS:
        raise UsageError(f"index layout {layout!r}: use one of {', '.join(LAYOUTS)} or auto")
    check_spec(spec, meta.dim, meta.num_docs, train_size)  # before any file: the one spec rule (faiss_spec)
    name = index_name(spec, layout)
    entry = {"spec": spec, "layout": layout, "num_docs": meta.num_docs}
    if search_defaults:
        entry |= {"requested": "auto", "search": search_defaults}
    if not is_flat(spec):
        use_gpu = gpu_count() > 0 if use_gpu is None else use_gpu
        folder = index_dir / FAISS_DIR / name
        folder.mkdir(parents=True, exist_ok=True)
        trained = _trained_index(index_dir, meta, folder / "trained.faiss", spec, train_size, seed, use_gpu)
        if layout == "shards":
            _write_shard_indexes(index_dir, meta, trained, folder, spec, show_progress)
        elif not (folder / "merged.faiss").is_file():
            _write_merged_index(index_dir, meta, trained, folder, spec, show_progress)
        entry["dir"] = f"{FAISS_DIR}/{name}"
    _record_in_manifest(index_dir, name, entry, set_default)
    return entry


def _shard_vectors(index_dir: Path, shard: int) -> np.ndarray:
    """A shard's float16 embeddings as the float32 array FAISS takes."""
    return np.asarray(load_shard_embeddings(index_dir, shard), dtype=np.float32)


def _trained_index(index_dir: Path, meta: IndexMeta, path: Path, spec: str, train_size: int | None, seed: int,
                   use_gpu: bool):
    """The trained empty index saved at ``path``, trained and saved first if it is not there yet."""
    if path.is_file():
        return _faiss().read_index(str(path))
    trained = train_index(index_dir, meta, spec, train_size, seed, use_gpu)
    _write_index(trained, path)
    return trained


def _write_shard_indexes(index_dir: Path, meta: IndexMeta, trained, folder: Path, spec: str,
                         show_progress: bool) -> None:
    """One index file per shard, each written atomically: a killed build resumes at the first missing one."""
    faiss = _faiss()
    folder.mkdir(parents=True, exist_ok=True)
    for shard in progress(range(meta.num_shards), desc=f"faiss {spec}", unit="shard", show=show_progress):
        path = folder / f"{shard_name(shard)}.faiss"
        if not path.is_file():
            index = faiss.clone_index(trained)
            index.add(_shard_vectors(index_dir, shard))
            _write_index(index, path)


def _write_merged_index(index_dir: Path, meta: IndexMeta, trained, folder: Path, spec: str,
                        show_progress: bool) -> None:
    """``merged.faiss``: IVF inverted lists merged from per-shard parts (resumable, removed once the merged
    file is written; ids shifted to global rows); HNSW and other graph / flat codes added in corpus order."""
    faiss = _faiss()
    ivf = _is_ivf(trained)
    parts_dir = folder / "parts"
    if ivf:
        _write_shard_indexes(index_dir, meta, trained, parts_dir, spec, show_progress)
    index = faiss.clone_index(trained)
    for shard in progress(range(meta.num_shards), desc=f"merge {spec}", unit="shard", show=show_progress):
        if ivf:
            part = faiss.read_index(str(parts_dir / f"{shard_name(shard)}.faiss"))
            faiss.extract_index_ivf(index).merge_from(faiss.extract_index_ivf(part), shard * meta.shard_size)
            index.ntotal = faiss.extract_index_ivf(index).ntotal
        else:
            index.add(_shard_vectors(index_dir, shard))
    _write_index(index, folder / "merged.faiss")
    if ivf:
        shutil.rmtree(parts_dir, ignore_errors=True)


def _record_in_manifest(index_dir: Path, name: str, entry: dict, set_default: bool) -> None:
    """Record ``entry`` as the built FAISS index ``name`` in ``index.json``, re-read first: another build may
    have recorded its own entry."""
    meta = IndexMeta.load(index_dir)
    built = dict(meta.faiss.get("built", {}))
    built[name] = entry
    meta.faiss = {"default": name if set_default or "default" not in meta.faiss else meta.faiss["default"],
                  "built": built}
    meta.save(index_dir)


def remove_faiss_index(index_dir: str | os.PathLike, name: str) -> None:
    """Delete one built FAISS index (its folder and manifest entry)."""
    meta = IndexMeta.load(index_dir)
    shutil.rmtree(Path(index_dir) / FAISS_DIR / name, ignore_errors=True)
    built = {k: v for k, v in meta.faiss.get("built", {}).items() if k != name}
    default = meta.faiss.get("default")
    meta.faiss = {"default": default if default in built else next(iter(built), None), "built": built}
    meta.save(index_dir)


def merge_topk(scores: np.ndarray, rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` of each row of candidate ``(scores, rows)``, ordered by score desc then row asc.

    Missing candidates (row ``-1``) sort last and come back as row ``-1`` with score ``-inf``.
    """
    scores = np.where(rows < 0, -np.inf, scores).astype(np.float32)
    rows_key = np.where(rows < 0, np.iinfo(np.int64).max, rows)
    order = np.lexsort((rows_key, -scores), axis=-1)[:, :k]
    return np.take_along_axis(scores, order, axis=1), np.take_along_axis(rows, order, axis=1)


class ShardedFaissIndex:
    """A loaded FAISS index (per-shard or merged) answering global-row top-k queries."""

    def __init__(self, index_dir: Path, meta: IndexMeta, spec: str, layout: str, parts: list, offsets: list[int],
                 search_defaults: dict | None = None):
        self.index_dir, self.meta, self.spec, self.layout = index_dir, meta, spec, layout
        self.parts, self.offsets = parts, offsets
        self._lock = threading.Lock()
        self._params: tuple = (None, None)
        self._shard_cache: dict = {}
        self._refiners: dict = {}
        self._keep: list = []
        #: ``nprobe`` / ``refine`` used when a search names none (recorded by ``--spec auto``)
        self.search_defaults: dict = dict(search_defaults or {})

    @classmethod
    def load(cls, index_dir: str | os.PathLike, name: str | None = None, use_gpu: bool | None = None,
             meta: IndexMeta | None = None, show_progress: bool = False) -> ShardedFaissIndex:
        """Load the default (or the named) FAISS index of a finished index folder; ``Flat`` if none was built."""
        faiss = _faiss()
        index_dir = Path(index_dir)
        meta = meta or IndexMeta.load(index_dir)
        built = meta.faiss.get("built", {})
        name = name or meta.faiss.get("default")
        if name is None:
            entry = {"spec": "Flat", "layout": "shards"}
        elif name not in built:
            raise UsageError(f"{index_dir}: no FAISS index {name!r}; built: {', '.join(built) or 'none'}")
        else:
            entry = built[name]
        if entry.get("num_docs", meta.num_docs) != meta.num_docs:
            raise UsageError(f"{index_dir}: FAISS index {name!r} covers {entry['num_docs']} documents, the shards "
                             f"{meta.num_docs}; rebuild it with 'hopscotch index --spec {entry['spec']}'")
        spec, layout = entry["spec"], entry["layout"]
        parts, offsets = [], []
        shards = range(meta.num_shards) if layout == "shards" else [None]
        for shard in progress(shards, desc="load index", unit="shard", show=show_progress):
            if is_flat(spec):
                index = faiss.IndexFlatIP(meta.dim)
                for s in ([shard] if shard is not None else range(meta.num_shards)):
                    index.add(_shard_vectors(index_dir, s))
            else:
                fname = "merged.faiss" if shard is None else f"{shard_name(shard)}.faiss"
                path = index_dir / entry["dir"] / fname
                if not path.is_file():
                    raise UsageError(f"{path}: missing; rerun 'hopscotch index --spec {spec!r}' to finish the build")
                index = faiss.read_index(str(path))
            if (gpu_count() > 0 if use_gpu is None else use_gpu):
                index = faiss.index_cpu_to_all_gpus(index)
            parts.append(index)
            offsets.append(0 if shard is None else shard * meta.shard_size)
        return cls(index_dir, meta, spec, layout, parts, offsets, entry.get("search"))

    def search_params(self, nprobe: int | None = None, refine: int | None = None) -> tuple[int | None, int]:
        """``(nprobe, refine)`` a search runs with: the given ones, else :attr:`search_defaults`, else FAISS's
        own nprobe (None) and refine 1."""
        return (self.search_defaults.get("nprobe") if nprobe is None else nprobe,
                self.search_defaults.get("refine", 1) if refine is None else refine)

    def check_search_params(self, nprobe: int | None, ef_search: int | None, refine: int | None) -> None:
        """Refuse (one-line :class:`UsageError` naming the flag) a query-time parameter this index would ignore:
        ``--nprobe`` without inverted lists, ``--ef-search`` without HNSW, ``--refine`` above 1 on exact ``Flat``
        search; a search with them set would run as without them."""
        where = f"{self.index_dir}'s FAISS index {self.spec!r}"
        if refine is not None and refine > 1 and is_flat(self.spec):
            raise UsageError(f"--refine {refine}: {where} is exact already; nothing to re-score: drop it")
        try:
            self._set_params(nprobe, ef_search)
        except UsageError as exc:
            name = "--nprobe" if "nprobe" in str(exc) else "--ef-search"
            value = nprobe if name == "--nprobe" else ef_search
            raise UsageError(f"{name} {value}: {where} has no "
                             f"{'inverted lists (IVF)' if name == '--nprobe' else 'HNSW graph'}: drop it") from None

    def _set_params(self, nprobe: int | None, ef_search: int | None) -> None:
        if (nprobe, ef_search) == self._params:
            return
        faiss = _faiss()
        for index in self.parts:
            space = faiss.GpuParameterSpace() if "Gpu" in type(index).__name__ else faiss.ParameterSpace()
            for pname, value in (("nprobe", nprobe), ("efSearch", ef_search)):
                if value is None:
                    continue
                try:
                    space.set_index_parameter(index, pname, int(value))
                except RuntimeError:
                    raise UsageError(f"FAISS index {self.spec!r} has no parameter {pname}") from None
        self._params = (nprobe, ef_search)

    def search(self, queries: np.ndarray, k: int, nprobe: int | None = None, ef_search: int | None = None,
               refine: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` ``(scores, global rows)`` per query; rows are ``-1`` where fewer than ``k`` exist.
        ``nprobe`` / ``refine`` left None take the index's :attr:`search_defaults` (else FAISS's nprobe, refine 1)."""
        nprobe, refine = self.search_params(nprobe, refine)
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        if queries.ndim != 2 or queries.shape[1] != self.meta.dim:
            raise UsageError(f"query embeddings of shape {queries.shape} do not match the index dimension "
                             f"{self.meta.dim} (was the index built with another model?)")
        exact = is_flat(self.spec)
        refine = 1 if exact else max(1, int(refine))
        on_gpu = any("Gpu" in type(p).__name__ for p in self.parts)
        depth = k * refine if refine > 1 and on_gpu else k
        all_scores, all_rows = [], []
        with self._lock:
            self._set_params(nprobe, ef_search)
            for i, (index, offset) in enumerate(zip(self.parts, self.offsets)):
                kk = min(depth, index.ntotal)
                if kk == 0:
                    continue
                if refine > 1 and not on_gpu:  # FAISS re-scores k * refine candidates in C++
                    refiner = self._refiner(i)
                    refiner.k_factor = float(refine)
                    scores, rows = refiner.search(queries, kk)
                elif exact and not on_gpu:  # FAISS's BLAS kernel in wide blocks (flat_blas_settings)
                    with flat_search_settings(len(queries), index.ntotal, self.meta.dim):
                        scores, rows = index.search(queries, kk)
                else:
                    scores, rows = index.search(queries, kk)
                all_scores.append(scores)
                all_rows.append(np.where(rows >= 0, rows + offset, -1))
        if not all_scores:
            return (np.full((len(queries), k), -np.inf, np.float32), np.full((len(queries), k), -1, np.int64))
        scores, rows = np.concatenate(all_scores, axis=1), np.concatenate(all_rows, axis=1)
        if refine > 1 and on_gpu:
            scores = self._exact_scores(queries, rows)
        scores, rows = merge_topk(scores, rows.astype(np.int64), k)
        if scores.shape[1] < k:
            pad = k - scores.shape[1]
            scores = np.pad(scores, ((0, 0), (0, pad)), constant_values=-np.inf)
            rows = np.pad(rows, ((0, 0), (0, pad)), constant_values=-1)
        return scores, rows

    def _refiner(self, part: int):
        """``IndexRefine`` of one part over a float16 copy of its vectors (built on first use; it holds
        2 bytes per dimension per document in RAM)."""
        refiner = self._refiners.get(part)
        if refiner is None:
            faiss = _faiss()
            store = faiss.IndexScalarQuantizer(self.meta.dim, faiss.ScalarQuantizer.QT_fp16,
                                               faiss.METRIC_INNER_PRODUCT)
            shards = (range(self.meta.num_shards) if self.layout == "merged"
                      else [self.offsets[part] // self.meta.shard_size])
            for shard in shards:  # float16 -> float32 -> float16 is exact
                store.add(_shard_vectors(self.index_dir, shard))
            refiner = faiss.IndexRefine(self.parts[part], store)
            refiner.own_fields = refiner.own_refine_index = False
            self._refiners[part] = refiner
            self._keep.append(store)  # the Python side owns the store
        return refiner

    def _exact_scores(self, queries: np.ndarray, rows: np.ndarray, chunk: int = 32) -> np.ndarray:
        """Inner products of each query with its candidate rows, from the float16 shards (memory-mapped),
        ``chunk`` queries at a time so the gathered vectors stay small."""
        scores = np.empty(rows.shape, dtype=np.float32)
        for start in range(0, len(queries), chunk):
            r = rows[start:start + chunk]
            vecs = embedding_rows(self.index_dir, self.meta, r, cache=self._shard_cache).reshape(*r.shape, -1)
            scores[start:start + chunk] = np.matmul(vecs, queries[start:start + chunk, :, None])[..., 0]
        return np.where(rows >= 0, scores, -np.inf).astype(np.float32)
