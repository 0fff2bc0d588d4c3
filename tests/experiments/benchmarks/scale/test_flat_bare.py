"""The cost-curve benchmark's Flat reference (scale.stages.stage_flat_bare): ShardedFaissIndex against a bare FAISS
IndexFlatIP over the same vectors, in one process; the ratio in the measured table and the findings lines."""

from __future__ import annotations

import numpy as np
import pytest

from hopscotch_experiments.benchmarks.scale.report import dense_findings, measured_table, render_section
from hopscotch_experiments.benchmarks.scale.run import STAGE_KINDS, STAGES
from hopscotch_experiments.benchmarks.scale.stages import FAISS_STAGES, ScaleConfig, stage_flat_bare

from ....retriever.index.test_faiss_flat_blas import write_vector_index


@pytest.fixture
def size_folder(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((900, 16)).astype(np.float32)
    write_vector_index(tmp_path / "n900" / "dense", x / np.linalg.norm(x, axis=1, keepdims=True), shard_size=400)
    np.save(tmp_path / "n900" / "queries.npy", rng.standard_normal((12, 16)).astype(np.float32))
    return tmp_path / "n900"


def test_the_bare_reference_is_a_dense_stage_of_its_own():
    assert STAGES["flat_bare"] == (("encode",), ("k", "repeats", "threads"))
    assert STAGE_KINDS["flat_bare"] == ("dense", "dense_max") and "flat_bare" in FAISS_STAGES


def test_bare_and_sharded_flat_are_timed_in_one_process(size_folder):
    cfg = ScaleConfig(work=str(size_folder.parent), k=10, repeats=2, threads=1, inline=True)
    out = stage_flat_bare(cfg, size_folder)
    for key in ("search_seconds", "ours_search_seconds", "tuned_search_seconds"):
        assert out[key] > 0
    assert out["ratio"] == pytest.approx(out["ours_search_seconds"] / out["search_seconds"])
    assert out["ratio_tuned"] == pytest.approx(out["ours_search_seconds"] / out["tuned_search_seconds"])
    assert out["qps"] == pytest.approx(12 / out["search_seconds"]) and out["threads"] == 1
    assert out["agreement"] == pytest.approx(1.0)    # both exact over the same float16-rounded vectors
    assert out["peak_rss_mib"] >= out["bare_rss_mib"] >= out["base_rss_mib"] > 0


def _result(flat_bare: dict | None) -> dict:
    st = {"corpus": {"avg_doc_bytes": 100},
          "encode": {"encode_seconds": 5.0, "finalize_seconds": 1.0, "peak_rss_mib": 500, "shards": 10,
                     "disk": {"total": 2 ** 21, "faiss": 0}},
          "flat_search": {"peak_rss_mib": 300, "qps": 71.0},
          "ivf_build": {"build_seconds": 3.0, "peak_rss_mib": 200, "index_bytes": 2 ** 20, "spec": "IVF8,PQ4"},
          "ivf_search": {"peak_rss_mib": 150, "qps": 900.0, "recall": 0.9}}
    if flat_bare:
        st["flat_bare"] = flat_bare
    return {"sizes": {"1000000": st}}


def test_the_ratio_is_in_the_table_and_the_findings():
    bare = {"ratio": 0.2, "ratio_tuned": 1.07, "ours_qps": 71.0, "qps": 14.5, "tuned_qps": 76.0, "agreement": 0.9997}
    table = measured_table(_result(bare))
    assert "search time / bare FAISS Flat" in table.splitlines()[0]
    assert "| Flat | 1,000,000 |" in table and "| 71 | 0.20 | 1.000 |" in table
    assert "| 900 | - | 0.900 |" in table                      # no ratio for IVF-PQ
    (line,) = dense_findings(_result(bare))
    assert line.startswith("at 1,000,000 documents Flat search (`ShardedFaissIndex`, 10 shard(s)) takes 0.20x")
    assert "(71 vs 14 q/s" in line and "1.07x" in line and "top-k agreement 1.000" in line
    assert dense_findings(_result(None)) == []                 # a run from before the stage: no line
    assert "| 71 | - | 1.000 |" in measured_table(_result(None))


def test_the_section_carries_the_findings():
    bare = {"ratio": 0.2, "ratio_tuned": 1.07, "ours_qps": 71.0, "qps": 14.5, "tuned_qps": 76.0, "agreement": 1.0}
    result = _result(bare)
    result.update(config={"threads": 2, "repeats": 3, "k": 100, "sources": [], "query_sources": [], "model": "m",
                          "max_length": 32, "ivf_spec": "auto", "nprobe": None, "refine": None, "mv_dim": 128,
                          "mv_nbits": 2, "multivector_max": 10_000, "mv_nprobe": 4, "mv_candidates": 256},
                  setup={"queries": 200}, plan=[])
    text = render_section(result, "cmd", None)
    assert "* at 1,000,000 documents Flat search" in text and "flat_blas_settings" in text
