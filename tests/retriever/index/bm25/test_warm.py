"""The kernels' warm-up (retriever/index/bm25/warm.py): it compiles what a search calls and leaves numba's cache
beside the kernel module, so a new process's first search loads machine code instead of compiling; setup.sh runs
it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from hopscotch.retriever.index.bm25 import kernel
from hopscotch.retriever.index.bm25.warm import warm

ROOT = Path(__file__).resolve().parents[4]


def test_warm_leaves_the_cache_of_every_search_kernel():
    assert warm() > 0
    cache = Path(kernel.__file__).parent / "__pycache__"
    indexed = {p.name.split("-")[0] for p in cache.glob("kernel.*.nbi")}
    assert {"kernel.top_k", "kernel.top_k_batch", "kernel.block_maxima"} <= indexed
    # a new process searches from the cache: every search kernel finds its machine code for these types
    code = ("from hopscotch.retriever.index.bm25 import kernel\n"
            "from hopscotch.retriever.index.bm25.warm import warm\n"
            "warm()\n"
            "print(all(f.stats.cache_hits for f in (kernel.top_k_batch, kernel.block_maxima)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONSAFEPATH": "1", "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip() == "True"


def test_setup_runs_the_warm_up():
    assert "-m hopscotch.retriever.index.bm25.warm" in (ROOT / "scripts" / "setup.sh").read_text()
