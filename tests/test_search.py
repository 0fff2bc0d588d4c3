"""``hopscotch index`` + ``hopscotch search``: dense, reasoning-aware, BM25 and hybrid runs; searchers."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hopscotch.retriever.io.queries import read_queries
from hopscotch.retriever.io.runs import read_run


@pytest.fixture(scope="module")
def built(small_world, tiny_bert_dir, tmp_path_factory):
    """A dense index (tiny BERT, 5 shards) and a BM25 index over the small world, built by the CLI."""
    from hopscotch.retriever.cli import main

    root = tmp_path_factory.mktemp("search")
    corpus = small_world / "corpus.jsonl"
    assert main(["index", "--corpus", str(corpus), "--model", str(tiny_bert_dir), "--out", str(root / "dense"),
                 "--shard-size", "64", "--max-length", "64", "--batch-size", "32"]) == 0
    assert main(["bm25-index", "--corpus", str(corpus), "--out", str(root / "bm25")]) == 0
    queries = root / "queries.jsonl"
    rows = [json.loads(line) for line in (small_world / "queries.jsonl").read_text().splitlines()]
    for i, row in enumerate(rows):
        if i % 2 == 0:
            row["reasoning"] = f"I should look up facts about {row['text'].split()[-1]} first."
    queries.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return {"root": root, "dense": root / "dense", "bm25": root / "bm25", "queries": queries,
            "model": tiny_bert_dir, "qrels": small_world / "qrels.tsv"}


def exact_run(built, texts: list[str], k: int):
    """What an exact search must return: DenseEncoder + FAISS IndexFlatIP over all shard vectors."""
    from hopscotch.retriever.index.layout import (
        IndexMeta,
        ShardIds,
        load_shard_embeddings,
    )
    from hopscotch.retriever.model.dense_encoder import DenseEncoder, exact_search

    meta = IndexMeta.load(built["dense"])
    emb = np.concatenate([np.asarray(load_shard_embeddings(built["dense"], s), np.float32)
                          for s in range(meta.num_shards)])
    q = DenseEncoder(built["model"], max_length=64).encode_texts(texts)
    scores, rows = exact_search(emb, q, k)
    ids = ShardIds(built["dense"], meta)
    return [{ids.docid(r): float(s) for s, r in zip(srow, rrow)} for srow, rrow in zip(scores, rows)]


def test_dense_search_matches_exact_search(cli, built, tmp_path):
    run_path = tmp_path / "dense.trec"
    code, out, err = cli("search", "--queries", built["queries"], "--index", built["dense"], "--model",
                         built["model"], "--k", 10, "--out", run_path)
    assert code == 0, err
    run = read_run(run_path)
    queries = list(read_queries(built["queries"]))
    assert list(run) == [q.qid for q in queries] and all(len(v) == 10 for v in run.values())
    expected = exact_run(built, [q.text for q in queries], 10)
    for q, exp in zip(queries, expected):
        assert set(run[q.qid]) == set(exp)
        for docid, score in exp.items():
            assert run[q.qid][docid] == pytest.approx(score, abs=2e-6)
    lines = run_path.read_text().splitlines()
    assert lines[0].split()[1] == "Q0" and lines[0].split()[3] == "1" and lines[0].split()[5] == "hopscotch"


def test_search_without_model_uses_the_recorded_one(cli, built, tmp_path):
    a, b = tmp_path / "a.trec", tmp_path / "b.trec"
    assert cli("search", "--queries", built["queries"], "--index", built["dense"], "--k", 5, "--out", a)[0] == 0
    assert cli("search", "--queries", built["queries"], "--index", built["dense"], "--model", built["model"],
               "--k", 5, "--out", b)[0] == 0
    assert a.read_text() == b.read_text()


def test_reasoning_flag_encodes_the_agentir_template(cli, built, tmp_path):
    from hopscotch.retriever.model.query_template import format_query

    plain, aware = tmp_path / "plain.trec", tmp_path / "aware.trec"
    assert cli("search", "--queries", built["queries"], "--index", built["dense"], "--k", 10, "--out", plain,
               "--instruction", "Find: ")[0] == 0
    assert cli("search", "--queries", built["queries"], "--index", built["dense"], "--k", 10, "--out", aware,
               "--reasoning", "--instruction", "Find: ")[0] == 0
    queries = list(read_queries(built["queries"]))
    run = read_run(aware)
    texts = [format_query(q.text, q.reasoning, instruction="Find: ", reasoning_aware=True) for q in queries]
    assert texts[1].startswith("Find: Reasoning: Empty\n\nQuery: ")
    for q, exp in zip(queries, exact_run(built, texts, 10)):
        assert set(run[q.qid]) == set(exp)
    plain_run = read_run(plain)
    for q, exp in zip(queries, exact_run(built, [f"Find: {q.text}" for q in queries], 10)):
        assert set(plain_run[q.qid]) == set(exp)
    assert plain_run != run


def test_bm25_and_hybrid_runs(cli, built, tmp_path):
    from hopscotch.retriever.index.bm25 import BM25Index
    from hopscotch.retriever.searchers.fusion import interpolate, reciprocal_rank_fusion

    bm25_path, rrf_path, interp_path = tmp_path / "bm25.trec", tmp_path / "rrf.trec", tmp_path / "interp.trec"
    assert cli("search", "--queries", built["queries"], "--bm25", built["bm25"], "--k", 20, "--out", bm25_path)[0] == 0
    common = ("--queries", built["queries"], "--bm25", built["bm25"], "--index", built["dense"], "--k", 20,
              "--depth", 50)
    assert cli("search", *common, "--fusion", "rrf", "--rrf-k", 30, "--out", rrf_path)[0] == 0
    assert cli("search", *common, "--fusion", "interp", "--alpha", 0.4, "--out", interp_path)[0] == 0
    queries = list(read_queries(built["queries"]))
    sparse = BM25Index.load(built["bm25"]).search([q.text for q in queries], k=50)
    dense = exact_run(built, [q.text for q in queries], 50)
    rrf, interp, bm25 = read_run(rrf_path), read_run(interp_path), read_run(bm25_path)
    for q, s, d in zip(queries, sparse, dense):
        d_ranked = sorted(d.items(), key=lambda kv: (-kv[1], kv[0]))
        assert set(bm25[q.qid]) == {docid for docid, _ in s[:20]}
        want = dict(reciprocal_rank_fusion([s, d_ranked], rrf_k=30, k=20))
        assert set(rrf[q.qid]) == set(want)
        want = dict(interpolate(s, d_ranked, alpha=0.4, k=20))
        assert set(interp[q.qid]) == set(want)
        assert all(interp[q.qid][docid] == pytest.approx(v, abs=1e-5) for docid, v in want.items())


def test_searcher_objects_share_the_interface(built):
    from hopscotch.retriever.searchers import (
        build_searcher,
        get_searcher_class,
        searcher_names,
    )

    assert searcher_names() == ["bm25", "dense", "hybrid", "remote"]
    dense = build_searcher("dense", index=built["dense"])
    hits = dense.search("Which city is the shipbuilding company headquartered in?", k=3)
    assert len(hits) == 3 and set(hits[0]) == {"docid", "score", "snippet"}
    doc = dense.get_document(hits[0]["docid"])
    assert doc["docid"] == hits[0]["docid"] and hits[0]["snippet"].startswith(doc["title"])
    assert dense.get_document("not-a-doc") is None
    bm25 = build_searcher("bm25", bm25=built["bm25"], index=built["dense"])
    assert bm25.search("shipbuilding company", k=2)[0]["snippet"]
    hybrid = build_searcher("hybrid", bm25=built["bm25"], index=built["dense"], fusion="interp")
    assert len(hybrid.search("shipbuilding company", k=4)) == 4
    assert get_searcher_class("remote").__name__ == "RemoteSearcher"
    from hopscotch.retriever.searchers import search_run
    queries = list(read_queries(built["queries"]))
    run = search_run(dense, queries, 5, batch_size=7)
    assert [set(run[q.qid]) for q in queries] == [set(e) for e in exact_run(built, [q.text for q in queries], 5)]


def test_search_errors_are_one_line_exit_2(cli, built, tmp_path):
    out = tmp_path / "x.trec"
    for argv, needle in [
        (("search", "--queries", built["queries"], "--out", out), "give --bm25 DIR, --index DIR"),
        (("search", "--queries", built["queries"], "--index", built["dense"], "--fusion", "rrf", "--out", out),
         "--fusion needs both"),
        (("search", "--queries", built["queries"], "--index", tmp_path, "--out", out), "not a Hopscotch dense index"),
        (("search", "--queries", built["queries"], "--bm25", built["bm25"], "--model", "minilm", "--out", out),
         "--model encodes queries for a dense index"),
    ]:
        code, _, err = cli(*argv)
        assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"_id": "q1", "text": "fine"}\n{"_id": "q2"}\n')
    code, _, err = cli("search", "--queries", bad, "--bm25", built["bm25"], "--out", out)
    assert code == 2 and "bad.jsonl:2" in err
    assert not out.exists()


def test_index_cli_reports_missing_arguments(cli, tmp_path):
    code, _, err = cli("index", "--corpus", tmp_path / "c.jsonl")
    assert code == 2 and "missing --model, --out" in err
