"""``--rerank-model`` wherever a searcher is built from flags: BrowseComp-Plus's ``SearcherClass(args)`` (bm25,
hybrid), AgentIR's ``search(q, k, store_rerank=True)``, ``hopscotch serve`` (REST and MCP), ``hopscotch replay``
and a remote first stage; each reranked list equals a :class:`RerankedSearcher` built by hand (exact scores).
Orphan ``--rerank-*`` flags and unused backend flags stay errors. The harnesses' calling conventions are those
re-implemented in ``test_harness_protocol.py`` (loaded from there, not copied)."""

from __future__ import annotations

import argparse
import json

import pytest

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.runs import read_run
from hopscotch.retriever.searchers.harness import harness_query
from hopscotch.retriever.searchers import SEARCHERS, build_searcher
from hopscotch.retriever.io.queries import queries_of

K, DEPTH = 4, 12
QUERY = "shipbuilding company headquarters city"
REASON = "The company builds ships; I need the city of its headquarters, not its founder."


@pytest.fixture(scope="module")
def world(small_world, small_world_index, tiny_bert_dir, tmp_path_factory):
    """A BM25 index of the small world, its dense index, a saved tiny multi-vector model, and hand-built
    reranked references (bm25, hybrid) using a reranker loaded from the same folder."""
    from hopscotch.retriever.index.bm25 import BM25Index
    from hopscotch.retriever.io.corpus import read_corpus
    from hopscotch.retriever.model.multi_vector import build_multi_vector_model
    from hopscotch.retriever.searchers.rerank import MultiVectorReranker, RerankedSearcher

    root = tmp_path_factory.mktemp("rerank_everywhere")
    corpus = small_world / "corpus.jsonl"
    BM25Index.build(read_corpus(corpus), show_progress=False).save(root / "bm25")
    build_multi_vector_model(tiny_bert_dir, dim=16, query_max_len=48, passage_max_len=64, query_augmentation=16,
                             seed=0, device="cpu").save(root / "mv")
    reranker = MultiVectorReranker(str(root / "mv"), depth=DEPTH)
    refs = {"bm25": RerankedSearcher(build_searcher("bm25", bm25=root / "bm25", corpus=corpus), reranker),
            "hybrid": RerankedSearcher(build_searcher("hybrid", bm25=root / "bm25", index=small_world_index), reranker)}
    argv = {"bm25": ["--bm25", str(root / "bm25"), "--corpus", str(corpus)],
            "hybrid": ["--bm25", str(root / "bm25"), "--index", str(small_world_index)]}
    return {"root": root, "bm25": root / "bm25", "corpus": corpus, "mv": root / "mv", "refs": refs, "argv": argv,
            "index": small_world_index, "rerank": ["--rerank-model", str(root / "mv"), "--rerank-depth", str(DEPTH)]}


def _pairs(hits):
    return [(h["docid"], h["score"]) for h in hits]


# --- BrowseComp-Plus and AgentIR ------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["bm25", "hybrid"])
def test_browsecomp_plus_registry_reranks_by_maxsim(world, kind, harness):
    from hopscotch.retriever.searchers.rerank import RerankedSearcher

    argv = ["--searcher-type", kind, *world["argv"][kind], *world["rerank"], "--k", str(K)]
    searcher, args = harness.bcp_build(argv)
    assert isinstance(searcher, RerankedSearcher) and type(searcher.first) is SEARCHERS[kind]
    if kind == "hybrid":  # reranked once, as a whole: its halves are plain
        assert type(searcher.first.bm25) is SEARCHERS["bm25"] and type(searcher.first.dense) is SEARCHERS["dense"]
    assert searcher.name == f"{kind}+rerank" and searcher.search_type == SEARCHERS[kind].search_type
    assert searcher.takes_reasoning and searcher.reranker is None and args.model == "gpt-4.1"
    assert searcher.rerank_stage.depth == DEPTH
    ref = world["refs"][kind]
    want = ref.search_batch([QUERY], K)[0]
    hits = json.loads(harness.BcpSearchToolHandler(searcher, k=args.k)._search(QUERY, "q0"))
    assert _pairs(hits) == want  # exact: the same model files, the same float16 document vectors
    assert json.loads(harness.BcpSearchToolHandler(searcher, k=args.k, with_query_id=False)._search(QUERY)) == hits
    full, first = searcher.search_batch([QUERY], DEPTH)[0], searcher.first.search_batch([QUERY], DEPTH)[0]
    assert full == ref.search_batch([QUERY], DEPTH)[0]
    assert [s for _, s in full] == sorted((s for _, s in full), reverse=True)  # by MaxSim
    assert sorted(d for d, _ in full) == sorted(d for d, _ in first)  # a permutation of the first stage's top
    assert searcher.search(QUERY, K, REASON) == ref.search(QUERY, K, REASON)
    doc = json.loads(harness.BcpSearchToolHandler(searcher)._get_document(hits[0]["docid"]))
    assert doc == searcher.first.get_document(hits[0]["docid"])
    generation, _ = harness.bcp_build(argv, None, reranker_generation=True)  # SearcherClass(reranker, args)
    assert isinstance(generation, RerankedSearcher) and generation.reranker is None
    assert _pairs(generation.search(QUERY, "q1", K)) == want


def test_agentir_store_rerank_through_a_reranked_searcher(world, harness):
    parser = harness.agentir_parser()
    argv = ["--searcher-type", "bm25", *world["argv"]["bm25"], *world["rerank"], "--k", str(K)]
    temp, _ = parser.parse_known_args(argv)
    searcher_class = SEARCHERS[temp.searcher_type]
    searcher_class.parse_args(parser)
    searcher = searcher_class(parser.parse_args(argv))
    ref = world["refs"]["bm25"]
    wrapped = searcher.search(QUERY, K, store_rerank=True, original_query=QUERY, oracle_question="q")
    assert wrapped == {"results": ref.search(QUERY, K), "rerank_output": None}
    for aware, thinking in [(False, None), (True, REASON)]:
        turn = harness.AgentIRSearchTool(searcher, k=K, reasoning_aware=aware).handle_single(QUERY, thinking)
        sent = harness.format_reasoning_query(QUERY, thinking) if aware else QUERY
        assert turn["docids"] == [d for d, _ in ref.search_batch([harness_query(sent)], K)[0]] and turn["rerank_output"] is None
        assert [r["score"] for r in turn["results"]] == [s for _, s in ref.search_batch([harness_query(sent)], K)[0]]


# --- hopscotch serve: REST and MCP ----------------------------------------------------------------------------

def _serve_args(world, *extra):
    from hopscotch.retriever.cli import build_parser

    return build_parser().parse_args(["serve", *world["argv"]["bm25"], *world["rerank"], "--port", "0", *extra])


def test_serve_rest_answers_with_the_reranked_searcher(world, monkeypatch):
    import requests

    from hopscotch.retriever.commands.serve import build_server, resolve_token
    from hopscotch.retriever.serving.server import serve_in_thread

    monkeypatch.delenv("HOPSCOTCH_SERVE_TOKEN", raising=False)
    args = _serve_args(world, "--name", "wiki")
    args.token = resolve_token(args)
    server = build_server(args)  # as hopscotch serve builds it
    serve_in_thread(server)
    ref = world["refs"]["bm25"]
    try:
        assert server.service.searchers["wiki"].name == "bm25+rerank"
        url = f"{server.url}/v1/wiki/search"
        body = requests.get(url, params={"query": QUERY, "hits": 5}, timeout=60).json()
        assert [(c["docid"], c["score"]) for c in body["candidates"]] == ref.search_batch([QUERY], 5)[0]
        assert all(c["doc"] for c in body["candidates"]) and body["query"] == {"text": QUERY}
        body = requests.get(url, params={"query": QUERY, "hits": 5, "reason": REASON}, timeout=60).json()
        # the first stage (reasoning-aware BM25) expands with the reason, the reranker encodes it
        assert body["query"]["reason_used"] is True
        assert body["query"]["query_input"] == f"{ref.first.reasoning_input}; rerank reasoning"
        assert ref.first.reasoning_input.startswith("bm25 query x")
        assert [(c["docid"], c["score"]) for c in body["candidates"]] == ref.search_batch(queries_of([QUERY], [REASON], True), 5)[0]
    finally:
        server.shutdown_and_close()


def test_serve_mcp_searches_with_the_reranked_searcher(world):
    pytest.importorskip("mcp")
    import anyio
    from mcp import Client

    from hopscotch.retriever.searchers import searcher_from_args
    from hopscotch.retriever.serving.mcp_server import MCPOptions, build_mcp_server

    args = _serve_args(world, "--mcp", "--k", str(K), "--snippet-max-tokens", "-1")
    searcher = searcher_from_args(args, local_only=True)  # as run_mcp builds it
    assert searcher.name == "bm25+rerank"
    server = build_mcp_server(searcher, MCPOptions(k=args.k, snippet_max_tokens=args.snippet_max_tokens))

    async def main():
        async with Client(server) as client:
            tools = (await client.list_tools()).tools
            calls = [await client.call_tool("search", {"query": QUERY, **extra}) for extra in ({}, {"reason": REASON})]
            return tools, [json.loads(c.content[0].text) for c in calls]

    tools, (plain, reasoned) = anyio.run(main)
    assert "this retriever reads it together with the query" in tools[0].description
    ref = world["refs"]["bm25"]
    for got, reasoning in [(plain, None), (reasoned, REASON)]:
        want = ref.search(QUERY, K, reasoning=reasoning)
        assert got == [{"docid": h["docid"], "score": h["score"], "snippet": h["text"]} for h in want]
    assert plain != reasoned


# --- hopscotch replay and a remote first stage ----------------------------------------------------------------

def test_replay_accepts_rerank_model(cli, world, small_world, tmp_path):
    out = tmp_path / "replay"
    code, _, err = cli("replay", "--runs", small_world / "traces.jsonl", "--qrels", small_world / "qrels.tsv",
                       "--searcher", "bm25", *world["argv"]["bm25"], *world["rerank"], "--k", 5, "--no-plot",
                       "--out", out)
    assert code == 0, err
    result = json.loads((out / "replay.json").read_text())
    assert result["retriever"]["searcher"] == "bm25+rerank" and result["manifest"]["searcher"] == "bm25+rerank"
    assert result["retriever"]["flags"]["rerank_model"] == str(world["mv"])
    assert result["retriever"]["flags"]["rerank_depth"] == DEPTH
    counts, queries = {}, {}
    for line in (small_world / "traces.jsonl").read_text().splitlines():  # call Q#n: the n-th step of Q
        step = json.loads(line)
        counts[step["question_id"]] = counts.get(step["question_id"], 0) + 1
        queries[f"{step['question_id']}#{counts[step['question_id']]}"] = step["query"].strip()
    run = read_run(out / "calls.trec")
    assert set(run) == set(queries)
    ref = world["refs"]["bm25"]
    for qid in list(run)[:6]:
        want = ref.search_batch([queries[qid]], 5)[0]
        assert list(run[qid]) == [d for d, _ in want]
        assert list(run[qid].values()) == pytest.approx([s for _, s in want], abs=1e-4)


def test_a_remote_first_stage_is_reranked_with_its_documents(world):
    from hopscotch.retriever.searchers import add_searcher_arguments, searcher_from_args
    from hopscotch.retriever.serving.server import make_server, serve_in_thread

    server = make_server({"wiki": world["refs"]["bm25"].first}, port=0)  # a plain BM25 service
    serve_in_thread(server)
    try:
        parser = argparse.ArgumentParser()
        add_searcher_arguments(parser)
        searcher = searcher_from_args(parser.parse_args(["--url", server.url, "--name", "wiki", *world["rerank"]]))
        assert searcher.name == "remote+rerank" and not searcher.local and searcher.has_documents
        ref = world["refs"]["bm25"]
        assert searcher.search_batch([QUERY], K) == ref.search_batch([QUERY], K)
        assert searcher.search(QUERY, K) == ref.search(QUERY, K)
    finally:
        server.shutdown_and_close()


# --- errors: orphan rerank flags, first stages without documents, unused backend flags -------------------------

def test_rerank_depth_without_rerank_model_is_an_error_everywhere(cli, world, small_world, tmp_path, harness):
    orphan = ["--rerank-depth", "5"]
    bm25 = world["argv"]["bm25"]
    for argv in (["search", "--queries", small_world / "queries.jsonl", "--out", tmp_path / "r.trec", *bm25],
                 ["serve", *bm25, "--port", "0"],
                 ["serve", "--mcp", *bm25, "--snippet-max-tokens", "-1"],
                 ["replay", "--runs", small_world / "traces.jsonl", "--searcher", "bm25", *bm25, "--no-plot",
                  "--out", tmp_path / "replay"]):
        code, out, err = cli(*argv, *orphan)
        assert code == 2 and "--rerank-depth needs --rerank-model" in err and len(err.strip().splitlines()) == 1, err
    with pytest.raises(UsageError, match="--rerank-depth needs --rerank-model"):
        harness.bcp_build(["--searcher-type", "hybrid", *world["argv"]["hybrid"], *orphan])
    with pytest.raises(UsageError, match="--rerank-cache needs --rerank-model"):
        build_searcher("bm25", bm25=world["bm25"], corpus=world["corpus"], rerank_cache=str(tmp_path / "c"))


def test_reranking_a_first_stage_without_documents_is_refused(world, harness):
    with pytest.raises(UsageError, match="needs each candidate's text, and the bm25 searcher has no documents"):
        harness.bcp_build(["--searcher-type", "bm25", "--bm25", str(world["bm25"]), *world["rerank"]])
    with pytest.raises(UsageError, match="has no documents"):
        build_searcher("bm25", bm25=world["bm25"], rerank_model=str(world["mv"]))


@pytest.mark.parametrize("kind, argv", [
    ("bm25", ["--bm25", "b"]), ("dense", ["--index", "i"]), ("hybrid", ["--bm25", "b", "--index", "i"]),
    ("remote", ["--url", "http://127.0.0.1:1"]),
])
def test_rerank_flags_are_every_backends_own(kind, argv):
    from hopscotch.retriever.searchers import add_searcher_arguments
    from hopscotch.retriever.searchers.adapter.build import refuse_unused_flags

    parser = argparse.ArgumentParser()
    add_searcher_arguments(parser)
    args = parser.parse_args([*argv, "--rerank-model", "m", "--rerank-depth", "3", "--rerank-cache", "c",
                              "--rerank-late-fusion", "0.5", "--rerank-windows", "2"])
    refuse_unused_flags(SEARCHERS[kind], args)  # accepted: no UsageError
    strings = [s for a in parser._actions for s in a.option_strings]
    assert strings.count("--rerank-model") == 1 and strings.count("--rerank-depth") == 1


def test_unused_backend_flags_are_still_refused(cli, world, small_world, tmp_path):
    common = ["search", "--queries", small_world / "queries.jsonl", "--out", tmp_path / "r.trec",
              *world["argv"]["bm25"]]
    for extra in (["--alpha", "0.5"], ["--alpha", "0.5", *world["rerank"]]):
        code, _, err = cli(*common, *extra)
        assert code == 2 and "--alpha does nothing for the bm25 searcher" in err, err
    code, _, err = cli("serve", *world["argv"]["bm25"], "--nprobe", "4", *world["rerank"], "--port", "0")
    assert code == 2 and "--nprobe does nothing for the bm25 searcher" in err, err
    assert not (tmp_path / "r.trec").exists()


def test_each_searcher_names_its_vector_stage_and_its_rerank_stage(world):
    """What ``hopscotch search`` and ``replay`` report (query input, the index's reasoning note, the reranking) comes
    from ``vector_stage`` and ``rerank_stage``, whatever wraps what."""
    bm25, hybrid = world["refs"]["bm25"].first, world["refs"]["hybrid"].first
    dense = build_searcher("dense", index=world["index"])
    assert dense.vector_stage is dense and hybrid.vector_stage is hybrid.dense and bm25.vector_stage is None
    assert world["refs"]["hybrid"].vector_stage is hybrid.dense and world["refs"]["bm25"].vector_stage is None
    assert dense.rerank_stage is None and hybrid.rerank_stage is None
    assert world["refs"]["bm25"].rerank_stage.depth == DEPTH
    assert world["refs"]["bm25"].first_stage is bm25 and dense.first_stage is dense
