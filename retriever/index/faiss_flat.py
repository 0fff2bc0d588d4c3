"""Exact (``Flat``) FAISS search over a large part: FAISS's BLAS kernel in wide blocks.

FAISS 1.15 takes its sequential kernel while ``queries * dim < distance_compute_blas_threshold`` (128,000: below 334
queries at 384 dimensions); it streams the whole part from RAM once per query. Its BLAS kernel, with the default
blocks (4,096 queries x 1,024 vectors), makes many small products for a batch of a few hundred queries.
:func:`flat_search_settings` sets FAISS's process-wide threshold and block sizes for one search
(:func:`flat_blas_settings`) and restores them after; :class:`~hopscotch.retriever.index.faiss_index.ShardedFaissIndex`
searches its exact parts under it. Exact either way (only the last float32 bit of a score may differ).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

from hopscotch.retriever.index.faiss_spec import _faiss

#: FAISS's score buffer of one BLAS block, in floats (queries x vectors): FAISS's own default, 4,096 x 1,024
FLAT_BLAS_BLOCK_FLOATS = 4096 * 1024
#: below this many queries FAISS's own choice (the sequential kernel, one thread a query) is as fast or faster
FLAT_BLAS_MIN_QUERIES = 8
#: a part this small (float32 bytes) stays in cache between queries: FAISS's own choice again
FLAT_BLAS_MIN_BYTES = 8 * 2 ** 20
_FAISS_KNOBS = threading.Lock()  # FAISS's block settings are process-wide: one search sets them at a time


def flat_blas_settings(num_queries: int, num_vectors: int, dim: int) -> tuple[int, int, int] | None:
    """``(distance_compute_blas_threshold, ..._query_bs, ..._database_bs)`` for an exact inner-product search of
    ``num_queries`` over ``num_vectors`` float32 vectors, or None to leave FAISS's defaults.

    A batch of at least :data:`FLAT_BLAS_MIN_QUERIES` queries over a part too large for the cache goes to FAISS's
    BLAS kernel (threshold 0) in one block of up to 1,024 queries and as many vectors as fill FAISS's default
    score buffer (:data:`FLAT_BLAS_BLOCK_FLOATS`: the same memory): each block reads the vectors once for all its
    queries, and fewer, larger products mean fewer thread barriers and heap passes."""
    if num_queries < FLAT_BLAS_MIN_QUERIES or num_vectors * dim * 4 < FLAT_BLAS_MIN_BYTES:
        return None
    query_bs = min(num_queries, 1024)
    return 0, query_bs, max(1024, FLAT_BLAS_BLOCK_FLOATS // query_bs)


@contextmanager
def flat_search_settings(num_queries: int, num_vectors: int, dim: int):
    """FAISS's BLAS settings of :func:`flat_blas_settings` while the block runs (restored after; nothing changed
    when it returns None). The settings are process-wide FAISS globals: held under one lock, so two searches of
    this module never interleave them; another FAISS search of the process running meanwhile uses them too (its
    results stay exact: they choose the kernel and its blocks, not what is computed)."""
    settings = flat_blas_settings(num_queries, num_vectors, dim)
    cvar = _faiss().cvar
    names = ("distance_compute_blas_threshold", "distance_compute_blas_query_bs", "distance_compute_blas_database_bs")
    if settings is None or not all(hasattr(cvar, n) for n in names):  # (a FAISS build without them: its own way)
        yield
        return
    with _FAISS_KNOBS:
        before = [getattr(cvar, n) for n in names]
        try:
            for name, value in zip(names, settings):
                setattr(cvar, name, value)
            yield
        finally:
            for name, value in zip(names, before):
                setattr(cvar, name, value)
