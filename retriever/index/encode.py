"""Sharded, resumable, multi-process corpus encoding.

The corpus is streamed (JSONL, parquet, BEIR folders, ClimbMix shard folders) and cut by position into
shards of ``shard_size`` documents. Each shard is encoded with length-sorted batches and written as
float16 embeddings plus a docid array (and, by default, its documents for the docstore); every file goes
to a temporary name first and a ``done.json`` marker is written last, so a shard either exists
completely or not at all. A killed job rerun with the same arguments skips every finished shard and
starts at the first unfinished one: no document is lost or encoded twice.

Several processes split the shards by rank: each takes a contiguous block of shards and opens only the
corpus files that overlap it (see :mod:`hopscotch.retriever.index.corpus_shards`); the rank and world size come from
``torchrun`` / ``accelerate launch`` (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``) and each process uses
``cuda:LOCAL_RANK`` when a GPU is present. Rank 0 waits for the other ranks' shards
and writes the manifest (``index.json``) and the docid lookup table.

Example::

    from hopscotch.retriever.index.encode import encode_corpus
    result = encode_corpus("corpus.jsonl", "minilm", "index_dir", shard_size=100_000,
                           batch_size=128, max_length=256)
    result.meta.num_docs, result.encoded_shards, result.docs_per_second
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.index.corpus_shards import (
    file_row_counts,
    iter_shards,
    num_shards,
    rank_block,
)
from hopscotch.retriever.index.docstore import ShardDocWriter, build_docid_lookup
from hopscotch.retriever.index.layout import (
    ENCODE_CONFIG_FILE,
    FAISS_DIR,
    LOOKUP_DIR,
    META_FILE,
    SHARD_DIR,
    IndexMeta,
    done_shards,
    read_done_marker,
    shard_file,
    shard_name,
)
from hopscotch.retriever.io.common import atomic_write, write_json
from hopscotch.retriever.io.corpus import Document, corpus_files
from hopscotch.retriever.model.config import model_settings
from hopscotch.retriever.model.query_template import format_document


def distributed_context() -> tuple[int, int, int]:
    """``(rank, world_size, local_rank)`` from the launcher's environment (1 process when unset)."""
    def env_int(*names: str, default: int) -> int:
        for name in names:
            if os.environ.get(name, "").strip():
                return int(os.environ[name])
        return default

    world = env_int("WORLD_SIZE", default=1)
    rank = env_int("RANK", default=0)
    local = env_int("LOCAL_RANK", default=rank)
    return rank, world, local


@dataclass
class EncodeResult:
    """What one process did. ``meta`` is set on the process that finished the index (rank 0)."""

    index_dir: Path
    rank: int
    world_size: int
    encoded_shards: list[int] = field(default_factory=list)
    skipped_shards: list[int] = field(default_factory=list)
    encoded_docs: int = 0
    encode_seconds: float = 0.0
    meta: IndexMeta | None = None

    @property
    def docs_per_second(self) -> float:
        return self.encoded_docs / self.encode_seconds if self.encode_seconds > 0 else 0.0


def _corpus_signature(corpus) -> list[dict]:
    out = []
    for shard, path in corpus_files(corpus):
        st = Path(path).stat()
        out.append({"path": str(Path(path).resolve()), "shard": shard, "bytes": st.st_size})
    return out


def _check_config(out_dir: Path, config: dict, overwrite: bool) -> None:
    """Write ``encode_config.json``, or check that an existing one matches (a resume)."""
    path = out_dir / ENCODE_CONFIG_FILE
    if path.is_file() and not overwrite:
        try:
            old = json.loads(path.read_text())
        except json.JSONDecodeError:
            old = None
        if old is not None:
            diff = sorted(k for k in set(old) | set(config) if old.get(k) != config.get(k))
            if diff:
                raise UsageError(f"{out_dir} holds shards encoded with different settings ({', '.join(diff)}); "
                                 "use another --out, or --overwrite to discard them")
            return
    if overwrite:  # everything derived from the old shards goes: shards, manifest, lookup, FAISS indexes
        for name in (SHARD_DIR, LOOKUP_DIR, FAISS_DIR):
            shutil.rmtree(out_dir / name, ignore_errors=True)
        if (out_dir / META_FILE).exists():
            os.unlink(out_dir / META_FILE)
    write_json(path, config)


def _remove_partial(out_dir: Path, shard: int) -> None:
    """Delete the leftovers of an interrupted write of ``shard`` (temp files and unmarked parts)."""
    folder = out_dir / SHARD_DIR
    marker = shard_file(out_dir, shard, "done.json")
    if marker.exists():
        os.unlink(marker)  # first, so a crash below can never leave a marker over missing files
    for f in glob.glob(str(folder / f".{shard_name(shard)}.*")) + glob.glob(str(folder / f"{shard_name(shard)}.*")):
        os.unlink(f)


def _shard_complete(out_dir: Path, shard: int) -> bool:
    """A shard is done when its marker exists and so do all the files the marker vouches for."""
    marker = read_done_marker(out_dir, shard)
    if marker is None:
        return False
    needed = ["emb.npy", "ids.npy"] + (["docs.jsonl", "offsets.npy"] if marker.get("docstore") else [])
    return all(shard_file(out_dir, shard, k).is_file() for k in needed)


def _save_npy(path: Path, arr: np.ndarray) -> None:
    with atomic_write(path, "wb", encoding=None) as fh:
        np.save(fh, arr)


def write_shard(out_dir: Path, shard: int, docs: list[Document], emb: np.ndarray, docstore: bool,
                seconds: float) -> None:
    """Write one shard's files atomically, the ``done.json`` marker last."""
    folder = out_dir / SHARD_DIR
    folder.mkdir(parents=True, exist_ok=True)
    _remove_partial(out_dir, shard)
    ids = np.array([d.docid.encode("utf-8") for d in docs], dtype=bytes)
    _save_npy(shard_file(out_dir, shard, "emb.npy"), emb.astype(np.float16))
    _save_npy(shard_file(out_dir, shard, "ids.npy"), ids)
    if docstore:
        docs_path = shard_file(out_dir, shard, "docs.jsonl")
        tmp = docs_path.with_name(f".{docs_path.name}.tmp")
        writer = ShardDocWriter(tmp)
        try:
            for d in docs:
                writer.add(d)
        finally:
            offsets = writer.close()
        os.replace(tmp, docs_path)
        _save_npy(shard_file(out_dir, shard, "offsets.npy"), offsets)
    write_json(shard_file(out_dir, shard, "done.json"),
               {"shard": shard, "num_docs": len(docs), "dim": int(emb.shape[1]), "docstore": docstore,
                "first_docid": docs[0].docid, "last_docid": docs[-1].docid, "seconds": round(seconds, 3)})


def encode_corpus(corpus: str | os.PathLike, model: str | os.PathLike, out_dir: str | os.PathLike,
                  shard_size: int = 100_000, batch_size: int = 64, max_length: int | None = None, *,
                  rank: int | None = None, world_size: int | None = None, device: str | None = None,
                  docstore: bool = True, reasoning_aware: bool = False, overwrite: bool = False,
                  precision: str = "auto", encoder=None, show_progress: bool = True,
                  wait_timeout: float | None = None, poll_seconds: float = 2.0) -> EncodeResult:
    """Encode ``corpus`` into resumable shards under ``out_dir`` (see the module docstring).

    :param corpus: corpus file, BEIR folder or shard folder (JSONL, gzipped JSONL or parquet)
    :param model: ``minilm`` or a sentence-transformers / training output folder (a trained model's passage
        prefix and passage length are used)
    :param max_length: encoder max tokens per document (None: the model's passage length, else 256)
    :param shard_size: documents per shard (the unit of resumption and of work split across ranks)
    :param rank, world_size: this process's share; default from ``RANK`` / ``WORLD_SIZE``
    :param device: torch device; default ``cuda:LOCAL_RANK`` when CUDA is available, else CPU
    :param docstore: also store the documents so a server can return them by docid
    :param reasoning_aware: recorded in the manifest: queries for this model use the reasoning template
    :param precision: ``auto`` (float16 autocast on CUDA, float32 on CPU), ``fp32``, ``fp16`` or ``bf16``
    :param encoder: an already-loaded :class:`~hopscotch.retriever.model.dense_encoder.DenseEncoder` to use instead of loading one
    :param wait_timeout: how long rank 0 waits for the other ranks' shards (None: as long as it takes)
    :return: an :class:`EncodeResult`; its ``meta`` is the finished manifest on rank 0
    """
    if shard_size <= 0 or batch_size <= 0:
        raise UsageError("--shard-size and --batch-size must be positive")
    if precision not in ("auto", "fp32", "fp16", "bf16"):
        raise UsageError(f"precision {precision!r}: use auto, fp32, fp16 or bf16")
    env_rank, env_world, local_rank = distributed_context()
    rank = env_rank if rank is None else rank
    world_size = env_world if world_size is None else world_size
    if not 0 <= rank < world_size:
        raise UsageError(f"rank {rank} outside world size {world_size}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    settings = model_settings(model)
    model_path = settings.path
    if max_length is None:
        max_length = settings.passage_max_len or 256
    prefix = settings.passage_prefix
    config = {"corpus": str(Path(corpus).resolve()), "corpus_files": _corpus_signature(corpus),
              "model_path": str(Path(model_path).resolve()), "max_length": max_length, "shard_size": shard_size,
              "docstore": docstore, "document_format": f"{prefix!r} + title + ' ' + text"}
    _check_config(out_dir, config, overwrite and rank == 0)  # --overwrite: run it with a single process

    result = EncodeResult(out_dir, rank, world_size)
    state = {"encoder": encoder}

    def get_encoder():
        if state["encoder"] is None:
            from hopscotch.retriever.model.dense_encoder import DenseEncoder
            dev = device
            if dev is None:
                import torch
                dev = f"cuda:{local_rank % max(torch.cuda.device_count(), 1)}" if torch.cuda.is_available() else "cpu"
            state["encoder"] = DenseEncoder(model_path, max_length=max_length, batch_size=batch_size, device=dev)
        return state["encoder"]

    from tqdm.auto import tqdm

    counts, block, total = None, None, 0
    if world_size > 1:  # count first, then read only this rank's contiguous block of shards
        counts = file_row_counts(corpus, cache=out_dir / "corpus_counts.json")
        total = sum(counts)
        block = rank_block(num_shards(total, shard_size), rank, world_size)
    bar = tqdm(desc=f"encode rank {rank}/{world_size}", unit="doc", disable=not show_progress,
               total=None if block is None else min(block.stop * shard_size, total) - block.start * shard_size)
    pending = (lambda shard: not _shard_complete(out_dir, shard))
    for shard, docs, size in iter_shards(corpus, shard_size, block, counts, wanted=pending):
        if counts is None:
            total = shard * shard_size + size
        if docs is None:
            result.skipped_shards.append(shard)
            bar.update(size)
            continue
        enc = get_encoder()
        t0 = time.perf_counter()
        with _autocast(enc, precision):
            emb = enc.encode_texts([prefix + format_document(d.title, d.text) for d in docs], batch_size=batch_size)
        write_shard(out_dir, shard, docs, emb, docstore, time.perf_counter() - t0)
        result.encode_seconds += time.perf_counter() - t0
        result.encoded_shards.append(shard)
        result.encoded_docs += len(docs)
        bar.update(size)
        bar.set_postfix(shard=shard, docs_per_s=f"{result.docs_per_second:.0f}")
    bar.close()
    if total == 0:
        raise UsageError(f"{corpus}: the corpus holds no documents")
    if rank != 0:
        return result
    _wait_for_shards(out_dir, num_shards(total, shard_size), wait_timeout, poll_seconds, show_progress)
    if not result.encoded_shards:
        result.meta = _finished_meta(out_dir, total, shard_size, str(model),
                                     reasoning_aware or settings.reasoning_aware)
        if result.meta is not None:
            return result
    result.meta = finalize_index(out_dir, corpus, str(model), model_path, max_length, shard_size, total,
                                 docstore, reasoning_aware or settings.reasoning_aware, show_progress,
                                 passage_prefix=prefix)
    return result


def _autocast(encoder, precision: str):
    """Mixed precision for the forward pass: ``auto`` is float16 on CUDA (tensor cores) and float32 on CPU."""
    import contextlib

    import torch

    device = torch.device(encoder.device)
    if precision == "auto":
        precision = "fp16" if device.type == "cuda" else "fp32"
    if precision == "fp32":
        return contextlib.nullcontext()
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision)
    if dtype is None:
        raise UsageError(f"precision {precision!r}: use auto, fp32, fp16 or bf16")
    return torch.autocast(device.type, dtype=dtype)


def _wait_for_shards(out_dir: Path, total_shards: int, timeout: float | None, poll: float, show_progress: bool):
    from tqdm.auto import tqdm

    deadline = None if timeout is None else time.monotonic() + timeout
    missing = [s for s in range(total_shards) if not _shard_complete(out_dir, s)]
    if not missing:
        return
    bar = tqdm(total=total_shards, initial=total_shards - len(missing), desc="waiting for other ranks", unit="shard",
               disable=not show_progress)
    while missing:
        if deadline is not None and time.monotonic() > deadline:
            bar.close()
            raise UsageError(f"{out_dir}: shards {missing[:10]} not finished by the other ranks; rerun "
                             "'hopscotch index' with the same flags to encode them")
        time.sleep(poll)
        still = [s for s in missing if not _shard_complete(out_dir, s)]
        bar.update(len(missing) - len(still))
        missing = still
    bar.close()


def _finished_meta(out_dir: Path, num_docs: int, shard_size: int, model: str, reasoning_aware: bool
                   ) -> IndexMeta | None:
    """The existing manifest when a rerun found nothing to do (so the lookup table is not rebuilt)."""
    try:
        meta = IndexMeta.load(out_dir)
    except UsageError:
        return None
    if (meta.num_docs, meta.shard_size) != (num_docs, shard_size) or not (out_dir / "lookup" / "rows.npy").is_file():
        return None
    if (meta.model, meta.reasoning_aware) != (model, reasoning_aware):
        meta.model, meta.reasoning_aware = model, reasoning_aware
        meta.save(out_dir)
    return meta


def finalize_index(out_dir: Path, corpus, model: str, model_path: str, max_length: int | None, shard_size: int,
                   num_docs: int, docstore: bool, reasoning_aware: bool, show_progress: bool = True,
                   passage_prefix: str = "") -> IndexMeta:
    """Check every shard, build the docid lookup and write ``index.json``."""
    shards_total = num_shards(num_docs, shard_size)
    dims = set()
    for shard in range(shards_total):
        marker = read_done_marker(out_dir, shard)
        expected = min(shard_size, num_docs - shard * shard_size)
        if marker is None or marker.get("num_docs") != expected:
            raise UsageError(f"{shard_file(out_dir, shard, 'done.json')}: expected a finished shard of {expected} "
                             f"documents, found {marker}")
        dims.add(marker["dim"])
    extra = [s for s in done_shards(out_dir) if s >= shards_total]
    if extra:
        raise UsageError(f"{out_dir}: shards {extra[:5]} lie beyond the corpus ({num_docs} documents); "
                         "the corpus changed since they were encoded: use --overwrite")
    if len(dims) != 1:
        raise UsageError(f"{out_dir}: shards disagree on the embedding dimension {sorted(dims)}")
    old = None
    if (out_dir / META_FILE).is_file():
        try:
            old = IndexMeta.load(out_dir)
        except UsageError:
            old = None
    meta = IndexMeta(model=model, model_path=str(model_path), max_length=max_length, dim=dims.pop(),
                     num_docs=num_docs, num_shards=shards_total, shard_size=shard_size,
                     reasoning_aware=reasoning_aware, docstore=docstore, corpus=str(corpus),
                     passage_prefix=passage_prefix,
                     faiss=old.faiss if old is not None and old.num_docs == num_docs else {})
    build_docid_lookup(out_dir, meta, corpus=str(corpus), show_progress=show_progress)
    meta.save(out_dir)
    if show_progress:
        print(f"index manifest: {num_docs:,} documents in {shards_total} shards, dim {meta.dim}", file=sys.stderr)
    return meta
