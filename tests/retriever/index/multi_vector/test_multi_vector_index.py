"""The multi-vector (PLAID-style) index: build, resume, sharded build, search through every path that
builds the dense backend (CLI search, hybrid with BM25, the BrowseComp-Plus registry), fidelity to exact MaxSim,
and ``index --plan`` for token indexes."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from hopscotch.retriever.io.runs import read_run
from hopscotch.retriever.io.queries import queries_of


def exact_top(model, corpus, query, k):
    """Exact MaxSim over every document (float16-rounded token vectors, as the shards store them)."""
    from hopscotch.retriever.model.multi_vector import maxsim

    docs = [json.loads(line) for line in corpus.read_text().splitlines()]
    vectors = [v.half().float() for v in model.encode_documents([(d.get("title"), d["text"]) for d in docs])]
    scores = maxsim(model.encode_queries([query], reasoning_aware=False)[0], vectors)
    return [docs[i]["_id"] for i in torch.argsort(scores, descending=True, stable=True)[:k].tolist()]


def test_manifest_and_files_record_the_token_index(mv_world):
    meta = json.loads((mv_world["idx"] / "index.json").read_text())
    mv = meta["multi_vector"]
    assert mv["nbits"] == 8 and mv["num_centroids"] == 64 and mv["dim"] == 16 and mv["bytes_per_token"] == 20
    assert mv["num_tokens"] == sum(int(np.load(p).sum()) for p in (mv_world["idx"] / "shards").glob("*.doclens.npy"))
    assert meta["dim"] == 16 and meta["num_docs"] == 300 and meta["num_shards"] == 5
    offsets = np.load(mv_world["idx"] / "mv" / "ivf_offsets.npy")
    assert offsets[0] == 0 and offsets[-1] == len(np.load(mv_world["idx"] / "mv" / "ivf.npy")) and len(offsets) == 65


def test_full_index_search_finds_what_exact_maxsim_finds(mv_world):
    from hopscotch.retriever.model.multi_vector import load_multi_vector_model
    from hopscotch.retriever.searchers import build_searcher
    from hopscotch.retriever.searchers.multi_vector_index import MultiVectorIndexSearcher

    searcher = build_searcher("dense", index=str(mv_world["idx"]), nprobe=64, mv_candidates=300)
    assert isinstance(searcher, MultiVectorIndexSearcher) and searcher.name == "multi_vector"
    model = load_multi_vector_model(mv_world["mv"], device="cpu")
    queries = [r["text"] for r in mv_world["rows"]]
    hits = searcher.search_batch(queries, k=5)
    overlap = [len({d for d, _ in h} & set(exact_top(model, mv_world["corpus"], q, 5))) / 5
               for q, h in zip(queries, hits)]
    assert np.mean(overlap) >= 0.9, overlap  # 8-bit residuals, every centroid probed: near-exact
    narrow = build_searcher("dense", index=str(mv_world["idx"]), nprobe=2, mv_candidates=20).search_batch(queries, k=5)
    assert all(len(h) == 5 for h in narrow)
    assert all(s1 >= s2 for h in hits for (_, s1), (_, s2) in zip(h, h[1:]))


def test_reasoning_aware_and_late_fused_queries(mv_world):
    from hopscotch.retriever.searchers import build_searcher

    rows = mv_world["rows"]
    queries, reasonings = [r["text"] for r in rows], [r.get("reasoning") for r in rows]
    plain = build_searcher("dense", index=str(mv_world["idx"]), query_input="query").search_batch(queries, k=5)
    aware = build_searcher("dense", index=str(mv_world["idx"])).search_batch(queries_of(queries, reasonings, True), 5)
    fused = build_searcher("dense", index=str(mv_world["idx"]), late_fusion=0.0).search_batch(queries_of(queries, reasonings, True), 5)
    assert any(a != p for a, p in zip(aware[1::2], plain[1::2]))  # the reasoning moves the ranking
    assert [[d for d, _ in h] for h in fused] == [[d for d, _ in h] for h in plain]  # w = 0: the query alone


def test_cli_search_hybrid_and_browsecomp_registry(mv_world, cli, tmp_path):
    import argparse

    from hopscotch.retriever.searchers import SEARCHERS

    code, out, err = cli("search", "--queries", mv_world["queries"], "--index", mv_world["idx"], "--k", 5,
                         "--out", tmp_path / "mv.trec", "--reasoning")
    assert code == 0, err
    assert all(len(v) == 5 for v in read_run(tmp_path / "mv.trec").values())
    code, out, err = cli("search", "--queries", mv_world["queries"], "--index", mv_world["idx"], "--bm25",
                         mv_world["bm25"], "--k", 5, "--out", tmp_path / "hy.trec")
    assert code == 0, err
    assert len(read_run(tmp_path / "hy.trec")) == len(mv_world["rows"])
    parser = argparse.ArgumentParser()  # BrowseComp-Plus's registry: its own flags, the searcher's, then cls(args)
    parser.add_argument("--searcher-type", choices=list(SEARCHERS))
    parser.add_argument("--model", default="gpt-4.1")  # the agent's LLM: ours becomes --hopscotch-model
    SEARCHERS["dense"].parse_args(parser)
    searcher = SEARCHERS["dense"](parser.parse_args(["--searcher-type", "dense", "--index", str(mv_world["idx"])]))
    hits = searcher.search(mv_world["rows"][0]["text"], 3)
    assert len(hits) == 3 and all(h["text"] and h["docid"] for h in hits)


def test_rerun_resumes_and_new_settings_recompress(mv_world, tmp_path, cli):
    from hopscotch.retriever.cli import main

    idx = tmp_path / "idx"
    shutil.copytree(mv_world["idx"], idx)
    args = ["index", "--corpus", str(mv_world["corpus"]), "--model", str(mv_world["mv"]), "--out", str(idx),
            "--shard-size", "64", "--nbits", "8", "--mv-centroids", "64"]
    stamp = {p.name: p.stat().st_mtime_ns for p in (idx / "mv").iterdir()}
    (idx / "mv" / "shard_00002.done.json").unlink()  # killed while compressing shard 2
    assert main(args) == 0
    after = {p.name: p.stat().st_mtime_ns for p in (idx / "mv").iterdir()}
    changed = {n for n in stamp if stamp[n] != after.get(n)}
    assert changed == {"shard_00002.codes.npy", "shard_00002.residuals.npy", "shard_00002.done.json"}
    files = {p: p.read_bytes() for p in idx.rglob("*") if p.is_file()}
    code, _, err = cli(*args[:-4], "--nbits", "2", "--mv-centroids", "64")  # other settings: refused, untouched
    assert code == 2 and f"{idx / 'mv'} holds a codec trained with --nbits 8" in err and "--overwrite" in err, err
    assert {p: p.read_bytes() for p in idx.rglob("*") if p.is_file()} == files
    assert main(args[:-4] + ["--nbits", "2", "--mv-centroids", "64", "--overwrite"]) == 0
    meta = json.loads((idx / "index.json").read_text())["multi_vector"]
    assert meta["nbits"] == 2 and np.load(idx / "mv" / "shard_00000.residuals.npy").shape[1] == 4


def test_two_ranks_build_the_same_index_as_one(mv_world, tmp_path):
    from hopscotch.retriever.index.encode import EncodeOptions, encode_corpus
    from hopscotch.retriever.index.multi_vector.build import MultiVectorOptions

    opts = dict(shard_size=64, multi_vector=MultiVectorOptions(nbits=8, num_centroids=64), show_progress=False)
    assert encode_corpus(mv_world["corpus"], mv_world["mv"], tmp_path / "two", EncodeOptions(
        rank=1, world_size=2, **opts)).meta is None  # rank 1 encodes its shards and leaves
    result = encode_corpus(mv_world["corpus"], mv_world["mv"], tmp_path / "two", EncodeOptions(
        rank=0, world_size=2, wait_timeout=5, **opts))
    assert result.encoded_shards == [0, 1] and result.meta.multi_vector["num_tokens"] > 0  # rank 1 did 2, 3, 4
    for name in ("ivf.npy", "centroids.npy", "shard_00004.codes.npy", "shard_00004.residuals.npy"):
        assert np.array_equal(np.load(tmp_path / "two" / "mv" / name), np.load(mv_world["idx"] / "mv" / name)), name


def test_windows_are_refused_and_the_plan_sizes_tokens(mv_world, cli, tmp_path):
    code, _, err = cli("index", "--corpus", mv_world["corpus"], "--model", mv_world["mv"], "--out",
                       tmp_path / "w", "--windows", "2")
    assert code == 2 and "--rerank-windows" in err
    code, out, _ = cli("index", "--plan", "--model", mv_world["mv"], "--docs", "1000", "--tokens-per-doc", "40")
    assert code == 0 and "dim 16" in out and "8 B a token" in out and "NOT SENSIBLE" not in out
    code, out, _ = cli("index", "--plan", "--multi-vector", "--docs", "553000000", "--dim", "128",
                       "--tokens-per-doc", "180")
    assert code == 0 and "36 B a token" in out and "NOT SENSIBLE at 553,000,000 documents" in out
    code, out, _ = cli("index", "--plan", "--model", mv_world["mv"], "--corpus", mv_world["corpus"], "--docs", "300")
    assert code == 0 and "measured on the first 200 documents" in out


def test_rerank_cache_seeded_from_the_index_encodes_nothing(mv_world, tmp_path):
    from hopscotch.retriever.searchers import build_searcher
    from hopscotch.retriever.searchers.rerank import MultiVectorReranker, RerankedSearcher

    reranker = MultiVectorReranker(mv_world["mv"], depth=20, cache_dir=tmp_path / "cache")
    assert reranker.seed_cache(mv_world["idx"]) == 300 and reranker.seed_cache(mv_world["idx"]) == 0
    fresh = MultiVectorReranker(mv_world["mv"], depth=20, cache_dir=tmp_path / "other")
    reranker.cache.misses = 0
    queries = [r["text"] for r in mv_world["rows"]]
    bm25 = build_searcher("bm25", bm25=str(mv_world["bm25"]), corpus=str(mv_world["corpus"]))
    seeded = RerankedSearcher(bm25, reranker).search_batch(queries, k=10)
    encoded = RerankedSearcher(bm25, fresh).search_batch(queries, k=10)
    assert reranker.cache.misses == 0 and fresh.cache.misses > 0
    for a, b in zip(seeded, encoded):  # the same vectors up to batch padding: the same order, scores within 1e-3
        assert [d for d, _ in a] == [d for d, _ in b]
        assert np.allclose([s for _, s in a], [s for _, s in b], atol=1e-3)
    with pytest.raises(Exception, match="same model"):
        MultiVectorReranker(mv_world["root"] / "mv", depth=5, windows=2).seed_cache(mv_world["idx"])


def test_serve_rest_and_mcp_answer_from_the_multi_vector_index(mv_world, monkeypatch):
    import requests

    from hopscotch.retriever.cli import build_parser
    from hopscotch.retriever.commands.serve import build_server, resolve_token
    from hopscotch.retriever.searchers import build_searcher, searcher_from_args
    from hopscotch.retriever.serving.server import serve_in_thread

    monkeypatch.delenv("HOPSCOTCH_SERVE_TOKEN", raising=False)
    query, reason = mv_world["rows"][1]["text"], mv_world["rows"][1]["reasoning"]
    ref = build_searcher("dense", index=str(mv_world["idx"]))
    args = build_parser().parse_args(["serve", "--index", str(mv_world["idx"]), "--port", "0", "--name", "mv"])
    args.token = resolve_token(args)
    server = build_server(args)  # as hopscotch serve builds it
    serve_in_thread(server)
    try:
        url = f"{server.url}/v1/mv/search"
        for params, reasoning in (({}, None), ({"reason": reason}, reason)):
            body = requests.get(url, params={"query": query, "hits": 5, **params}, timeout=60).json()
            want = ref.search_batch(queries_of([query], [reasoning], reasoning is not None), 5)[0]
            assert [(c["docid"], c["score"]) for c in body["candidates"]] == want
    finally:
        server.shutdown_and_close()
    pytest.importorskip("mcp")
    import anyio
    from mcp import Client

    from hopscotch.retriever.serving.mcp_server import MCPOptions, build_mcp_server

    args = build_parser().parse_args(["serve", "--mcp", "--index", str(mv_world["idx"]), "--k", "3"])
    mcp = build_mcp_server(searcher_from_args(args, local_only=True), MCPOptions(k=3, snippet_max_tokens=-1))

    async def call():
        async with Client(mcp) as client:
            return json.loads((await client.call_tool("search", {"query": query})).content[0].text)

    assert [h["docid"] for h in anyio.run(call)] == [d for d, _ in ref.search_batch([query], 3)[0]]


# --- damaged index files: one line naming the file (issue 36, mechanism 2) ------------------------------------------

def _damage_codec_nbits(idx):
    path = idx / "mv" / "codec.json"
    about = json.loads(path.read_text())
    path.write_text(json.dumps({**about, "nbits": 3}))
    return path


def _damage_truncate(name):
    def damage(idx):
        path = idx / "mv" / name
        path.write_bytes(path.read_bytes()[:-40])
        return path
    return damage


def _damage_array(name, change):
    def damage(idx):
        path = idx / name
        a = np.load(path)
        np.save(path, change(a.copy()))
        return path
    return damage


def _out_of_range(a):
    a[0] = 10_000
    return a


def _nan(a):
    a[0, 0] = np.nan
    return a


def _longer(a):
    a[0] += 5
    return a


@pytest.mark.parametrize("damage, needle", [
    (_damage_codec_nbits, "'nbits' must be one of"),
    (_damage_truncate("ivf.npy"), "not a readable NumPy array"),
    (_damage_array("mv/shard_00000.codes.npy", _out_of_range), "token codes out of range"),
    (_damage_array("mv/centroids.npy", _nan), "NaN"),
    (_damage_array("shards/shard_00000.doclens.npy", _longer), "token codes (the sum of the document lengths in"),
    (_damage_array("mv/ivf.npy", _out_of_range), "document rows out of range"),
    (_damage_array("mv/shard_00001.doc_centroids.npy", _out_of_range), "centroid ids out of range"),
], ids=["nbits", "truncated-ivf", "codes-range", "nan-centroids", "doclens", "ivf-rows", "doc-centroids"])
def test_a_damaged_index_file_is_named_in_one_line(mv_world, tmp_path, cli, damage, needle):
    import shutil

    idx = tmp_path / "idx"
    shutil.copytree(mv_world["idx"], idx)
    path = damage(idx)
    code, _, err = cli("search", "--queries", mv_world["queries"], "--index", idx, "--out", tmp_path / "run.trec")
    lines = [line for line in err.splitlines() if line.strip() and "note:" not in line]
    assert code == 2 and "Traceback" not in err, err
    assert len(lines) == 1 and str(path) in lines[0] and needle in lines[0], lines
    assert not (tmp_path / "run.trec").exists()


@pytest.mark.parametrize("flags, needle", [
    (["--instruction", "Query: "], "--instruction does nothing on a multi-vector index"),
    (["--query-mix-max-words", "10"], "--query-mix-max-words does nothing on a multi-vector index"),
    (["--refine", "2"], "--refine does nothing on a multi-vector index"),
    (["--first-windows-only"], "--first-windows-only does nothing"),
    (["--query-mix", "2", "--reasoning"], "--query-mix: expected a weight in [0, 1]"),
], ids=["instruction", "gate", "refine", "first-windows", "query-mix-value"])
def test_dense_flags_a_multi_vector_index_does_not_use_are_refused(mv_world, tmp_path, cli, flags, needle):
    code, _, err = cli("search", "--queries", mv_world["queries"], "--index", mv_world["idx"], "--out",
                       tmp_path / "run.trec", *flags)
    assert code == 2 and needle in err and "--rerank-query-mix" not in err, err
    assert not (tmp_path / "run.trec").exists()


def test_mv_candidates_on_a_single_vector_index_is_refused(small_world, small_world_index, tmp_path, cli):
    code, _, err = cli("search", "--queries", small_world / "queries.jsonl", "--index", small_world_index,
                       "--mv-candidates", "64", "--out", tmp_path / "run.trec")
    assert code == 2 and "--mv-candidates applies to a multi-vector index only" in err, err


def test_an_impossible_centroid_count_is_refused_not_clamped(mv_world, tmp_path, cli):
    tokens = json.loads((mv_world["idx"] / "index.json").read_text())["multi_vector"]["num_tokens"]
    code, _, err = cli("index", "--corpus", mv_world["corpus"], "--model", mv_world["mv"], "--out", tmp_path / "idx",
                       "--shard-size", "64", "--mv-centroids", str(tokens + 1))
    assert code == 2 and f"--mv-centroids {tokens + 1:,}" in err and "more centroids than" in err, err



def test_the_index_and_the_reranker_share_one_scorer_and_name_their_own_flag(mv_world):
    from hopscotch.retriever.errors import UsageError
    from hopscotch.retriever.model.multi_vector_scorer import MultiVectorScorer
    from hopscotch.retriever.searchers import build_searcher
    from hopscotch.retriever.searchers.multi_vector_index import MultiVectorIndexSearcher
    from hopscotch.retriever.searchers.rerank import MultiVectorReranker

    searcher = build_searcher("multi_vector", index=str(mv_world["idx"]), late_fusion=0.5)
    reranker = MultiVectorReranker(searcher.scorer.model, late_fusion=0.5)
    assert isinstance(searcher.scorer, MultiVectorScorer) and type(reranker.scorer) is type(searcher.scorer)
    assert searcher.late_fusion == reranker.late_fusion == 0.5
    with pytest.raises(UsageError, match="^--query-mix: expected a weight"):
        MultiVectorIndexSearcher(str(mv_world["idx"]), late_fusion=2.0)
    with pytest.raises(UsageError, match="^--rerank-query-mix: expected a weight"):
        MultiVectorReranker(searcher.scorer.model, late_fusion=2.0)


def test_a_tevatron_export_of_a_multi_vector_index_is_refused(mv_world, tmp_path, cli):
    code, _, err = cli("index", "--out", mv_world["idx"], "--export-tevatron", tmp_path / "tev")
    assert code == 2 and "--export-tevatron writes one vector a document" in err, err
    assert f"{mv_world['idx']} is a multi-vector index" in err and not list(tmp_path.iterdir())
    code, _, err = cli("index", "--corpus", mv_world["corpus"], "--model", mv_world["mv"], "--out", tmp_path / "idx",
                       "--export-tevatron", tmp_path / "tev")
    assert code == 2 and f"{mv_world['mv']} is a multi-vector model" in err and not list(tmp_path.iterdir()), err
    code, _, err = cli("index", "--plan", "--docs", "100", "--export-tevatron", tmp_path / "tev")
    assert code == 2 and "--plan builds nothing" in err, err


def test_a_narrow_one_bit_index_answers_k_hits(mv_world, tiny_bert_dir, tmp_path, cli):
    """dim 7 at 1 bit: residuals of 7 bits packed in one byte, few tokens a centroid; a search of every document
    answers every document (the probe widens until the candidates are there), not fewer without a word."""
    from hopscotch.retriever.model.multi_vector import build_multi_vector_model

    model = tmp_path / "mv7"
    build_multi_vector_model(tiny_bert_dir, dim=7, query_max_len=32, passage_max_len=48, seed=0,
                             device="cpu").save(model)
    code, _, err = cli("index", "--corpus", mv_world["corpus"], "--model", model, "--out", tmp_path / "idx",
                       "--nbits", "1")
    assert code == 0, err
    docs = len(mv_world["corpus"].read_text().splitlines())
    code, _, err = cli("search", "--queries", mv_world["queries"], "--index", tmp_path / "idx", "--out",
                       tmp_path / "run.trec", "--k", str(docs), "--mv-candidates", str(docs))
    assert code == 0, err
    run = read_run(tmp_path / "run.trec")
    assert run and all(len(hits) == docs for hits in run.values()), {q: len(h) for q, h in run.items()}
