"""One encoded shard on disk: written atomically (its ``done.json`` marker last), checked for completeness.

The files of shard ``i`` are described in :mod:`hopscotch.retriever.index.layout`. A shard counts as done
only when its marker exists and so do all the files the marker vouches for, so a writer killed at any
point leaves a shard that is either complete or redone by the next run.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

import numpy as np

from hopscotch.retriever.index.docstore import ShardDocWriter
from hopscotch.retriever.index.layout import SHARD_DIR, read_done_marker, save_npy, shard_file, shard_name
from hopscotch.retriever.io.common import write_json
from hopscotch.retriever.io.corpus import Document


def _remove_partial(out_dir: Path, shard: int) -> None:
    """Delete the leftovers of an interrupted write of ``shard`` (temp files and unmarked parts)."""
    folder = out_dir / SHARD_DIR
    marker = shard_file(out_dir, shard, "done.json")
    if marker.exists():
        os.unlink(marker)  # first, so a crash below can never leave a marker over missing files
    for f in glob.glob(str(folder / f".{shard_name(shard)}.*")) + glob.glob(str(folder / f"{shard_name(shard)}.*")):
        os.unlink(f)


def shard_complete(out_dir: Path, shard: int) -> bool:
    """A shard is done when its marker exists and so do all the files the marker vouches for."""
    marker = read_done_marker(out_dir, shard)
    if marker is None:
        return False
    needed = ["emb.npy", "ids.npy"] + (["docs.jsonl", "offsets.npy"] if marker.get("docstore") else [])
    return all(shard_file(out_dir, shard, k).is_file() for k in needed)


def write_shard(out_dir: Path, shard: int, docs: list[Document], emb: np.ndarray, docstore: bool,
                seconds: float) -> None:
    """Write one shard's files atomically, the ``done.json`` marker last."""
    folder = out_dir / SHARD_DIR
    folder.mkdir(parents=True, exist_ok=True)
    _remove_partial(out_dir, shard)
    ids = np.array([d.docid.encode("utf-8") for d in docs], dtype=bytes)
    save_npy(shard_file(out_dir, shard, "emb.npy"), emb.astype(np.float16))
    save_npy(shard_file(out_dir, shard, "ids.npy"), ids)
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
        save_npy(shard_file(out_dir, shard, "offsets.npy"), offsets)
    write_json(shard_file(out_dir, shard, "done.json"),
               {"shard": shard, "num_docs": len(docs), "dim": int(emb.shape[1]), "docstore": docstore,
                "first_docid": docs[0].docid, "last_docid": docs[-1].docid, "seconds": round(seconds, 3)})
