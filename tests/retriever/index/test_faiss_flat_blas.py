"""Exact (Flat) search over large parts: FAISS's BLAS kernel in wide blocks (faiss_flat.flat_blas_settings), set
for the search and restored after, with the results of a bare FAISS IndexFlatIP over the same vectors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hopscotch.retriever.index.faiss_flat import FLAT_BLAS_BLOCK_FLOATS, flat_blas_settings, flat_search_settings
from hopscotch.retriever.index.faiss_index import ShardedFaissIndex

NAMES = ("distance_compute_blas_threshold", "distance_compute_blas_query_bs", "distance_compute_blas_database_bs")


def faiss_settings():
    import faiss

    return tuple(getattr(faiss.cvar, n) for n in NAMES)


def write_vector_index(out: Path, vectors: np.ndarray, shard_size: int) -> Path:
    """An index folder (float16 shards, docid lookup, manifest) holding ``vectors``, as scripts/bench_index.py
    writes one."""
    from hopscotch.retriever.index.docstore import build_docid_lookup
    from hopscotch.retriever.index.encode import write_shard
    from hopscotch.retriever.index.layout import IndexMeta
    from hopscotch.retriever.io.corpus import Document

    for shard, start in enumerate(range(0, len(vectors), shard_size)):
        x = vectors[start:start + shard_size]
        write_shard(out, shard, [Document(f"v{start + i}", "", "") for i in range(len(x))], x, docstore=False,
                    seconds=0.0)
    meta = IndexMeta(model="synthetic", model_path="", max_length=None, dim=vectors.shape[1], num_docs=len(vectors),
                     num_shards=-(-len(vectors) // shard_size), shard_size=shard_size, docstore=False)
    build_docid_lookup(out, meta, show_progress=False)
    meta.save(out)
    return out


def unit_rows(rng, n: int, dim: int) -> np.ndarray:
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_settings_only_for_batches_over_parts_beyond_the_cache():
    assert flat_blas_settings(200, 300, 32) is None            # a part that stays in cache: FAISS's own way
    assert flat_blas_settings(4, 1_000_000, 384) is None       # a few queries: the sequential kernel is as fast
    threshold, query_bs, database_bs = flat_blas_settings(200, 100_000, 384)
    assert threshold == 0 and query_bs == 200                  # the BLAS kernel, all queries in one block
    assert query_bs * database_bs <= FLAT_BLAS_BLOCK_FLOATS    # no more score buffer than FAISS's default
    assert database_bs > 1024                                  # wider than FAISS's 1,024 vectors a block
    threshold, query_bs, database_bs = flat_blas_settings(5000, 100_000, 384)
    assert query_bs == 1024 and database_bs == 4096
    assert flat_blas_settings(8, 1_000_000, 384)[2] == FLAT_BLAS_BLOCK_FLOATS // 8


def test_settings_hold_inside_the_block_and_are_restored_after():
    before = faiss_settings()
    with flat_search_settings(200, 100_000, 384):
        assert faiss_settings() == flat_blas_settings(200, 100_000, 384)
    assert faiss_settings() == before
    with pytest.raises(RuntimeError), flat_search_settings(200, 100_000, 384):
        raise RuntimeError("a failed search")
    assert faiss_settings() == before
    with flat_search_settings(2, 100_000, 384):               # nothing to change
        assert faiss_settings() == before


def test_a_large_sharded_flat_index_answers_as_a_bare_flat_index(tmp_path):
    import faiss

    rng = np.random.default_rng(0)
    dim = 384
    # two shards of 6,000 x 384: 9 MiB of float32 each, beyond FLAT_BLAS_MIN_BYTES: the BLAS settings apply
    index_dir = write_vector_index(tmp_path / "idx", unit_rows(rng, 12_000, dim), shard_size=6_000)
    queries = unit_rows(rng, 40, dim)
    ours = ShardedFaissIndex.load(index_dir, use_gpu=False)
    assert len(ours.parts) == 2 and flat_blas_settings(len(queries), ours.parts[0].ntotal, dim) is not None
    bare = faiss.IndexFlatIP(dim)
    for part in ours.parts:                                    # the same float16-rounded vectors
        bare.add(part.reconstruct_n(0, part.ntotal))
    before = faiss_settings()
    scores, rows = ours.search(queries, 50)
    assert faiss_settings() == before
    ref_scores, ref_rows = bare.search(queries, 50)            # FAISS's own way (the sequential kernel)
    np.testing.assert_allclose(scores, ref_scores, rtol=0, atol=1e-5)
    exact = (queries @ np.concatenate([p.reconstruct_n(0, p.ntotal) for p in ours.parts]).T).astype(np.float64)
    for q in range(len(queries)):                              # the true top 50, up to float32 ties
        kth = np.sort(exact[q])[-50]
        assert set(rows[q]) >= set(np.flatnonzero(exact[q] > kth + 1e-5))
        assert (exact[q][rows[q]] >= kth - 1e-5).all()
    assert (rows == ref_rows).mean() > 0.99
    one_scores, one_rows = ours.search(queries[:1], 50)        # one query: FAISS's own kernel, same answer
    np.testing.assert_allclose(one_scores, scores[:1], rtol=0, atol=1e-5)
