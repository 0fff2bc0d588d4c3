"""The cost-curve benchmark (hopscotch_experiments.benchmarks.scale): the whole pipeline at 300 and 1,000 documents
with a tiny model, its JSON, resuming, the report and plot, and the pieces it is made of."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from hopscotch.retriever.index.faiss_spec import auto_nlist
from hopscotch_experiments.benchmarks.scale.data import SentencePool, ivf_spec, write_corpus
from hopscotch_experiments.benchmarks.scale.report import END, START, write_scale_report
from hopscotch_experiments.benchmarks.scale.run import STAGES, run_scale
from hopscotch_experiments.benchmarks.scale.stages import ScaleConfig


@pytest.fixture(scope="module")
def scale_run(small_world, tiny_bert_dir, tmp_path_factory):
    work = tmp_path_factory.mktemp("scale")
    cfg = ScaleConfig(work=str(work / "w"), sizes=[300, 1000], sources=[str(small_world / "corpus.jsonl")],
                      query_sources=[str(small_world / "queries.jsonl")], model=str(tiny_bert_dir), max_length=32,
                      batch_size=64, shard_size=400, queries=20, k=10, ivf_spec="IVF{nlist},PQ8x4fs", nprobe=2,
                      refine=2, multivector_max=300, mv_dim=16, mv_nbits=2, repeats=1, bm25s_max=300, inline=True)
    logs = []
    return cfg, run_scale(cfg, log=logs.append), logs


def test_every_stage_of_every_size_is_measured(scale_run):
    cfg, result, logs = scale_run
    assert set(result["sizes"]) == {"300", "1000"} and result["setup"]["queries"] == 20
    small, large = result["sizes"]["300"], result["sizes"]["1000"]
    assert set(small) == set(STAGES) and set(large) == set(STAGES) - {"mv_build", "mv_search", "bm25", "bm25_search"}
    assert large["corpus"]["docs"] == 1000 and large["encode"]["dim"] == 32 and large["encode"]["shards"] == 3
    for stage in ("encode", "bm25", "bm25_search", "bm25_disk", "bm25_disk_search", "flat_search", "ivf_build",
                  "ivf_search", "mv_build", "mv_search"):
        assert small[stage]["peak_rss_mib"] >= small[stage]["base_rss_mib"] > 0, stage
    assert large["bm25_disk"]["num_postings"] > small["bm25_disk"]["num_postings"] > 0
    assert small["bm25_search"]["threads"] == small["bm25_disk_search"]["threads"] == cfg.threads
    assert large["encode"]["encode_seconds"] > 0 and large["encode"]["docs_per_second"] > 0
    assert large["encode"]["disk"]["embeddings"] == 1000 * 32 * 2 + 3 * 128  # float16 + one .npy header a shard
    assert large["ivf_build"]["spec"] == "IVF16,PQ8x4fs" and large["ivf_build"]["index_bytes"] > 0
    for stage in ("bm25_search", "bm25_disk_search", "flat_search", "ivf_search", "mv_search"):
        assert large.get(stage, small[stage])["qps"] > 0
    assert 0 < large["ivf_search"]["recall"] <= 1 and 0 < small["mv_search"]["recall"] <= 1
    assert small["mv_build"]["num_tokens"] > 0 and small["mv_build"]["disk"]["compressed"] > 0
    checks = result["plan"]
    assert {c["size"] for c in checks} == {300, 1000}
    assert any(c["what"].startswith("encode time") and c["size"] == 1000 for c in checks)
    assert any(c["what"].startswith("multi-vector") for c in checks)
    assert {c["what"] for c in checks if c["size"] == 1000 and c["what"].startswith("BM25 ")} == {
        "BM25 disk index folder", "BM25 disk build RAM", "BM25 disk search RAM"}  # bm25s: up to bm25s_max only
    for c in checks:
        assert c["predicted"] > 0 and c["ratio"] == pytest.approx(c["measured"] / c["predicted"])
        assert c["within"] == (abs(c["ratio"] - 1) <= 0.25)
    dense = next(c for c in checks if c["size"] == 1000 and c["what"].startswith("dense index folder"))
    assert dense["within"], dense  # the plan's bytes a document of the shards, lookup and docstore
    ivf_file = next(c for c in checks if c["size"] == 1000 and c["what"].endswith("index file"))
    assert ivf_file["within"], ivf_file  # codes, ids, centroids, codebooks and the fast-scan blocks' padding
    json.dumps(result)  # all JSON


def test_a_rerun_skips_finished_stages_and_redoes_what_changed(scale_run):
    cfg, first, _ = scale_run
    logs = []
    again = run_scale(cfg, log=logs.append)
    assert logs and all("skipped" in line for line in logs)
    assert again["sizes"] == first["sizes"]
    cfg.nprobe = 4  # only the IVF search depends on it
    logs = []
    changed = run_scale(cfg, log=logs.append)
    redone = sorted(line.split("]")[0].strip("[") for line in logs if "skipped" not in line)
    assert redone == ["ivf_search 1000", "ivf_search 300"]
    assert changed["sizes"]["1000"]["ivf_search"]["nprobe"] == 4
    cfg.nprobe = 2


def test_report_and_plot_are_written(scale_run, tmp_path):
    pytest.importorskip("matplotlib")
    _, result, _ = scale_run
    doc = tmp_path / "docs" / "scaling.md"
    doc.parent.mkdir()
    doc.write_text(f"# Scaling\n\nbefore\n\n{START}\nold\n{END}\n\nafter\n")
    png = tmp_path / "docs" / "curves.png"
    said = write_scale_report(result, doc, png, "python scripts/bench_scale.py --sizes 300")
    text = doc.read_text()
    assert "section written" in said and "plot written" in said
    assert text.startswith("# Scaling\n\nbefore") and text.rstrip().endswith("after") and "\nold\n" not in text
    assert "![cost curves](curves.png)" in text and "| IVF-PQ `IVF16,PQ8x4fs` | 1,000 |" in text
    assert "### The plan beside the measurements" in text and "--sizes 300" in text
    assert "## BM25 cost curves" in text and "| disk | 1,000 |" in text and "| bm25s | 300 |" in text
    assert "the disk backend answers" in text and "BM25 disk index folder" in text
    assert (tmp_path / "docs" / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    fresh = tmp_path / "new.md"
    write_scale_report(result, fresh, None, "cmd")
    assert fresh.read_text().startswith(START) and "![cost curves]" not in fresh.read_text()


def test_a_bm25_only_run_measures_both_backends_and_writes_only_their_section(small_world, tmp_path):
    cfg = ScaleConfig(work=str(tmp_path / "w"), sizes=[200, 400], sources=[str(small_world / "corpus.jsonl")],
                      query_sources=[str(small_world / "queries.jsonl")], model="random", max_length=16, queries=10,
                      k=10, repeats=1, kinds=["bm25s", "disk"], bm25s_max=200, inline=True)
    result = run_scale(cfg, log=lambda _: None)
    assert set(result["sizes"]["200"]) == {"corpus", "bm25", "bm25_search", "bm25_disk", "bm25_disk_search"}
    assert set(result["sizes"]["400"]) == {"corpus", "bm25_disk", "bm25_disk_search"}
    assert result["setup"]["encoder"] is None  # no dense or multi-vector kind: no model built
    doc = tmp_path / "scaling.md"
    doc.write_text(f"# Scaling\n\n{START}\nthe dense section, untouched\n{END}\n")
    said = write_scale_report(result, doc, None, "cmd")
    text = doc.read_text()
    assert "the dense section, untouched" in text and "## BM25 cost curves" in text and "BM25 section" in said


def test_documents_are_real_sentences_deterministic_and_prefix_stable(small_world, tmp_path):
    pool = SentencePool([small_world / "corpus.jsonl"])
    a, b = list(pool.documents(50, seed=1)), list(pool.documents(20, seed=1))
    assert a[:20] == b and len({d["text"] for d in a}) == 50 and a[0]["_id"] == "s00000000"
    assert all(any(s in d["text"] for s in pool.sentences) for d in a)
    stats = write_corpus(pool, 30, tmp_path / "c.jsonl", seed=1)
    assert stats["docs"] == 30 and stats["avg_doc_bytes"] > 20
    assert [auto_nlist(n) for n in (300, 10_000, 100_000, 1_000_000)] == [4, 256, 512, 2048]
    assert ivf_spec("IVF{nlist},PQ192x4fs", 100_000) == "IVF512,PQ192x4fs" and ivf_spec("Flat", 5) == "Flat"
    assert ivf_spec("auto", 10_000) == "IVF256,PQ384x4fsr"  # --spec auto's IVF even below its Flat cut-off


def test_exact_maxsim_matches_brute_force(tmp_path):
    from hopscotch_experiments.benchmarks.scale.exact import exact_maxsim_top
    from hopscotch.retriever.index.layout import IndexMeta, save_npy, shard_file

    rng = np.random.default_rng(0)
    lens = [rng.integers(0, 6, size=7), rng.integers(1, 6, size=5)]
    docs = [[rng.standard_normal((n, 4)).astype(np.float16) for n in shard] for shard in lens]
    for shard, vectors in enumerate(docs):
        (tmp_path / "shards").mkdir(exist_ok=True)
        save_npy(shard_file(tmp_path, shard, "tok.npy"), np.concatenate(vectors))
        save_npy(shard_file(tmp_path, shard, "doclens.npy"), lens[shard].astype(np.int32))
    IndexMeta(model="m", model_path="", max_length=None, dim=4, num_docs=12, num_shards=2, shard_size=7,
              docstore=False).save(tmp_path)
    queries = [rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((2, 4)).astype(np.float32)]
    got = exact_maxsim_top(tmp_path, queries, k=20, block_tokens=5)
    rows = [(s * 7 + i, v.astype(np.float32)) for s, shard in enumerate(docs) for i, v in enumerate(shard) if len(v)]
    for q, line in zip(queries, got):
        scores = {r: (q @ v.T).max(axis=1).sum() for r, v in rows}
        want = sorted(scores, key=lambda r: -scores[r])
        assert list(line[:len(want)]) == want and (line[len(want):] == -1).all()


def test_a_stage_runs_as_its_own_process(scale_run):
    from hopscotch_experiments.benchmarks.common import run_json
    from hopscotch_experiments.benchmarks.scale.stages import PREFIX

    cfg, _, _ = scale_run
    out, _ = run_json([sys.executable, "-m", "hopscotch_experiments.benchmarks.scale.stages", "bm25_search", cfg.work,
                       "300"], prefix=PREFIX)
    assert out["qps"] > 0 and out["peak_rss_mib"] > 0


def test_a_second_run_on_the_same_folder_is_refused(scale_run):
    import fcntl
    from pathlib import Path

    from hopscotch.retriever.errors import UsageError

    cfg, _, _ = scale_run
    with open(Path(cfg.work) / ".lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(UsageError, match="another bench_scale run"):
            run_scale(cfg, log=lambda _: None)
