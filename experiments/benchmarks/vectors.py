"""Synthetic embeddings for the index benchmarks (``scripts/bench_index.py``, the GPU check's FAISS section)."""

from __future__ import annotations

import numpy as np


def clustered_vectors(n: int, dim: int, clusters: int, seed: int, chunk: int = 100_000):
    """Yield float32 chunks of ``n`` unit vectors with cluster structure.

    Not plain Gaussian: cluster centres and within-cluster offsets are drawn along a random rotation with a
    power-law spectrum (eigenvalue i ~ i^-0.8, like sentence embeddings, whose variance concentrates in a
    few dozen directions), cluster sizes follow a Zipf law, and everything is L2-normalised. The centres
    do not depend on ``seed``: draws with another seed (queries) come from the same process."""
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(np.random.default_rng(1234).standard_normal((dim, dim)))
    spectrum = np.arange(1, dim + 1, dtype=np.float64) ** -0.8
    shape = (np.sqrt(spectrum)[:, None] * basis.T).astype(np.float32)   # z @ shape ~ N(0, Q diag(s) Q^T)
    crng = np.random.default_rng(99)                                    # the same centres for base and queries
    centres = (crng.standard_normal((clusters, dim)).astype(np.float32) @ shape) * 2.0
    sizes = 1.0 / np.arange(1, clusters + 1) ** 0.7
    probs = sizes / sizes.sum()
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        which = rng.choice(clusters, size=m, p=probs)
        x = centres[which] + rng.standard_normal((m, dim)).astype(np.float32) @ shape
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        yield x
