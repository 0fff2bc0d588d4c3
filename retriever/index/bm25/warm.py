"""Compile the disk BM25 backend's numba kernels once, so that a user's first search is as fast as the second.

numba compiles :mod:`.kernel`'s functions on their first call (about 8 s on 2 cores) and caches the machine code
beside the module (``cache=True``); a fresh install's first ``hopscotch search`` over a disk index would pay it.
``scripts/setup.sh`` runs this module after installing; after ``pip install hopscotch`` run it once yourself::

    python -m hopscotch.retriever.index.bm25.warm

It builds a tiny disk index in a temporary folder and searches it plainly and weighted, which calls every kernel
with the argument types a real index gives them (uint32 rows, float32 impacts, int64 pointers).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from hopscotch.retriever.index.bm25.disk import DiskBM25Index
from hopscotch.retriever.index.bm25.disk_build import DiskBuildOptions, build_disk_index
from hopscotch.retriever.index.bm25.memory import read_meta
from hopscotch.retriever.io.corpus import Document

_TEXTS = ("Harmony Korine directed Gummo", "Gummo is set in Xenia, Ohio", "a tornado hit Xenia",
          "the Seattle Storm drafted a guard", "Korine wrote Kids", "Ohio cities and towns")


def warm() -> float:
    """Build and search a tiny disk index (compiling and caching every kernel); returns the seconds it took."""
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="hopscotch-warm-") as tmp:
        folder = Path(tmp) / "bm25"
        docs = [Document(f"d{i}", "", t) for i, t in enumerate(_TEXTS * 4)]
        build_disk_index(docs, folder, "warm", DiskBuildOptions(batch_docs=8, merge_postings=16, block=4, workers=1,
                                                                     show_progress=False),
                         log=lambda line: None)
        index = DiskBM25Index(folder, read_meta(folder), threads=1)
        index.search(["Gummo Xenia tornado"], k=3)
        index.search_terms([{"gummo": 2.0, "xenia": 0.5}], k=3)
    return time.perf_counter() - t0


def main() -> int:
    seconds = warm()
    print(f"disk BM25 kernels compiled and cached in {seconds:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
