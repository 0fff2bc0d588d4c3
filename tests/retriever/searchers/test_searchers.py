"""``hopscotch index`` + ``hopscotch search``: dense, reasoning-aware, BM25 and hybrid runs; searchers."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hopscotch.retriever.io.queries import read_queries
from hopscotch.retriever.io.runs import ranked, read_run
from hopscotch.retriever.io.queries import queries_of


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
    from hopscotch.retriever.index.layout import IndexMeta, ShardIds, load_shard_embeddings
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
    code, _, err = cli("search", "--queries", built["queries"], "--index", built["dense"], "--model",
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


def test_search_reasoning_defaults_to_the_saved_models_query_input(cli, built, tmp_path):
    from hopscotch.retriever.model.config import EncoderConfig
    from hopscotch.retriever.model.dual_encoder import DualEncoder
    from hopscotch.retriever.searchers import build_searcher

    saved = tmp_path / "model"
    DualEncoder.from_pretrained(built["model"], EncoderConfig(query_input="current_reasoning", query_max_len=64,
                                                              passage_max_len=64)).save(saved)
    queries = tmp_path / "steps.jsonl"  # agent steps: full reasoning, and the part since the last tool result
    rows = [json.loads(line) for line in built["queries"].read_text().splitlines()]
    for i, row in enumerate(rows):
        row["reasoning"] = f"Earlier I read about {row['text'].split()[0]}. Now {row['text'].split()[-1]} matters."
        row["current_reasoning"] = f"Now {row['text'].split()[-1]} matters." if i % 3 else ""
        row["prior_queries"] = [f"earlier query {i}"]
    queries.write_text("".join(json.dumps(r) + "\n" for r in rows))
    runs = {name: tmp_path / f"{name}.trec" for name in ("default", "current", "full", "plain", "query")}
    common = ("--queries", queries, "--index", built["dense"], "--model", saved, "--k", 10)
    code, _, err = cli("search", *common, "--reasoning", "--out", runs["default"])
    assert code == 0 and "query input: current_reasoning" in err
    assert cli("search", *common, "--query-input", "current_reasoning", "--out", runs["current"])[0] == 0
    assert cli("search", *common, "--reasoning", "--query-input", "reasoning", "--out", runs["full"])[0] == 0
    assert cli("search", *common, "--out", runs["plain"])[0] == 0
    assert cli("search", *common, "--reasoning", "--query-input", "query", "--out", runs["query"])[0] == 0
    text = {name: path.read_text() for name, path in runs.items()}
    assert text["default"] == text["current"] != text["full"]
    assert text["plain"] == text["query"] != text["default"]
    # what the encoder saw: the model's variant over each query's context fields
    dense = build_searcher("dense", index=built["dense"], model=saved)
    steps = list(read_queries(queries))
    assert dense.query_input.kind == "current_reasoning" and dense.takes_reasoning  # a reasoning-aware model
    got = dense.query_texts([q.with_reasoning() for q in steps[:3]])
    assert got[0] == f"Reasoning: Empty\n\nQuery: {steps[0].text}"
    assert got[1] == f"Reasoning: {steps[1].current_reasoning}\n\nQuery: {steps[1].text}"
    # an untrained model's --reasoning stays today's full-reasoning template
    assert build_searcher("dense", index=built["dense"]).query_input.kind == "reasoning"
    assert not build_searcher("dense", index=built["dense"]).takes_reasoning
    code, _, err = cli("search", *common, "--query-input", "tail:9", "--out", tmp_path / "x.trec")
    assert code == 2 and "--query-input: unknown query input 'tail:9'" in err


def test_bm25_and_hybrid_runs(cli, built, tmp_path):
    from hopscotch.retriever.index.bm25 import BM25Index
    from hopscotch.retriever.searchers.fusion import interpolate, reciprocal_rank_fusion

    bm25_path, rrf_path, interp_path = tmp_path / "bm25.trec", tmp_path / "rrf.trec", tmp_path / "interp.trec"
    assert cli("search", "--queries", built["queries"], "--bm25", built["bm25"], "--k", 20, "--out", bm25_path)[0] == 0
    common = ("--queries", built["queries"], "--bm25", built["bm25"], "--index", built["dense"], "--k", 20,
              "--depth", 50)
    assert cli("search", *common, "--fusion", "rrf", "--rrf-k", 30, "--rrf-weights", "1,1", "--out", rrf_path)[0] == 0
    assert cli("search", *common, "--fusion", "interp", "--alpha", 0.4, "--normalization", "zscore",
               "--out", interp_path)[0] == 0
    queries = list(read_queries(built["queries"]))
    sparse = BM25Index.load(built["bm25"]).search([q.text for q in queries], k=50)
    dense = exact_run(built, [q.text for q in queries], 50)
    rrf, interp, bm25 = read_run(rrf_path), read_run(interp_path), read_run(bm25_path)
    for q, s, d in zip(queries, sparse, dense):
        d_ranked = sorted(d.items(), key=lambda kv: (-kv[1], kv[0]))
        assert set(bm25[q.qid]) == {docid for docid, _ in s[:20]}
        s = ranked(dict(s))  # the hybrid fuses each list with its ties in docid order, as a run file holds them
        want = dict(reciprocal_rank_fusion([s, d_ranked], rrf_k=30, k=20))
        assert set(rrf[q.qid]) == set(want)
        want = dict(interpolate(s, d_ranked, alpha=0.4, k=20, normalization="zscore"))
        assert set(interp[q.qid]) == set(want)
        assert all(interp[q.qid][docid] == pytest.approx(v, abs=1e-5) for docid, v in want.items())


def test_adaptive_hybrid_run_is_the_library_fusion(cli, built, tmp_path):
    """`search --fusion adaptive` ranks each query as FusionSettings.adaptive(...).apply on the same two lists."""
    from hopscotch.retriever.index.bm25 import BM25Index
    from hopscotch.retriever.searchers.fusion import FusionSettings

    out = tmp_path / "adaptive.trec"
    assert cli("search", "--queries", built["queries"], "--bm25", built["bm25"], "--index", built["dense"], "--k", 20,
               "--depth", 50, "--fusion", "adaptive", "--alpha", 0.5, "--adapt", 2, "--adapt-shift", 0.5,
               "--out", out)[0] == 0
    queries = list(read_queries(built["queries"]))
    sparse = BM25Index.load(built["bm25"]).search([q.text for q in queries], k=50)
    dense = exact_run(built, [q.text for q in queries], 50)
    settings = FusionSettings.adaptive(1 / 3, 2.0, 0.5)
    got = read_run(out)
    for q, s, d in zip(queries, sparse, dense):  # each list's ties in docid order, as the hybrid fuses them
        want = dict(settings.apply(ranked(dict(s)), sorted(d.items(), key=lambda kv: (-kv[1], kv[0])), k=20))
        assert set(got[q.qid]) == set(want)
        assert all(got[q.qid][docid] == pytest.approx(v, abs=1e-4) for docid, v in want.items())


def test_searcher_objects_share_the_interface(built):
    from hopscotch.retriever.searchers import build_searcher, get_searcher_class, searcher_names

    assert searcher_names() == ["bm25", "dense", "multi_vector", "hybrid", "remote"]
    dense = build_searcher("dense", index=built["dense"])
    hits = dense.search("Which city is the shipbuilding company headquartered in?", k=3)
    assert len(hits) == 3 and set(hits[0]) == {"docid", "score", "text", "snippet"}
    doc = dense.get_document(hits[0]["docid"])
    assert doc["docid"] == hits[0]["docid"] and hits[0]["snippet"].startswith(doc["title"])
    assert dense.get_document("not-a-doc") is None
    bm25 = build_searcher("bm25", bm25=built["bm25"], index=built["dense"])
    assert bm25.search("shipbuilding company", k=2)[0]["snippet"] == bm25.search("shipbuilding company", k=2)[0]["text"]
    hybrid = build_searcher("hybrid", bm25=built["bm25"], index=built["dense"], fusion="interp")
    assert len(hybrid.search("shipbuilding company", k=4)) == 4
    assert get_searcher_class("remote").__name__ == "RemoteSearcher"
    from hopscotch.retriever.searchers import search_run
    queries = list(read_queries(built["queries"]))
    run = search_run(dense, queries, 5, batch_size=7)
    assert [set(run[q.qid]) for q in queries] == [set(e) for e in exact_run(built, [q.text for q in queries], 5)]


def test_registry_lists_the_five_backends():
    from hopscotch.retriever.searchers import SEARCHERS, get_searcher_class, searcher_names
    from hopscotch.retriever.searchers.bm25 import BM25Searcher
    from hopscotch.retriever.searchers.remote import RemoteSearcher

    assert list(SEARCHERS) == searcher_names() == ["bm25", "dense", "multi_vector", "hybrid", "remote"]
    assert searcher_names(local_only=True) == ["bm25", "dense", "multi_vector", "hybrid"]
    assert SEARCHERS["bm25"] is BM25Searcher and get_searcher_class("remote") is RemoteSearcher
    assert "bm25" in SEARCHERS and "splade" not in SEARCHERS and len(SEARCHERS) == 5
    for name, cls in SEARCHERS.items():
        assert cls.name == name and isinstance(cls.search_type, str) and cls.search_type  # class-level
    assert BM25Searcher.search_type == "BM25"
    from hopscotch.retriever.errors import UsageError
    with pytest.raises(UsageError, match="unknown searcher 'splade'"):
        get_searcher_class("splade")


def test_registering_a_name_twice_is_refused():
    from hopscotch.retriever.searchers import register_searcher
    from hopscotch.retriever.searchers.bm25 import BM25Searcher

    class Other(BM25Searcher):
        pass

    with pytest.raises(ValueError, match="registered twice"):
        register_searcher("bm25")(Other)


def _option_actions(parser):
    return [a for a in parser._actions if a.option_strings and a.dest != "help"]


@pytest.mark.parametrize("name,flags", [
    ("bm25", {"--bm25", "--index", "--corpus"}),
    ("dense", {"--index", "--model", "--instruction", "--query-input", "--nprobe", "--ef-search", "--refine",
               "--faiss"}),
    ("hybrid", {"--bm25", "--index", "--corpus", "--model", "--fusion", "--alpha", "--normalization", "--rrf-k", "--rrf-weights",
                "--depth"}),
    ("remote", {"--url", "--name", "--token"}),
])
def test_each_backend_adds_its_flags_to_a_fresh_parser(name, flags):
    import argparse

    from hopscotch.retriever.searchers import SEARCHERS

    parser = argparse.ArgumentParser()
    SEARCHERS[name].parse_args(parser)
    SEARCHERS[name].parse_args(parser)  # declaring again is a no-op, not an argparse conflict
    actions = _option_actions(parser)
    declared = {s for a in actions for s in a.option_strings}
    assert flags <= declared
    assert all(a.help for a in actions)


def test_all_backends_share_one_parser_and_every_option_has_help():
    import argparse

    from hopscotch.retriever.cli import build_parser
    from hopscotch.retriever.searchers import add_searcher_arguments
    from hopscotch.retriever.searchers.base import add_option

    parser = argparse.ArgumentParser()
    add_searcher_arguments(parser)
    strings = [s for a in _option_actions(parser) for s in a.option_strings]
    assert len(strings) == len(set(strings)) and strings.count("--index") == 1
    with pytest.raises(ValueError, match="--index is declared twice with different settings"):
        add_option(parser, "--index", help="something else")
    sub = build_parser()._subparsers._group_actions[0].choices
    for command in ("search", "serve"):
        assert all(a.help for a in _option_actions(sub[command])), command
    from hopscotch.retriever.searchers.hybrid import DEFAULT_DEPTH

    search = sub["search"].parse_args(["--queries", "q", "--out", "o"])
    serve = sub["serve"].parse_args([])
    replay = sub["replay"].parse_args(["--runs", "r", "--out", "o"])
    assert search.depth == serve.depth == replay.depth == DEFAULT_DEPTH  # one fusion depth, shown in --help
    for command in ("search", "serve", "replay"):
        assert f"(default {DEFAULT_DEPTH}," in " ".join(sub[command].format_help().split())
    assert serve.name == "default" and not hasattr(serve, "url")


def test_browsecomp_plus_style_registry_use(built, small_world):
    import argparse

    from hopscotch.retriever.searchers import SEARCHERS

    cls = SEARCHERS["bm25"]
    parser = argparse.ArgumentParser()
    cls.parse_args(parser)
    searcher = cls.from_args(parser.parse_args(["--bm25", str(built["bm25"]),
                                                "--corpus", str(small_world / "corpus.jsonl")]))
    assert searcher.search_type == "BM25" and "top-5" in searcher.search_description(5)
    assert searcher.get_document_description()
    hits = searcher.search("shipbuilding company", 5, original_query="x")  # AgentIR's extra kwargs are ignored
    assert len(hits) == 5 and all({"docid", "score", "text", "snippet"} == set(h) for h in hits)
    assert hits[0]["text"] and hits[0]["score"] >= hits[-1]["score"]
    assert searcher.search("shipbuilding company", 5, store_rerank=True) == {"results": hits, "rerank_output": None}
    doc = searcher.get_document(hits[0]["docid"])
    assert doc["docid"] == hits[0]["docid"] and doc["text"] and doc["title"]
    assert hits[0]["text"] == f"{doc['title']}\n{doc['text']}"  # the whole document, its title first
    assert searcher.get_document("not-a-doc") is None
    searcher.snippet_chars = 15
    cut = searcher.search("shipbuilding company", 5)
    assert [h["text"] for h in cut] == [h["text"] for h in hits] and all(len(h["snippet"]) <= 15 for h in cut)
    assert all(h["text"].startswith(h["snippet"]) and h["snippet"] for h in cut)


def test_dense_and_hybrid_from_args_and_store_rerank(built):
    import argparse

    from hopscotch.retriever.searchers import SEARCHERS, searcher_from_args

    parser = argparse.ArgumentParser()
    SEARCHERS["hybrid"].parse_args(parser)
    args = parser.parse_args(["--bm25", str(built["bm25"]), "--index", str(built["dense"]), "--fusion", "interp",
                              "--alpha", "0.5", "--depth", "30"])
    hybrid = SEARCHERS["hybrid"].from_args(args)
    assert (hybrid.fusion, hybrid.alpha, hybrid.normalization, hybrid.depth) == ("interp", 0.5, "minmax", 30)
    assert searcher_from_args(args).name == "hybrid"  # the flags select hybrid
    hits = hybrid.search("shipbuilding company", k=3, store_rerank=True)["results"]
    assert len(hits) == 3 and all(h["text"] == h["snippet"] and h["text"] for h in hits)  # short documents
    # an untrained model does not read reasoning, the BM25 half does (its expansion): the hybrid takes it, and
    # its dense half searches with the query alone
    assert hybrid.takes_reasoning is True and hybrid.dense.takes_reasoning is False
    reasoning = "The harbour city of the shipbuilding firm"
    aware = hybrid.search_batch(queries_of(["shipbuilding company"], [reasoning], True), 3)[0]
    expected = hybrid.settings.apply(hybrid.bm25.search_batch(queries_of(["shipbuilding company"], [reasoning], True), 30)[0],
                                     hybrid.dense.search_batch(["shipbuilding company"], 30)[0], 3)
    assert aware == expected
    dense = SEARCHERS["dense"](argparse.Namespace(index=str(built["dense"]), instruction="Q: "))  # SearcherClass(args)
    assert dense.instruction == "Q: " and dense.search("harbour", k=2, store_rerank=True)["results"][0]["text"]
    told = SEARCHERS["dense"](argparse.Namespace(index=str(built["dense"]), query_input="reasoning_tail:16"))
    assert told.takes_reasoning and not SEARCHERS["dense"](argparse.Namespace(
        index=str(built["dense"]), query_input="query")).takes_reasoning


def test_build_searcher_takes_flag_destinations(built):
    from hopscotch.retriever.searchers import build_searcher

    with pytest.raises(TypeError, match="takes no option rrf_k"):
        build_searcher("bm25", bm25=built["bm25"], rrf_k=3)
    hybrid = build_searcher("hybrid", bm25=built["bm25"], index=built["dense"], rrf_k=7.0)
    assert (hybrid.fusion, hybrid.rrf_k, hybrid.depth) == ("rrf", 7.0, 100)
    shared = build_searcher("dense", index=built["dense"], encoder=hybrid.dense.encoder)
    assert shared.encoder is hybrid.dense.encoder
    from hopscotch.retriever.searchers.dense import DenseOptions, DenseSearcher

    plain = DenseSearcher(built["dense"], late_fusion=0.5, instruction="Find: ", encoder=shared.encoder)  # keywords
    assert (plain.late_fusion, plain.instruction) == (0.5, "Find: ")
    with pytest.raises(TypeError, match="not both"):
        DenseSearcher(built["dense"], options=DenseOptions(), instruction="Find: ")
    from hopscotch.retriever.errors import UsageError

    with pytest.raises(UsageError, match="--refine 3: .* is exact already"):  # Flat: refine would do nothing
        DenseSearcher(built["dense"], refine=3, encoder=shared.encoder)


def test_search_through_a_remote_service_writes_the_same_run(cli, built, tmp_path):
    from hopscotch.retriever.searchers import build_searcher
    from hopscotch.retriever.serving.server import make_server, serve_in_thread

    # a searcher told to read reasoning: the service encodes a request's reason only for such a searcher
    served = build_searcher("dense", index=built["dense"], query_input="reasoning")
    server = make_server({"wiki": served}, port=0, token="t0k")
    serve_in_thread(server)
    try:
        local, remote = tmp_path / "local.trec", tmp_path / "remote.trec"
        assert cli("search", "--queries", built["queries"], "--index", built["dense"], "--k", 5, "--out", local,
                   "--reasoning", "--query-input", "reasoning")[0] == 0
        code, out, err = cli("search", "--queries", built["queries"], "--url", server.url, "--name", "wiki",
                             "--token", "t0k", "--k", 5, "--out", remote, "--reasoning")
        assert code == 0 and "(remote)" in out, err
    finally:
        server.shutdown_and_close()
    a, b = read_run(local), read_run(remote)
    assert list(a) == list(b)
    for qid in a:
        assert set(a[qid]) == set(b[qid])
        assert all(b[qid][d] == pytest.approx(s, abs=1e-5) for d, s in a[qid].items())


def test_search_errors_are_one_line_exit_2(cli, built, tmp_path):
    out = tmp_path / "x.trec"
    not_index = tmp_path / "not_an_index"
    not_index.mkdir()
    for argv, needle in [
        (("search", "--queries", built["queries"], "--out", out), "give --bm25 DIR, --index DIR"),
        (("search", "--queries", built["queries"], "--index", built["dense"], "--fusion", "rrf", "--out", out),
         "--fusion needs both"),
        (("search", "--queries", built["queries"], "--index", not_index, "--out", out), "not a Hopscotch dense index"),
        (("search", "--queries", built["queries"], "--bm25", built["bm25"], "--model", "minilm", "--out", out),
         "--model encodes queries for a dense index"),
        (("search", "--queries", built["queries"], "--bm25", built["bm25"], "--url", "http://127.0.0.1:9",
          "--out", out), "pick one with --searcher-type"),
        (("search", "--queries", built["queries"], "--searcher-type", "remote", "--out", out),
         "the remote searcher needs a service url (--url)"),
        (("search", "--queries", built["queries"], "--searcher-type", "hybrid", "--index", built["dense"],
          "--out", out), "the hybrid searcher needs a BM25 index folder (--bm25)"),
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
