"""ANN fidelity: exact search over the shards, self-exclusion of document-derived queries, the real queries encoded
as the dense searcher encodes them, and the planted cases: Flat (recall 1.0, ok) and IVF with nprobe 1 (warning;
exit 2 with --strict)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hopscotch.retriever.audit.ann_fidelity import (AnnOptions, ann_search, audit_ann_fidelity, exact_topk_over_shards,
                                                    judge)
from hopscotch.retriever.index.faiss_index import ShardedFaissIndex, build_faiss_index
from hopscotch.retriever.index.layout import IndexMeta, embedding_rows

IVF = "IVF16_Flat.merged"


@pytest.fixture(scope="module")
def index(small_world_index):
    """The small world's index (300 documents in shards of 64) with a Flat and an IVF16 (merged) FAISS index."""
    build_faiss_index(small_world_index, "Flat", show_progress=False)
    build_faiss_index(small_world_index, "IVF16,Flat", layout="merged", train_size=300, show_progress=False,
                      set_default=False)
    return small_world_index


def test_exact_search_equals_brute_force_and_never_returns_the_excluded_row(index):
    meta = IndexMeta.load(index)
    docs = embedding_rows(index, meta, np.arange(meta.num_docs))
    queries = docs[[3, 70, 299]]
    scores, rows = exact_topk_over_shards(index, meta, queries, 5, chunk=2)
    brute = queries @ docs.T
    assert np.array_equal(rows[:, 0], [3, 70, 299])  # a document is its own nearest neighbour
    assert np.allclose(scores, -np.sort(-brute, axis=1)[:, :5], atol=1e-6)
    exclude = np.array([3, 70, 299])
    _, rows = exact_topk_over_shards(index, meta, queries, 5, exclude=exclude)
    assert not (rows == exclude[:, None]).any()
    ann = ann_search(ShardedFaissIndex.load(index, IVF), queries, 5, AnnOptions(nprobe=16), exclude=exclude)
    assert not (ann == exclude[:, None]).any() and (ann >= 0).all()


def test_flat_index_has_recall_one_on_every_query_set(index, small_world):
    report = audit_ann_fidelity(index, small_world / "queries.jsonl", reasoning=True, faiss_name="Flat.shards")
    assert report.verdict == "ok"
    for name in ("real", "documents", "random"):
        for k in ("10", "100"):
            assert report.details["recall"][name][k]["mean"] == 1.0
    assert report.details["reasoning"] and report.details["faiss"]["spec"] == "Flat"


def test_ivf_with_one_probe_gives_a_fidelity_warning_and_all_probes_recall_one(index, small_world, cli, tmp_path):
    code, out, _ = cli("audit", "ann-fidelity", "--index", index, "--queries", small_world / "queries.jsonl",
                       "--reasoning", "--faiss", IVF, "--nprobe", "1", "--k", "10,50", "--report", tmp_path / "r.json")
    assert code == 0 and "audit ann-fidelity: WARNING" in out and "nprobe 1" in out
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["verdict"] == "warning" and report["details"]["ks"] == [10, 50]
    real = report["details"]["recall"]["real"]["10"]
    assert real["mean"] < 0.9 and real["ci95"][0] <= real["mean"] <= real["ci95"][1]
    assert report["details"]["recall"]["real"]["10"]["queries"] == 40
    code, out, _ = cli("audit", "ann-fidelity", "--index", index, "--queries", small_world / "queries.jsonl",
                       "--reasoning", "--faiss", IVF, "--nprobe", "1", "--strict")
    assert code == 2 and "FAIL" in out
    code, out, _ = cli("audit", "ann-fidelity", "--index", index, "--queries", small_world / "queries.jsonl",
                       "--faiss", IVF, "--nprobe", "16")
    assert code == 0 and "audit ann-fidelity: OK" in out


def test_real_vectors_are_the_dense_searchers_reasoning_aware_query_embeddings(index, small_world, tmp_path):
    from hopscotch.retriever.audit.ann_fidelity import real_query_vectors
    from hopscotch.retriever.io.queries import read_queries

    rows = [json.loads(line) for line in (small_world / "queries.jsonl").read_text().splitlines()]
    path = tmp_path / "queries.jsonl"  # every other query with the agent's reasoning before it
    path.write_text("".join(json.dumps({**r, "reasoning": f"Step {i}: look up {r['text']}." if i % 2 else None}) + "\n"
                            for i, r in enumerate(rows)))
    queries = list(read_queries(path))
    searcher, aware, note = real_query_vectors(index, path, None, True, AnnOptions())
    _, plain, _ = real_query_vectors(index, path, None, False, AnnOptions())
    expected = searcher.query_embeddings([q.with_reasoning() for q in queries])
    assert np.allclose(aware, expected) and not np.allclose(aware[1], plain[1]) and note == "40 queries"
    _, sampled, note = real_query_vectors(index, path, None, True, AnnOptions(max_queries=7, seed=3))
    assert len(sampled) == 7 and note == "7 of 40 queries (seed 3)"


def summary(mean: float, half: float = 0.01) -> dict:
    return {"mean": mean, "ci95": [mean - half, mean + half], "half_width": half, "queries": 100}


def test_rule_warns_on_a_gap_below_the_documents_even_above_the_floor():
    opts = AnnOptions(ks=(10,), max_gap=0.05, min_recall=0.5)
    verdict, problems, gaps = judge({"real": {10: summary(0.80)}, "documents": {10: summary(0.95)}}, opts)
    assert verdict == "warning" and len(problems) == 1 and "below the documents'" in problems[0]
    assert gaps[10]["gap"] == pytest.approx(0.15) and gaps[10]["ci95"][0] < 0.15 < gaps[10]["ci95"][1]
    assert judge({"real": {10: summary(0.93)}, "documents": {10: summary(0.95)}}, opts)[0] == "ok"
    strict = AnnOptions(ks=(10,), strict=True, min_recall=0.99)
    verdict, problems, _ = judge({"real": {10: summary(0.97)}, "documents": {10: summary(0.97)}}, strict)
    assert verdict == "fail" and "--min-recall" in problems[0]


def test_bad_flags_exit_2(cli, index, small_world, capsys):
    with pytest.raises(SystemExit) as exc:
        cli("audit", "ann-fidelity", "--index", index, "--queries", small_world / "queries.jsonl", "--k", "0,10")
    assert exc.value.code == 2 and "argument --k" in capsys.readouterr().err
    code, _, err = cli("audit", "ann-fidelity", "--index", index, "--queries", small_world / "queries.jsonl",
                       "--faiss", "nope")
    assert code == 2 and "no FAISS index 'nope'" in err


def test_a_cutoff_beyond_the_documents_is_refused_and_a_default_one_noted(cli, index, small_world):
    """recall@k against exact search needs k below the index's documents (300 here): an asked-for 100000 is refused
    in one line; the default 10,100 fits (a smaller index would measure its largest cutoff lower, with a note)."""
    code, _, err = cli("audit", "ann-fidelity", "--index", index, "--queries", small_world / "queries.jsonl",
                       "--k", "10,100000")
    assert code == 2 and "--k 100000" in err and "at most 299" in err and err.count("\n") == 1, err
