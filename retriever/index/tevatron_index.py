"""An index folder from Tevatron encode pickles, and an index folder's embeddings as such pickles.

:func:`import_tevatron` reads the pickles ``(reps, lookup)`` a glob names (the published BrowseComp-Plus dense
indexes, through the restricted unpickler of :mod:`hopscotch.retriever.io.tevatron`), rechunks them into shards
of ``shard_size`` rows (float16 embeddings and docids, the documents too when a corpus gives their texts), writes
the docid lookup, ``index.json`` and the FAISS index ``spec``. Vectors are kept as they are (not re-normalised).
:func:`export_tevatron` writes one pickle per shard of a finished index (``PREFIX.<shard>.pkl``: float32 reps,
docid list). ``hopscotch index --import-tevatron / --export-tevatron`` checks its outputs, then calls these.

Example (not run: it needs Tevatron's pickles)::

    result = import_tevatron("corpus.*.pkl", "index_dir", corpus="corpus.jsonl", spec="Flat")
    result.meta.num_docs, result.pickles
    export_tevatron("index_dir", "out/corpus")          # out/corpus.0.pkl, out/corpus.1.pkl, ...
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hopscotch.retriever.errors import FormatError, UsageError
from hopscotch.retriever.index.docstore import build_docid_lookup
from hopscotch.retriever.index.faiss_index import build_faiss_index
from hopscotch.retriever.index.faiss_spec import check_spec
from hopscotch.retriever.index.layout import (
    DERIVED_PARTS,
    ENCODE_CONFIG_FILE,
    IndexMeta,
    iter_shard_docids,
    load_shard_embeddings,
    remove_parts,
)
from hopscotch.retriever.index.shard_files import write_shard
from hopscotch.retriever.io.common import write_json
from hopscotch.retriever.io.corpus import Document, load_corpus_dict
from hopscotch.retriever.io.fingerprint import digest, model_fingerprint
from hopscotch.retriever.io.tevatron import (
    read_tevatron_pickle,
    tevatron_export_path,
    tevatron_pickle_paths,
    write_tevatron_pickle,
)
from hopscotch.retriever.model.config import ModelSettings, model_settings


@dataclass(frozen=True)
class TevatronImport:
    """What :func:`import_tevatron` built: the index manifest, the pickles read and the seconds it took."""

    meta: IndexMeta
    pickles: list[Path]
    seconds: float


def rechunk(parts: Iterable[tuple[np.ndarray, list[str]]], size: int) -> Iterator[tuple[np.ndarray, list[str]]]:
    """``(reps, docids)`` parts of any sizes -> blocks of exactly ``size`` rows (the last one shorter)."""
    embs, ids, held = [], [], 0
    for reps, docids in parts:
        embs.append(reps)
        ids.extend(docids)
        held += len(docids)
        while held >= size:
            block = np.concatenate(embs) if len(embs) > 1 else embs[0]
            yield block[:size], ids[:size]
            embs, ids, held = [block[size:]], ids[size:], held - size
    if held:
        yield (np.concatenate(embs) if len(embs) > 1 else embs[0]), ids


def clear_index_folder(out: Path, overwrite: bool) -> None:
    """Remove an index's parts from ``out`` (other files stay); an index there without ``overwrite`` is refused."""
    parts = [n for n in DERIVED_PARTS + (ENCODE_CONFIG_FILE,) if (out / n).exists()]
    if parts and not overwrite:
        raise UsageError(f"{out} already holds an index; use another --out, or --overwrite to replace it")
    remove_parts(out, parts)


def import_tevatron(pattern: str, out: str | os.PathLike, *, corpus: str | None = None, model: str | None = None,
                    model_dim: int | None = None, spec: str = "Flat", layout: str = "shards",
                    shard_size: int = 100_000, train_size: int | None = None, max_length: int | None = None,
                    reasoning_aware: bool = False, overwrite: bool = False,
                    use_gpu: bool | None = None) -> TevatronImport:
    """Tevatron pickles ``pattern`` (a glob) -> the index folder ``out`` (module doc).

    ``corpus``: the documents' texts (every docid of the pickles must be in it; None: no docstore). ``model``:
    the query encoder recorded in ``index.json``, ``model_dim`` its embedding dimension (pickles of another
    dimension are refused before anything is written). ``layout`` (``shards`` or ``merged``), ``train_size`` and
    ``use_gpu`` go to :func:`~hopscotch.retriever.index.faiss_index.build_faiss_index`; ``overwrite`` replaces an
    index already in ``out``."""
    if shard_size <= 0:
        raise UsageError("--shard-size must be positive")
    check_spec(spec, train_size=train_size)
    t0, out = time.perf_counter(), Path(out)
    paths = tevatron_pickle_paths(pattern)
    settings = model_settings(model) if model else ModelSettings("")
    docs = load_corpus_dict(corpus) if corpus else None
    first = read_tevatron_pickle(paths[0])  # checked before anything is written, then used as the first part
    if model and model_dim is not None and first.reps.shape[1] != model_dim:
        raise UsageError(f"{paths[0]}: {first.reps.shape[1]}-d vectors, but the query encoder --model {model} "
                         f"makes {model_dim}-d ones: queries could not be searched against them (give the model "
                         "that encoded the pickles)")
    clear_index_folder(out, overwrite)
    write_json(out / ENCODE_CONFIG_FILE, {"tevatron_pickles": [str(p.resolve()) for p in paths],
                                          "corpus": corpus, "shard_size": shard_size})
    dims: list[int] = []

    def parts():
        for path in paths:
            part = first if path == paths[0] else read_tevatron_pickle(path)
            dims.append(part.reps.shape[1])
            if dims[-1] != dims[0]:
                raise FormatError(path, None, f"{dims[0]}-d reps like {paths[0]}", f"shape {part.reps.shape}")
            if np.abs(part.reps).max(initial=0.0) > np.finfo(np.float16).max:
                raise FormatError(path, None, "reps within the float16 range the index stores", "larger values")
            yield part.reps, part.docids

    num_docs = shard = 0
    for shard, (emb, ids) in enumerate(rechunk(parts(), shard_size)):
        if docs is not None and (missing := next((d for d in ids if d not in docs), None)) is not None:
            raise FormatError(corpus, None, "every docid of the pickles", f"no document {missing!r}")
        rows = [docs[d] for d in ids] if docs is not None else [Document(d, "", "") for d in ids]
        write_shard(out, shard, rows, emb, docs is not None, 0.0)
        num_docs += len(ids)
    if not num_docs:
        raise UsageError(f"--import-tevatron {pattern!r}: the pickles hold no embeddings")
    meta = IndexMeta(model=model or "", model_path=str(settings.path), max_length=max_length,
                     dim=dims[0], num_docs=num_docs, num_shards=shard + 1, shard_size=shard_size,
                     reasoning_aware=reasoning_aware or settings.reasoning_aware,
                     query_input=settings.query_input, docstore=docs is not None, corpus=corpus or "",
                     passage_prefix=settings.passage_prefix,
                     model_sha256=digest(model_fingerprint(settings.path)) if model else "")
    build_docid_lookup(out, meta, corpus=pattern, show_progress=False)
    meta.save(out)
    build_faiss_index(out, spec, layout=layout, train_size=train_size, use_gpu=use_gpu)
    return TevatronImport(meta, paths, time.perf_counter() - t0)


def export_tevatron(index_dir: str | os.PathLike, prefix: str | os.PathLike) -> IndexMeta:
    """One Tevatron pickle per shard of the finished index ``index_dir``: ``PREFIX.<shard>.pkl`` =
    ``(float32 reps, docids)``; returns the index's manifest."""
    meta = IndexMeta.load(index_dir)
    for shard in range(meta.num_shards):
        write_tevatron_pickle(tevatron_export_path(prefix, shard), load_shard_embeddings(index_dir, shard),
                              list(iter_shard_docids(index_dir, shard)))
    return meta
