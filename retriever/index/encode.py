"""Sharded, resumable, multi-process corpus encoding.

The corpus is streamed (JSONL, parquet, BEIR folders, ClimbMix shard folders) and cut by position into
shards of ``shard_size`` documents. Each shard is encoded with length-sorted batches and written as
float16 embeddings plus a docid array (and, by default, its documents for the docstore); every file goes
to a temporary name first and a ``done.json`` marker is written last, so a shard either exists
completely or not at all. A killed job rerun with the same arguments skips every finished shard and
starts at the first unfinished one: no document is lost or encoded twice. ``encode_config.json`` records
what decides the shards (the corpus files' content, the model folder's files, the flags; see
:meth:`_EncodeJob.config`), and a rerun that differs in any of it is refused with the difference named
(``--overwrite`` starts again), so shards of two corpora, models or settings never mix in one index.

Several processes split the shards by rank: each takes a contiguous block of shards and opens only the
corpus files that overlap it (see :mod:`hopscotch.retriever.index.corpus_shards`); the rank and world size come from
``torchrun`` / ``accelerate launch`` (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``) and each process uses
``cuda:LOCAL_RANK`` when a GPU is present. Rank 0 waits for the other ranks' shards
and writes the manifest (``index.json``) and the docid lookup table. With ``--windows`` each rank then encodes
the windows of its own shards' long documents, and rank 0 gathers them into ``windows/``
(:mod:`hopscotch.retriever.index.windows`).

Example (not run here: docs/python.md runs it on a small corpus)::

    from hopscotch.retriever.index.encode import EncodeOptions, encode_corpus
    result = encode_corpus("corpus.jsonl", "minilm", "index_dir",
                           EncodeOptions(shard_size=100_000, batch_size=128, max_length=256))
    result.meta.num_docs, result.encoded_shards, result.docs_per_second
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.index.corpus_shards import file_row_counts, iter_shards, num_shards, rank_block
from hopscotch.retriever.index.finalize import finalize_index, finished_meta, load_meta
from hopscotch.retriever.index.layout import META_FILE, SHARD_DIR, WINDOWS_DIR, IndexMeta
from hopscotch.retriever.index.multi_vector.build import build_multi_vector_index, checked_codec_options
from hopscotch.retriever.index.multi_vector.encode import TokenShardEncoder
from hopscotch.retriever.index.shard_files import check_encode_config, shard_complete, wait_for_shards, write_shard
from hopscotch.retriever.index.windows import (
    TailWindows,
    encode_parts,
    gather_parts,
    model_window_spec,
    parts_dir,
    parts_gathered,
    passage_length,
)
from hopscotch.retriever.io.corpus import Document, corpus_files
from hopscotch.retriever.io.fingerprint import digest, file_fingerprint, model_fingerprint
from hopscotch.retriever.io.progress import progress
from hopscotch.retriever.model.config import ModelSettings, model_settings
from hopscotch.retriever.model.cpu_precision import runnable_precision
from hopscotch.retriever.model.dense_encoder import DenseEncoder
from hopscotch.retriever.model.query_template import format_document

PRECISIONS = ("auto", "fp32", "fp16", "bf16")
CONFIG_FORMAT = 2  # encode_config.json with content fingerprints (corpus_files, model_files)


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
class EncodeOptions:
    """How :func:`encode_corpus` encodes (the ``hopscotch index`` flags).

    :param shard_size: documents per shard (the unit of resumption and of work split across ranks)
    :param max_length: encoder max tokens per document (None: the model's passage length, else 256)
    :param docstore: also store the documents so a server can return them by docid
    :param reasoning_aware: recorded in the manifest: queries for this model use the reasoning template
    :param precision: ``auto`` (float16 autocast on CUDA, float32 on CPU), ``fp32``, ``fp16`` or ``bf16`` (on CPU:
        float32, with a warning, where the CPU has no bfloat16 instructions)
    :param overwrite: discard shards encoded with other settings (run it with a single process)
    :param rank, world_size: this process's share; default from ``RANK`` / ``WORLD_SIZE``
    :param device: torch device; default ``cuda:LOCAL_RANK`` when CUDA is available, else CPU
    :param wait_timeout: how long rank 0 waits for the other ranks' shards (None: as long as it takes)
    :param poll_seconds: how often rank 0 looks for them
    :param windows: windows a long document is indexed as, its usual first one included (None: the model's
        recorded ``passage_windows``, else 1 = off); each rank encodes the others of its own shards' documents
        after them, rank 0 gathers them into ``windows/`` (:mod:`hopscotch.retriever.index.windows`)
    :param window_stride: tokens between window starts (None: the model's ``window_stride``, else 80% of
        ``max_length``)

    Everything but ``batch_size`` and the process / device / progress knobs is part of ``encode_config.json``:
    a rerun that changes any of it (or the corpus's or the model's files) is refused, naming the difference.
    """

    shard_size: int = 100_000
    batch_size: int = 64
    max_length: int | None = None
    docstore: bool = True
    reasoning_aware: bool = False
    precision: str = "auto"
    overwrite: bool = False
    rank: int | None = None
    world_size: int | None = None
    device: str | None = None
    wait_timeout: float | None = None
    poll_seconds: float = 2.0
    show_progress: bool = True
    windows: int | None = None
    window_stride: int | None = None
    multi_vector: object = None     # MultiVectorOptions of a multi-vector model's token index (None: defaults)
    truncate_dim: int | None = None  # keep each vector's first D dimensions, renormalised (Matryoshka; index --dim)


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
    window_parts: list[int] = field(default_factory=list)  # document shards whose windows this process encoded
    encoded_windows: int = 0

    @property
    def docs_per_second(self) -> float:
        return self.encoded_docs / self.encode_seconds if self.encode_seconds > 0 else 0.0


@dataclass
class _EncodeJob:
    """One process's resolved share of an :func:`encode_corpus` call: ``options`` has its rank, world
    size and max length filled in."""

    corpus: str | os.PathLike
    model: str                  # as given (``minilm`` or a path)
    settings: ModelSettings
    out_dir: Path
    options: EncodeOptions
    local_rank: int
    multi_vector: bool = False  # a multi-vector model: shards also hold token vectors (index.multi_vector.build)
    fingerprints: dict = field(default_factory=dict)  # model_sha256, encode_sha256 (set once the config is checked)
    view: object = None         # the windows/ folder's job: its documents' windows (index.windows.TailWindows)
    encoder: object = None      # the loaded encoder, once one was needed

    @property
    def reasoning_aware(self) -> bool:
        return self.options.reasoning_aware or self.settings.reasoning_aware

    def config(self) -> dict:
        """What ``encode_config.json`` records: everything that decides the shards' bytes (a resume must match
        it): the corpus files' content, the model folder's files (weights, configs, tokenizer), the flags."""
        o = self.options
        return {"format": CONFIG_FORMAT, "corpus": str(Path(self.corpus).resolve()),
                "corpus_files": _corpus_signature(self.corpus),
                "model_path": str(Path(self.settings.path).resolve()),
                "model_files": model_fingerprint(self.settings.path), "max_length": o.max_length,
                "shard_size": o.shard_size, "docstore": o.docstore, "precision": o.precision,
                "reasoning_aware": self.reasoning_aware, **({"truncate_dim": o.truncate_dim} if o.truncate_dim else {}),
                "document_format": f"{self.settings.passage_prefix!r} + title + ' ' + text",
                **self.window_config(), **({"kind": "multi_vector"} if self.multi_vector else {})}

    def window_config(self) -> dict:
        """The window settings (only when windows are on, so folders written without them still resume)."""
        if self.view is not None:
            return {"view": "tail windows", **self.view.spec.encode_config()}
        spec = self.window_spec()
        return spec.encode_config() if spec.enabled else {}

    def window_spec(self):
        o = self.options
        return model_window_spec(self.settings, o.windows, o.window_stride, o.max_length)

    def load_encoder(self):
        device = self.options.device
        if device is None:
            import torch
            device = (f"cuda:{self.local_rank % max(torch.cuda.device_count(), 1)}" if torch.cuda.is_available()
                      else "cpu")
        if self.multi_vector:  # mean token vectors as emb.npy, the tokens beside them
            return TokenShardEncoder.load(self.settings.path, batch_size=self.options.batch_size, device=device)
        return DenseEncoder(self.settings.path, max_length=self.options.max_length,
                            batch_size=self.options.batch_size, device=device, truncate_dim=self.options.truncate_dim)


def _resolve_job(corpus, model, out_dir, options: EncodeOptions) -> _EncodeJob:
    """Check ``options``, fill in the rank, world size and max length, and create ``out_dir``."""
    if options.shard_size <= 0 or options.batch_size <= 0:
        raise UsageError("--shard-size and --batch-size must be positive")
    if options.precision not in PRECISIONS:
        raise UsageError(f"precision {options.precision!r}: use auto, fp32, fp16 or bf16")
    env_rank, env_world, local_rank = distributed_context()
    rank = env_rank if options.rank is None else options.rank
    world_size = env_world if options.world_size is None else options.world_size
    if not 0 <= rank < world_size:
        raise UsageError(f"rank {rank} outside world size {world_size}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    settings = model_settings(model)
    options = replace(options, rank=rank, world_size=world_size, max_length=passage_length(settings, options.max_length))
    from hopscotch.retriever.model.multi_vector import is_multi_vector_folder

    return _EncodeJob(corpus, str(model), settings, out_dir, options, local_rank, is_multi_vector_folder(settings.path))


def _corpus_signature(corpus) -> dict[str, dict]:
    """Each corpus file's content fingerprint (and its ClimbMix shard number), by absolute path."""
    return {str(Path(path).resolve()): {"shard": shard, **file_fingerprint(path)} for shard, path in corpus_files(corpus)}


def encode_corpus(corpus: str | os.PathLike, model: str | os.PathLike, out_dir: str | os.PathLike,
                  options: EncodeOptions | None = None, *, encoder=None) -> EncodeResult:
    """Encode ``corpus`` into resumable shards under ``out_dir`` (see the module docstring).

    :param corpus: corpus file, BEIR folder or shard folder (JSONL, gzipped JSONL or parquet)
    :param model: ``minilm`` or a sentence-transformers / training output folder (a trained model's passage
        prefix and passage length are used)
    :param options: an :class:`EncodeOptions` (default: its defaults)
    :param encoder: an already-loaded :class:`~hopscotch.retriever.model.dense_encoder.DenseEncoder` to use
        instead of loading one
    :return: an :class:`EncodeResult`; its ``meta`` is the finished manifest on rank 0
    """
    fresh = not Path(out_dir).exists()
    try:
        return _encode_corpus(corpus, model, out_dir, options, encoder)
    except Exception:
        # a malformed corpus or a bad setting found before any shard was kept: leave no folder behind
        # (a resumable job's folder is kept; a killed job raises nothing and is resumed by a rerun)
        if fresh and Path(out_dir).is_dir() and not any((Path(out_dir) / SHARD_DIR).glob("*")):
            shutil.rmtree(out_dir, ignore_errors=True)
        raise


def _encode_corpus(corpus, model, out_dir, options: EncodeOptions | None, encoder) -> EncodeResult:
    job = _resolve_job(corpus, model, out_dir, options or EncodeOptions())
    job.encoder = encoder
    opts = job.options
    if job.multi_vector and job.window_spec().enabled:
        raise UsageError("--windows: a multi-vector index holds documents' first tokens; rerank with --rerank-windows")
    config = job.config()
    check_encode_config(job.out_dir, config, opts.overwrite and opts.rank == 0)
    job.fingerprints = {"model_sha256": digest(config["model_files"]), "encode_sha256": digest(config)}
    if job.multi_vector:  # a codec of other settings than the saved one: refused before any work, unless --overwrite
        mv = checked_codec_options(job.out_dir, opts.multi_vector, opts.overwrite, job.fingerprints["encode_sha256"])
        job.options = opts = replace(opts, multi_vector=mv)
    result = EncodeResult(job.out_dir, opts.rank, opts.world_size)
    total = _encode_pending_shards(job, result)
    if total == 0:
        raise UsageError(f"{corpus}: the corpus holds no documents")
    windows = _windows_job(job) if job.window_spec().enabled else None
    shards = num_shards(total, opts.shard_size)
    if opts.rank == 0 and (windows is None or all(shard_complete(job.out_dir, s) for s in range(shards))):
        _finish_documents(job, total, result)  # searchable (first windows only) while the windows are encoded
    if windows is not None and _windows_manifest(windows) is None:  # this rank's shards' windows (index.windows)

        result.window_parts, result.encoded_windows = encode_parts(
            job.corpus, job.out_dir, windows.out_dir, windows.view, opts.shard_size, opts.rank, opts.world_size,
            total, lambda docs: _encode_documents(job, docs), opts.show_progress)
    if opts.rank != 0:
        return result
    if result.meta is None:  # the other ranks' documents were still being encoded
        _finish_documents(job, total, result)
    if windows is not None:
        _finish_windows(job, windows, total, result)
    if job.multi_vector:
        result.meta = build_multi_vector_index(job.out_dir, result.meta, opts.multi_vector)
    return result


def _finish_documents(job: _EncodeJob, total: int, result: EncodeResult) -> None:
    """Rank 0: wait for every rank's document shards, then the manifest and the docid lookup (``result.meta``)."""
    opts = job.options
    wait_for_shards(job.out_dir, num_shards(total, opts.shard_size), opts.wait_timeout, opts.poll_seconds,
                    opts.show_progress)
    meta = finished_meta(job, total) if not result.encoded_shards else None
    result.meta = meta or finalize_index(job, total)


def _windows_job(job: _EncodeJob) -> _EncodeJob:
    """The job of the ``windows/`` folder (every rank): its ``encode_config.json`` (what one process streaming the
    windows recorded) checked or written; its ``view`` cuts a document's windows after the first."""
    from transformers import AutoTokenizer

    tokenizer = job.encoder.model.tokenizer if job.encoder else AutoTokenizer.from_pretrained(job.settings.path)
    view = TailWindows(tokenizer, job.window_spec(), job.settings.passage_prefix)
    windows = replace(job, out_dir=job.out_dir / WINDOWS_DIR, view=view,
                      options=replace(job.options, windows=1, docstore=False))
    windows.out_dir.mkdir(exist_ok=True)
    config = windows.config()
    check_encode_config(windows.out_dir, config, False)  # --overwrite removed windows/ with the documents' folder
    windows.fingerprints = {"model_sha256": digest(config["model_files"]), "encode_sha256": digest(config)}
    return windows


def _windows_manifest(windows: _EncodeJob) -> IndexMeta | None:
    """``windows/index.json`` when it was written with these very settings: the windows are finished."""
    meta = load_meta(windows.out_dir) if (windows.out_dir / META_FILE).is_file() else None
    return meta if meta is not None and meta.encode_sha256 == windows.fingerprints["encode_sha256"] else None


def _finish_windows(job: _EncodeJob, windows: _EncodeJob, total: int, result: EncodeResult) -> None:
    """Rank 0, after the documents: wait for every rank's window parts, gather them into ``windows/`` (resumable),
    then record them in ``index.json`` (until then searches use first windows only)."""
    opts, meta = job.options, result.meta
    finished = _windows_manifest(windows)
    if finished is not None:
        rows = finished.num_docs
    else:
        parts = num_shards(total, opts.shard_size)
        if not parts_gathered(windows.out_dir):
            wait_for_shards(parts_dir(windows.out_dir), parts, opts.wait_timeout, opts.poll_seconds,
                            opts.show_progress)
        rows = gather_parts(windows.out_dir, parts, opts.shard_size, opts.show_progress)
        if rows:
            finalize_index(windows, rows)
    record = {"dir": WINDOWS_DIR, **job.window_spec().to_json(), "rows": rows}
    if meta.windows != record:  # else a finished index rerun: nothing changed
        meta.windows = record
        meta.save(job.out_dir)


def _encode_pending_shards(job: _EncodeJob, result: EncodeResult) -> int:
    """Encode this rank's unfinished shards (loading the encoder only if there is one), recording them in
    ``result``; returns the corpus size (with one rank: as far as it was read, which is all of it)."""
    opts = job.options
    counts, block, total = None, None, 0
    if opts.world_size > 1:  # count first, then read only this rank's contiguous block of shards
        counts = file_row_counts(job.corpus, cache=job.out_dir / "corpus_counts.json")
        total = sum(counts)
        block = rank_block(num_shards(total, opts.shard_size), opts.rank, opts.world_size)
    size_of_block = None if block is None else min(block.stop * opts.shard_size, total) - block.start * opts.shard_size
    bar = progress(desc=f"encode rank {opts.rank}/{opts.world_size}", unit="doc", total=size_of_block,
                   show=opts.show_progress)

    def pending(shard: int) -> bool:
        return not shard_complete(job.out_dir, shard)

    for shard, docs, size in iter_shards(job.corpus, opts.shard_size, block, counts, wanted=pending):
        if counts is None:
            total = shard * opts.shard_size + size
        if docs is None:
            result.skipped_shards.append(shard)
            bar.update(size)
            continue
        if job.encoder is None:
            job.encoder = job.load_encoder()
        _encode_shard(job, job.encoder, shard, docs, result)
        bar.update(size)
        bar.set_postfix(shard=shard, docs_per_s=f"{result.docs_per_second:.0f}")
    bar.close()
    return total


def _encode_shard(job: _EncodeJob, encoder, shard: int, docs: list[Document], result: EncodeResult) -> None:
    t0 = time.perf_counter()
    emb = _encode_documents(job, docs)
    write_shard(job.out_dir, shard, docs, emb, job.options.docstore, time.perf_counter() - t0,
                extra=getattr(encoder, "extra", None))
    result.encode_seconds += time.perf_counter() - t0
    result.encoded_shards.append(shard)
    result.encoded_docs += len(docs)


def _encode_documents(job: _EncodeJob, docs: list[Document]):
    """The embeddings of ``docs`` as the index shows them to the encoder (loaded on first use)."""
    if job.encoder is None:
        job.encoder = job.load_encoder()
    texts = [job.settings.passage_prefix + format_document(d.title, d.text) for d in docs]
    with _autocast(job.encoder, job.options.precision):
        return job.encoder.encode_texts(texts, batch_size=job.options.batch_size)


def _autocast(encoder, precision: str):
    """Mixed precision for the forward pass: ``auto`` is float16 on CUDA (tensor cores) and float32 on CPU;
    ``bf16`` on a CPU without bfloat16 instructions is float32, with a warning
    (:func:`~hopscotch.retriever.model.cpu_precision.runnable_precision`). The encoder casts the pooled vectors
    to float32 and normalises them again before they are written."""
    import torch

    device = torch.device(encoder.device)
    precision = runnable_precision(precision, device.type, "--precision")
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype={"fp16": torch.float16, "bf16": torch.bfloat16}[precision])
