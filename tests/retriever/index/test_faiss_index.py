"""FAISS over shards: sharded Flat == one Flat, trained specs (IVF-PQ, OPQ, HNSW), resume, plan."""

from __future__ import annotations

import numpy as np
import pytest

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.index.faiss_index import ShardedFaissIndex, build_faiss_index, merge_topk, remove_faiss_index
from hopscotch.retriever.index.layout import IndexMeta, load_shard_embeddings
from hopscotch.retriever.index.plan import PlanOptions, plan_index, spec_cost


@pytest.fixture(scope="module", autouse=True)
def one_faiss_thread():
    """These indexes are tiny: one OpenMP thread avoids spin-waiting on a busy 2-core machine."""
    import faiss

    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    yield
    faiss.omp_set_num_threads(before)


@pytest.fixture(scope="module")
def index_dir(small_world_index):
    return small_world_index


@pytest.fixture(scope="module")
def vectors(index_dir):
    meta = IndexMeta.load(index_dir)
    return np.concatenate([np.asarray(load_shard_embeddings(index_dir, s), np.float32)
                           for s in range(meta.num_shards)])


@pytest.fixture(scope="module")
def queries(vectors):
    rng = np.random.default_rng(0)
    noise = vectors[rng.choice(len(vectors), 40, replace=False)] + 0.05 * rng.standard_normal((40, 32))
    return (noise / np.linalg.norm(noise, axis=1, keepdims=True)).astype(np.float32)


def recall(rows, truth) -> float:
    return float(np.mean([len(set(a) & set(b)) / len(b) for a, b in zip(rows, truth)]))


def test_sharded_flat_equals_single_flat(index_dir, vectors, queries):
    import faiss

    sharded = ShardedFaissIndex.load(index_dir)  # nothing built: exact Flat over the five shards
    assert sharded.layout == "shards" and len(sharded.parts) == 5
    build_faiss_index(index_dir, "Flat", layout="merged", show_progress=False)
    single = ShardedFaissIndex.load(index_dir)
    assert len(single.parts) == 1
    for k in (1, 10, 100, 300, 400):
        s1, r1 = sharded.search(queries, k)
        s2, r2 = single.search(queries, k)
        np.testing.assert_array_equal(r1, r2)          # same ids, same order
        np.testing.assert_array_equal(s1, s2)
    # and the same as FAISS's own IndexFlatIP over all vectors (the order of exactly tied scores aside)
    flat = faiss.IndexFlatIP(32)
    flat.add(vectors)
    ref_s, ref_r = flat.search(queries, 50)
    s, r = sharded.search(queries, 50)
    np.testing.assert_array_equal(s, ref_s)
    for q in range(len(queries)):
        for score in np.unique(s[q]):
            assert set(r[q][s[q] == score]) == set(ref_r[q][ref_s[q] == score])
    remove_faiss_index(index_dir, "Flat.merged")


def test_k_beyond_the_corpus_pads_with_minus_one(index_dir, queries):
    scores, rows = ShardedFaissIndex.load(index_dir).search(queries[:2], 310)
    assert (rows[:, :300] >= 0).all() and (rows[:, 300:] == -1).all() and np.isneginf(scores[:, 300:]).all()


@pytest.mark.parametrize("spec,layout", [("IVF4,PQ8", "shards"), ("OPQ8,IVF4,PQ8", "merged"),
                                         ("IVF4,SQ8", "merged")])
def test_trained_specs_with_full_probe_and_refine_are_exact(index_dir, vectors, queries, spec, layout):
    entry = build_faiss_index(index_dir, spec, layout=layout, train_size=300, show_progress=False)
    index = ShardedFaissIndex.load(index_dir)
    assert index.spec == spec and index.layout == layout and entry["num_docs"] == 300
    flat_s, flat_r = _flat(index_dir).search(queries, 10)
    _approx_s, approx_r = index.search(queries, 10, nprobe=1)
    exact_s, exact_r = index.search(queries, 10, nprobe=4, refine=30)  # every list, every candidate re-scored
    np.testing.assert_array_equal(exact_r, flat_r)
    np.testing.assert_allclose(exact_s, flat_s, rtol=1e-6)
    assert recall(approx_r, flat_r) <= recall(exact_r, flat_r) == 1.0
    remove_faiss_index(index_dir, entry["dir"].split("/")[-1])


def _flat(index_dir) -> ShardedFaissIndex:
    """Exact search over the shards, whatever FAISS index the folder has as its default."""
    import faiss

    meta = IndexMeta.load(index_dir)
    parts = []
    for s in range(meta.num_shards):
        parts.append(faiss.IndexFlatIP(meta.dim))
        parts[-1].add(np.asarray(load_shard_embeddings(index_dir, s), np.float32))
    return ShardedFaissIndex(index_dir, meta, "Flat", "shards", parts,
                             [s * meta.shard_size for s in range(meta.num_shards)])


def test_hnsw_ef_search(index_dir, queries):
    build_faiss_index(index_dir, "HNSW16", layout="merged", show_progress=False)
    index = ShardedFaissIndex.load(index_dir)
    _, truth = _flat(index_dir).search(queries, 10)
    _, rows = index.search(queries, 10, ef_search=256)
    assert recall(rows, truth) > 0.95
    with pytest.raises(UsageError, match="no parameter nprobe"):
        index.search(queries, 10, nprobe=4)
    remove_faiss_index(index_dir, "HNSW16.merged")


def test_per_shard_build_resumes_at_the_missing_shard(index_dir):
    build_faiss_index(index_dir, "IVF2,Flat", layout="shards", train_size=300, show_progress=False)
    folder = index_dir / "faiss" / "IVF2_Flat.shards"
    stamps = {p.name: p.stat().st_mtime_ns for p in folder.glob("shard_*.faiss")}
    assert len(stamps) == 5
    (folder / "shard_00003.faiss").unlink()
    build_faiss_index(index_dir, "IVF2,Flat", layout="shards", show_progress=False)
    again = {p.name: p.stat().st_mtime_ns for p in folder.glob("shard_*.faiss")}
    assert {n: t for n, t in again.items() if n != "shard_00003.faiss"} == \
        {n: t for n, t in stamps.items() if n != "shard_00003.faiss"}
    assert "shard_00003.faiss" in again
    remove_faiss_index(index_dir, "IVF2_Flat.shards")


def test_bad_specs_and_parameters_are_usage_errors(index_dir, queries):
    with pytest.raises(UsageError, match="not valid"):
        build_faiss_index(index_dir, "IVFxyz,PQ", show_progress=False)
    with pytest.raises(UsageError, match="needs at least 4096 training vectors"):
        build_faiss_index(index_dir, "IVF4096,Flat", show_progress=False)
    with pytest.raises(UsageError, match="no parameter nprobe"):
        ShardedFaissIndex.load(index_dir).search(queries, 5, nprobe=2)
    with pytest.raises(UsageError, match="no FAISS index"):
        ShardedFaissIndex.load(index_dir, name="nope")
    with pytest.raises(UsageError, match="dimension"):
        ShardedFaissIndex.load(index_dir).search(np.zeros((1, 7), np.float32), 5)


def test_merge_topk_orders_by_score_then_row():
    scores = np.array([[0.5, 0.9, 0.5, 0.1]], np.float32)
    rows = np.array([[7, 3, 2, -1]])
    s, r = merge_topk(scores, rows, 4)
    assert r.tolist() == [[3, 2, 7, -1]] and np.isneginf(s[0, 3])


def test_plan_counts_codes_ids_and_centroids():
    ivfpq = spec_cost("IVF1024,PQ64", 384)
    assert ivfpq.per_vector == 64 + 8 and ivfpq.nlist == 1024
    assert ivfpq.fixed == pytest.approx(4 * 1024 * 384 + 4 * 64 * 256 * 6)
    opq = spec_cost("OPQ64,IVF1024,PQ64", 384)
    assert opq.fixed == pytest.approx(ivfpq.fixed + 4 * 384 * 384)
    assert spec_cost("Flat", 384).per_vector == 4 * 384
    plan = plan_index(1_000_000, 384, "IVF1024,PQ64", PlanOptions(shard_size=100_000, layout="merged"))
    assert plan.total("disk") == pytest.approx(2 * 384 * 1e6 + 24e6 + 16e6 + 72e6 + ivfpq.fixed)
    assert plan.total("search memory") == pytest.approx(72e6 + ivfpq.fixed + 12 * 1000 * 100)


def test_plan_counts_the_windows_index_and_its_encode_time_across_processes():
    ivfpq = spec_cost("IVF1024,PQ64", 384)
    base = PlanOptions(shard_size=100_000, layout="merged", docs_per_second=1000.0, gpus=4)
    plain = plan_index(1_000_000, 384, "IVF1024,PQ64", base)
    plan = plan_index(1_000_000, 384, "IVF1024,PQ64", PlanOptions(**{**base.__dict__, "windows_per_doc": 2.5}))
    windows = 2_500_000
    assert plan.total("disk") - plain.total("disk") == pytest.approx(
        2 * 384 * windows + (24 + 4 + 16) * windows + 72 * windows + ivfpq.fixed)
    assert plan.total("search memory") - plain.total("search memory") == pytest.approx(72 * windows + ivfpq.fixed)
    assert plan.total("windows finalize memory") == pytest.approx(24 * windows)
    # the documents and their windows both spread over the 4 processes
    assert plain.encode_hours == pytest.approx(1e6 / 4000 / 3600)
    assert plan.encode_hours == pytest.approx((1e6 + windows) / 4000 / 3600)
    assert "2,500,000 passage windows" in plan.format()
    assert "each process encodes the windows of its own document shards" in plan.format()
    assert "windows" not in plain.format()


def test_plan_measures_windows_on_the_corpus(cli, small_world, tiny_bert_dir):
    from hopscotch.retriever.index.windows import windows_per_document

    corpus = small_world / "corpus.jsonl"
    per_doc, read = windows_per_document(corpus, tiny_bert_dir, max_windows=4, max_length=16)
    assert read > 0 and 0 < per_doc <= 3
    assert windows_per_document(corpus, tiny_bert_dir, max_windows=1, max_length=16) == (0.0, 0)
    common = ("index", "--plan", "--corpus", corpus, "--model", tiny_bert_dir, "--max-length", 16)
    code, out, err = cli(*common, "--windows", 4)
    assert code == 0, err
    assert f"windows: {per_doc:.2f} a document beyond the first, measured on the first {read:,} documents" in out
    assert "windows: float16 shard embeddings" in out
    code, out, err = cli(*common, "--windows", 4, "--windows-per-doc", 0)    # given: nothing measured
    assert code == 0 and "windows" not in out
    code, out, err = cli(*common)                                           # the tiny model records no windows
    assert code == 0 and "windows" not in out


def test_plan_cli(cli):
    code, out, err = cli("index", "--plan", "--docs", "553000000", "--dim", "384", "--spec", "OPQ64,IVF262144,PQ64")
    assert code == 0, err
    assert "553,000,000 documents" in out and "search memory: 37.5 GiB" in out and "disk:" in out
    code, _, err = cli("index", "--plan", "--docs", "10", "--dim", "384", "--spec", "IVF,PQ")
    assert code == 2 and "not valid" in err and len(err.strip().splitlines()) == 1
