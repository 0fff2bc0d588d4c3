"""``--spec auto`` (:func:`hopscotch.retriever.index.faiss_spec.auto_spec`): Flat for small corpora, an IVF
fast-scan PQ with recorded search defaults above; a search that names no ``nprobe`` / ``refine`` uses them."""

from __future__ import annotations

import numpy as np
import pytest

from hopscotch.retriever.index import faiss_spec
from hopscotch.retriever.index.faiss_index import ShardedFaissIndex, build_faiss_index
from hopscotch.retriever.index.faiss_spec import auto_spec
from hopscotch.retriever.index.layout import IndexMeta, load_shard_embeddings


def test_auto_spec_by_corpus_size():
    assert auto_spec(1_000, 384) == ("Flat", {})
    assert auto_spec(250_000, 384) == ("Flat", {})
    assert auto_spec(1_000_000, 384) == ("IVF2048,PQ384x4fsr", {"nprobe": 128, "refine": 4})
    spec, search = auto_spec(553_000_000, 384)  # ClimbMix: 2 sqrt(N) ~ 47,000 lists -> 65,536, 1/16 probed
    assert (spec, search) == ("IVF65536,PQ384x4fsr", {"nprobe": 4096, "refine": 4})
    assert auto_spec(1_000_000, 2560)[0] == "IVF2048,PQ2560x4fsr"
    for docs in (250_001, 400_000, 3_000_000, 553_000_000):  # every auto spec is one the build accepts
        spec, _ = auto_spec(docs, 384)
        faiss_spec.check_spec(spec, 384, docs)


@pytest.fixture
def small_auto(monkeypatch):
    """``auto`` lowered to pick an IVF for the tiny test corpus."""
    monkeypatch.setattr(faiss_spec, "AUTO_FLAT_MAX", 10)
    import faiss

    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    yield
    faiss.omp_set_num_threads(before)


def test_auto_build_records_its_spec_and_search_defaults(small_world_index, small_auto):
    meta = IndexMeta.load(small_world_index)
    spec, defaults = auto_spec(meta.num_docs, meta.dim)
    assert spec.startswith("IVF") and spec.endswith("x4fsr")
    entry = build_faiss_index(small_world_index, "auto", layout="auto", show_progress=False)
    assert entry["spec"] == spec and entry["layout"] == "merged" and entry["requested"] == "auto"
    assert entry["search"] == defaults
    index = ShardedFaissIndex.load(small_world_index)
    assert index.spec == spec and index.search_defaults == defaults

    vectors = np.concatenate([np.asarray(load_shard_embeddings(small_world_index, s), np.float32)
                              for s in range(meta.num_shards)])
    queries = vectors[:20]
    by_default = index.search(queries, 10)
    named = index.search(queries, 10, nprobe=defaults["nprobe"], refine=defaults["refine"])
    assert np.array_equal(by_default[1], named[1]) and np.allclose(by_default[0], named[0])
    # the refined default scores are exact inner products (the float16 vectors), so each query finds itself
    assert (by_default[1][:, 0] == np.arange(20)).mean() >= 0.9
    assert np.allclose(by_default[0][:, 0], np.einsum("ij,ij->i", queries, vectors[by_default[1][:, 0]]), atol=1e-3)
    unrefined = index.search(queries, 10, refine=1)  # a named value still wins over the default
    assert not np.allclose(unrefined[0], by_default[0])


def test_auto_on_a_small_corpus_is_flat_per_shard(small_world_index):
    entry = build_faiss_index(small_world_index, "auto", layout="auto", show_progress=False)
    assert entry == {"spec": "Flat", "layout": "shards", "num_docs": IndexMeta.load(small_world_index).num_docs}
    assert ShardedFaissIndex.load(small_world_index).search_defaults == {}


def test_plan_resolves_auto_by_the_document_count(cli):
    code, out, err = cli("index", "--plan", "--docs", "1000000", "--dim", "384", "--spec", "auto")
    assert code == 0, err
    assert "--spec auto for 1,000,000 documents of dim 384: IVF2048,PQ384x4fsr" in out
    assert "'nprobe': 128, 'refine': 4" in out and "1,000,000 documents" in out
