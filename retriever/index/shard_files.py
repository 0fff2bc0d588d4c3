"""One encoded shard on disk: written atomically (its ``done.json`` marker last), checked for completeness.

The files of shard ``i`` are described in :mod:`hopscotch.retriever.index.layout`. A shard counts as done
only when its marker exists and so do all the files the marker vouches for, so a writer killed at any
point leaves a shard that is either complete or redone by the next run. :func:`check_encode_config` guards
the folder as a whole: its shards are resumed only by a run whose ``encode_config.json`` is the same.
"""

from __future__ import annotations

import glob
import json
import os
import time
from pathlib import Path

import numpy as np

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.index.docstore import ShardDocWriter
from hopscotch.retriever.index.layout import (
    DERIVED_PARTS,
    ENCODE_CONFIG_FILE,
    META_FILE,
    SHARD_DIR,
    done_shards,
    read_done_marker,
    remove_parts,
    save_npy,
    shard_file,
    shard_name,
)
from hopscotch.retriever.index.multi_vector.build import MV_DIR
from hopscotch.retriever.io.common import write_json
from hopscotch.retriever.io.corpus import Document
from hopscotch.retriever.io.fingerprint import manifest_differences
from hopscotch.retriever.io.progress import progress


def _remove_partial(out_dir: Path, shard: int) -> None:
    """Delete the leftovers of an interrupted write of ``shard`` (temp files and unmarked parts)."""
    folder = out_dir / SHARD_DIR
    marker = shard_file(out_dir, shard, "done.json")
    if marker.exists():
        os.unlink(marker)  # first, so a crash below can never leave a marker over missing files
    for f in glob.glob(str(folder / f".{shard_name(shard)}.*")) + glob.glob(str(folder / f"{shard_name(shard)}.*")):
        os.unlink(f)


def remove_shard(out_dir: Path, shard: int) -> None:
    """Delete a shard's files, its marker first (a crash midway leaves a shard that is simply not done)."""
    _remove_partial(out_dir, shard)


def shard_complete(out_dir: Path, shard: int) -> bool:
    """A shard is done when its marker exists and so do all the files the marker vouches for."""
    marker = read_done_marker(out_dir, shard)
    if marker is None:
        return False
    needed = (["emb.npy", "ids.npy"] + (["docs.jsonl", "offsets.npy"] if marker.get("docstore") else [])
              + list(marker.get("extra") or []))
    return all(shard_file(out_dir, shard, k).is_file() for k in needed)


def write_shard(out_dir: Path, shard: int, docs: list[Document], emb: np.ndarray, docstore: bool,
                seconds: float, extra: dict[str, np.ndarray] | None = None, marker: dict | None = None) -> None:
    """Write one shard's files atomically, the ``done.json`` marker last; ``extra`` (``{kind: array}``, e.g. a
    multi-vector model's ``tok.npy`` and ``doclens.npy``) are written as ``shard_XXXXX.<kind>`` and vouched for
    by the marker; ``marker`` adds fields to it (e.g. the rank that encoded the shard)."""
    ids = np.array([d.docid.encode("utf-8") for d in docs], dtype=bytes)
    write_rows(out_dir, shard, ids, emb, seconds, extra, marker, docs if docstore else None)


def write_rows(out_dir: Path, shard: int, ids: np.ndarray, emb: np.ndarray, seconds: float,
               extra: dict[str, np.ndarray] | None = None, marker: dict | None = None,
               docs: list[Document] | None = None) -> None:
    """:func:`write_shard` of rows already encoded (``ids``: numpy bytes), with a docstore of ``docs`` when given;
    a shard may hold no rows (``emb`` of shape ``[0, d]``)."""
    folder = out_dir / SHARD_DIR
    folder.mkdir(parents=True, exist_ok=True)
    _remove_partial(out_dir, shard)
    save_npy(shard_file(out_dir, shard, "emb.npy"), emb.astype(np.float16))
    save_npy(shard_file(out_dir, shard, "ids.npy"), ids)
    for kind, array in sorted((extra or {}).items()):
        save_npy(shard_file(out_dir, shard, kind), array)
    if docs is not None:
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
    first, last = (ids[0].decode("utf-8"), ids[-1].decode("utf-8")) if len(ids) else (None, None)
    write_json(shard_file(out_dir, shard, "done.json"),
               {"shard": shard, "num_docs": len(ids), "dim": int(emb.shape[1]), "docstore": docs is not None,
                "first_docid": first, "last_docid": last, "seconds": round(seconds, 3),
                **({"extra": sorted(extra)} if extra else {}), **(marker or {})})


# what each encode_config.json key is, for the refusal message
_SUBJECTS = {"corpus": "the corpus", "corpus_files": "the corpus content", "model_path": "the model",
             "model_files": "the model weights", "format": "the config format"}


def _by_content(config: dict) -> dict:
    """``config`` as a resume compares it: by content, not by where it is read from. The corpus and model paths are
    left out, and the corpus files are listed in order by their content fingerprints (not by their absolute paths), so
    the same bytes read from another path (a copy, a moved checkout) resume; any content change still refuses."""
    out = {k: v for k, v in config.items() if k not in ("corpus", "model_path")}
    files = config.get("corpus_files")
    if isinstance(files, dict):
        out["corpus_files"] = [files[k] for k in files]
    return out


def _refusal(path: Path, old: dict | None, config: dict) -> str | None:
    """Why the shards under ``path``'s folder cannot be resumed with ``config`` (None: they can)."""
    rerun = "rerun with --overwrite to start again (or use another --out)"
    if old is None:
        return f"{path}: unreadable, so the shards beside it cannot be checked; {rerun}"
    if old.get("format") != config["format"]:
        return (f"{path}: the shards here have different settings (imported with --import-tevatron, or encoded "
                f"by an earlier Hopscotch without the content fingerprints a resume checks); {rerun}")
    diffs = manifest_differences(_by_content(old), _by_content(config), first="corpus", then="then")
    if not diffs:
        return None
    keys = dict.fromkeys(d.split(":", 1)[0].split("[", 1)[0].split(".", 1)[0] for d in diffs)
    subjects = ", ".join(dict.fromkeys(_SUBJECTS.get(k, f"--{k.replace('_', '-')}") for k in keys))
    if "corpus_files" in keys:
        subjects = subjects.replace("the corpus content", f"the corpus content ({config['corpus']})")
    shown = "; ".join(diffs[:3]) + (f"; and {len(diffs) - 3} more" if len(diffs) > 3 else "")
    return f"{path}: {subjects} changed since the shards were written ({shown}); {rerun}"


def check_encode_config(out_dir: Path, config: dict, overwrite: bool) -> None:
    """Write ``encode_config.json``, or check that an existing one matches (a resume); with ``overwrite``
    (or no config and no shards) start again. Shards without a config are refused too."""
    path = out_dir / ENCODE_CONFIG_FILE
    if not overwrite:
        if path.is_file():
            try:
                old = json.loads(path.read_text())
            except json.JSONDecodeError:
                old = None
            reason = _refusal(path, old if isinstance(old, dict) else None, config)
            if reason:
                raise UsageError(reason)
            return
        if done_shards(out_dir) or (out_dir / META_FILE).exists():
            raise UsageError(f"{out_dir}: holds shards but no {ENCODE_CONFIG_FILE} saying what they were encoded "
                             "from; rerun with --overwrite to start again (or use another --out)")
    if overwrite:  # everything derived from the old shards goes: shards, manifest, lookup, FAISS indexes, windows,
        # the multi-vector codec and compressed tokens (whose markers would otherwise vouch for the old shards')
        remove_parts(out_dir, DERIVED_PARTS + (MV_DIR,), ignore_errors=True)
    write_json(path, config)


def wait_for_shards(out_dir: Path, total_shards: int, timeout: float | None, poll_seconds: float,
                    show_progress: bool) -> None:
    """Block until shards ``0 .. total_shards - 1`` of ``out_dir`` are all done (rank 0 waiting for the other
    ranks); past ``timeout`` seconds, a :class:`UsageError` names the missing shards."""
    deadline = None if timeout is None else time.monotonic() + timeout
    missing = [s for s in range(total_shards) if not shard_complete(out_dir, s)]
    if not missing:
        return
    bar = progress(total=total_shards, initial=total_shards - len(missing), desc="waiting for other ranks",
                   unit="shard", show=show_progress)
    while missing:
        if deadline is not None and time.monotonic() > deadline:
            bar.close()
            raise UsageError(f"{out_dir}: shards {missing[:10]} not finished by the other ranks; rerun "
                             "'hopscotch index' with the same flags to encode them")
        time.sleep(poll_seconds)
        still = [s for s in missing if not shard_complete(out_dir, s)]
        bar.update(len(missing) - len(still))
        missing = still
    bar.close()
