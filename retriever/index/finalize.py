"""Finishing an index folder once its shards are all done: check them, build the docid lookup, write ``index.json``.

``job`` is what :func:`hopscotch.retriever.index.encode.encode_corpus` resolved for the folder (its corpus,
model, options and the ``encode_config.json`` fingerprints); the documents' folder and the ``windows/`` folder
are finished the same way.

Example (not run: it needs an encoding job)::

    meta = finished_meta(job, num_docs) or finalize_index(job, num_docs)
"""

from __future__ import annotations

import sys
from pathlib import Path

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.index.corpus_shards import num_shards
from hopscotch.retriever.index.docstore import build_docid_lookup
from hopscotch.retriever.index.layout import LOOKUP_DIR, META_FILE, IndexMeta, done_shards, read_done_marker, shard_file


def load_meta(out_dir: Path) -> IndexMeta | None:
    try:
        return IndexMeta.load(out_dir)
    except UsageError:
        return None


def finished_meta(job, num_docs: int) -> IndexMeta | None:
    """The existing manifest when a rerun found nothing to do and it describes these very shards (so neither
    the lookup table nor ``index.json`` is rewritten)."""
    meta = load_meta(job.out_dir)
    if meta is None or (meta.num_docs, meta.shard_size) != (num_docs, job.options.shard_size):
        return None
    if not (job.out_dir / LOOKUP_DIR / "rows.npy").is_file():
        return None
    if meta.encode_sha256 != job.fingerprints["encode_sha256"]:
        return None
    return meta


def checked_dim(out_dir: Path, num_docs: int, shard_size: int) -> int:
    """The embedding dimension of the shards, once each of them is checked finished and whole."""
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
    return dims.pop()


def finalize_index(job, num_docs: int) -> IndexMeta:
    """Check every shard, build the docid lookup and write ``index.json`` (keeping the FAISS indexes an
    earlier manifest recorded over the same documents)."""
    out_dir, opts = job.out_dir, job.options
    dim = checked_dim(out_dir, num_docs, opts.shard_size)
    old = load_meta(out_dir) if (out_dir / META_FILE).is_file() else None
    same = old is not None and (old.num_docs, old.encode_sha256) == (num_docs, job.fingerprints["encode_sha256"])
    meta = IndexMeta(model=job.model, model_path=str(job.settings.path), max_length=opts.max_length, dim=dim,
                     num_docs=num_docs, num_shards=num_shards(num_docs, opts.shard_size),
                     shard_size=opts.shard_size, reasoning_aware=job.reasoning_aware, docstore=opts.docstore,
                     query_input=job.settings.query_input,
                     corpus=str(job.corpus), passage_prefix=job.settings.passage_prefix,
                     faiss=old.faiss if same else {}, truncate_dim=opts.truncate_dim, **job.fingerprints)
    build_docid_lookup(out_dir, meta, corpus=str(job.corpus), show_progress=opts.show_progress)
    meta.save(out_dir)
    if opts.show_progress:
        print(f"index manifest: {num_docs:,} documents in {meta.num_shards} shards, dim {meta.dim}",
              file=sys.stderr)
    return meta
