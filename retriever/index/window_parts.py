"""The ``windows/`` index of long documents, encoded by every rank: each rank encodes the windows of its own
document shards, rank 0 gathers them into the index's shards.

Part ``j`` (``windows/parts/shards/shard_XXXXX.*``, written like any shard, its ``done.json`` naming the rank
that encoded it) holds the windows (:class:`~hopscotch.retriever.index.windows.TailWindows`) of document shard
``j``, in corpus order: any number of them, none included. So the ranks split the windows as they split the
documents (:func:`~hopscotch.retriever.index.corpus_shards.rank_block`). Once every part is done, rank 0
records their sizes and ranks in ``windows/parts.json`` and copies their rows, in order, into
``windows/shards/``: shard ``i`` holds the windows at positions ``[i * shard_size, (i + 1) * shard_size)`` of
the corpus's window stream, the layout of any index folder (:mod:`hopscotch.retriever.index.layout`), and the
ids and rows one process streaming the corpus's windows writes. A part is deleted once all its rows lie in
finished shards, so the windows take their own size on disk plus about one part while they are gathered.

Everything resumes: a killed run encodes only the unfinished parts (none once ``parts.json`` exists) and
gathers only the unfinished shards.

Example::

    encode_parts(corpus, "idx", "idx/windows", view, 100_000, rank, world, num_docs, encode)  # every rank
    rows = gather_parts("idx/windows", num_shards(num_docs, 100_000), 100_000)                # rank 0, then
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.index.corpus_shards import file_row_counts, iter_shards, num_shards, rank_block
from hopscotch.retriever.index.layout import load_shard_embeddings, load_shard_ids, read_done_marker, shard_file
from hopscotch.retriever.index.shard_files import remove_shard, shard_complete, write_rows
from hopscotch.retriever.io.common import write_json
from hopscotch.retriever.io.corpus import Document

PARTS_DIR = "parts"
SIZES_FILE = "parts.json"


def parts_dir(windows_dir: str | Path) -> Path:
    return Path(windows_dir) / PARTS_DIR


def parts_gathered(windows_dir: str | Path) -> bool:
    """Every part was done once (their sizes are recorded); encoding them is over, gathering may not be."""
    return (Path(windows_dir) / SIZES_FILE).is_file()


def encode_parts(corpus, index_dir: Path, windows_dir: Path, view: Callable[[Document], list[Document]],
                 shard_size: int, rank: int, world_size: int, num_docs: int,
                 encode: Callable[[list[Document]], np.ndarray], show_progress: bool = True) -> tuple[list[int], int]:
    """Encode this rank's unfinished parts: the windows (``view``) of its block of document shards, each with
    ``encode`` (documents -> embeddings); returns the parts encoded and the windows in them."""
    from hopscotch.retriever.io.progress import progress

    if parts_gathered(windows_dir):
        return [], 0
    folder = parts_dir(windows_dir)
    counts, block = None, None
    if world_size > 1:  # the same contiguous block of shards as this rank's documents
        counts = file_row_counts(corpus, cache=Path(index_dir) / "corpus_counts.json")
        block = rank_block(num_shards(num_docs, shard_size), rank, world_size)
    size = num_docs if block is None else min(block.stop * shard_size, num_docs) - block.start * shard_size
    bar = progress(desc=f"windows rank {rank}/{world_size}", unit="doc", total=size, show=show_progress)
    encoded, windows = [], 0
    for shard, docs, n in iter_shards(corpus, shard_size, block, counts,
                                      wanted=lambda s: not shard_complete(folder, s)):
        if docs is not None:
            t0 = time.perf_counter()
            ids, emb = _encode_windows(docs, view, encode, shard_size)
            write_rows(folder, shard, ids, emb, time.perf_counter() - t0, marker={"rank": rank, "documents": len(docs)})
            encoded.append(shard)
            windows += len(ids)
            bar.set_postfix(shard=shard, windows=windows)
        bar.update(n)
    bar.close()
    return encoded, windows


def _encode_windows(docs: list[Document], view, encode, chunk: int) -> tuple[np.ndarray, np.ndarray]:
    """The ids and float16 embeddings of ``docs``' windows, encoded about ``chunk`` at a time (as much as a shard of
    documents), so a part of many windows holds no more texts or float32 vectors than a shard does."""
    ids, embs, pending = [], [], []
    for i, doc in enumerate(docs):
        pending += view(doc)
        if pending and (len(pending) >= chunk or i == len(docs) - 1):
            embs.append(encode(pending).astype(np.float16))
            ids += [w.docid.encode("utf-8") for w in pending]
            pending = []
    return np.array(ids, dtype=bytes), np.concatenate(embs) if embs else np.zeros((0, 0), dtype=np.float16)


def _part_sizes(windows_dir: Path, num_parts: int) -> list[dict]:
    """``parts.json``'s ``[{rows, rank}]`` of each part, written from the parts' markers the first time."""
    path = windows_dir / SIZES_FILE
    if not path.is_file():
        folder = parts_dir(windows_dir)
        markers = [read_done_marker(folder, j) for j in range(num_parts)]
        missing = [j for j, m in enumerate(markers) if m is None or not shard_complete(folder, j)]
        if missing:
            raise UsageError(f"{shard_file(folder, missing[0], 'done.json')}: window parts {missing[:10]} are not "
                             "finished; rerun 'hopscotch index' with the same flags to encode them")
        write_json(path, {"parts": [{"rows": m["num_docs"], "rank": m.get("rank")} for m in markers]})
    try:
        parts = json.loads(path.read_text())["parts"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise UsageError(f"{path}: unreadable window part sizes ({exc}); rerun with --overwrite") from None
    if len(parts) != num_parts:
        raise UsageError(f"{path}: records {len(parts)} window parts, the documents have {num_parts} shards; "
                         "rerun with --overwrite")
    return parts


def gather_parts(windows_dir: str | Path, num_parts: int, shard_size: int, show_progress: bool = True) -> int:
    """Copy the finished parts' rows, in order, into ``windows_dir``'s shards of ``shard_size`` (the unfinished
    ones), deleting each part once its rows are all in finished shards; returns the number of windows."""
    from hopscotch.retriever.io.progress import progress

    windows_dir = Path(windows_dir)
    parts = _part_sizes(windows_dir, num_parts)
    folder = parts_dir(windows_dir)
    ends = np.cumsum([0] + [p["rows"] for p in parts])
    total = int(ends[-1])
    gone = 0  # parts [0, gone) are deleted
    for shard in progress(range(num_shards(total, shard_size)), desc="gather windows", unit="shard",
                          show=show_progress):
        lo, hi = shard * shard_size, min((shard + 1) * shard_size, total)
        if not shard_complete(windows_dir, shard):
            _gather_shard(windows_dir, shard, parts, ends, lo, hi)
        while gone < num_parts and ends[gone + 1] <= hi:
            remove_shard(folder, gone)
            gone += 1
    shutil.rmtree(folder, ignore_errors=True)
    return total


def _gather_shard(windows_dir: Path, shard: int, parts: list[dict], ends: np.ndarray, lo: int, hi: int) -> None:
    """Write shard ``shard`` of ``windows_dir``: window rows ``[lo, hi)``, read from the parts holding them."""
    t0 = time.perf_counter()
    folder = parts_dir(windows_dir)
    embs, ids, used = [], [], []
    for j in range(int(np.searchsorted(ends, lo, side="right")) - 1, len(parts)):
        if ends[j] >= hi:
            break
        if ends[j + 1] <= max(lo, ends[j]):  # a part without windows
            continue
        a, b = max(lo, ends[j]) - ends[j], min(hi, ends[j + 1]) - ends[j]
        emb, part_ids = load_shard_embeddings(folder, j), load_shard_ids(folder, j)
        if len(emb) != ends[j + 1] - ends[j] or len(part_ids) != len(emb):
            raise UsageError(f"{shard_file(folder, j, 'emb.npy')}: {len(emb)} rows and {len(part_ids)} ids, "
                             f"{windows_dir / SIZES_FILE} says {ends[j + 1] - ends[j]}; rerun with --overwrite")
        embs.append(np.asarray(emb[a:b]))
        ids.append(np.asarray(part_ids[a:b]))
        used.append(j)
    ids = np.concatenate(ids)  # as wide as the widest part: narrowed to this shard's longest id, as encoding writes it
    ids = ids.astype(f"S{max(1, int(np.char.str_len(ids).max()))}")
    write_rows(windows_dir, shard, ids, np.concatenate(embs), time.perf_counter() - t0,
               marker={"parts": used, "ranks": sorted({parts[j]["rank"] for j in used} - {None})})
