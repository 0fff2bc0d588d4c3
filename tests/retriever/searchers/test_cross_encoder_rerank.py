"""``--rerank-model`` with a cross-encoder folder (a tiny random one): the reranked list is the first stage's top
``depth`` ordered by the cross-encoder's own logits (reasoning-aware queries in its template, the reasoning cut as it
trained), interpolated with the first stage by default, the first stage's next candidates below them up to ``k``;
and it works on every path a searcher is built from flags: ``hopscotch search`` (bm25, dense, hybrid), REST and MCP
(``serve``), ``replay``, BrowseComp-Plus's ``SearcherClass(args)`` and AgentIR's ``search(..., store_rerank=True)``,
each equal to a :class:`RerankedSearcher` built by hand. The MaxSim-only flags are refused for it."""

from __future__ import annotations

import json

import pytest

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.runs import read_run
from hopscotch.retriever.searchers.harness import harness_query
from hopscotch.retriever.searchers import SEARCHERS, build_searcher
from hopscotch.retriever.io.queries import queries_of

K, DEPTH = 5, 8
QUERY = "shipbuilding company headquarters city"
REASON = "The company builds ships; I need the city of its headquarters, not its founder."


@pytest.fixture(scope="module")
def world(small_world, small_world_index, tiny_cross_encoder_dir, tmp_path_factory):
    from hopscotch.retriever.index.bm25 import BM25Index
    from hopscotch.retriever.io.corpus import read_corpus
    from hopscotch.retriever.searchers.cross_encoder_rerank import CrossEncoderReranker
    from hopscotch.retriever.searchers.rerank import RerankedSearcher

    root = tmp_path_factory.mktemp("ce_rerank")
    corpus = small_world / "corpus.jsonl"
    BM25Index.build(read_corpus(corpus), show_progress=False).save(root / "bm25")
    rows = [json.loads(line) for line in (small_world / "queries.jsonl").read_text().splitlines()][:6]
    for i, row in enumerate(rows):
        if i % 2 == 0:
            row["reasoning"] = f"I should look up facts about {row['text'].split()[-1]} first, then the rest."
    (root / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    reranker = CrossEncoderReranker(str(tiny_cross_encoder_dir), depth=DEPTH)
    first = {"bm25": build_searcher("bm25", bm25=root / "bm25", corpus=corpus),
             "dense": build_searcher("dense", index=small_world_index),
             "hybrid": build_searcher("hybrid", bm25=root / "bm25", index=small_world_index)}  # --depth's default
    argv = {"bm25": ["--bm25", str(root / "bm25"), "--corpus", str(corpus)], "dense": ["--index", str(small_world_index)],
            "hybrid": ["--bm25", str(root / "bm25"), "--index", str(small_world_index)]}
    # BrowseComp-Plus's and AgentIR's parsers leave the hybrid's --depth at the searcher's own default, as search does
    first["hybrid_harness"] = build_searcher("hybrid", bm25=root / "bm25", index=small_world_index)
    return {"root": root, "rows": rows, "queries": root / "queries.jsonl", "ce": tiny_cross_encoder_dir,
            "refs": {kind: RerankedSearcher(s, reranker) for kind, s in first.items()}, "argv": argv,
            "rerank": ["--rerank-model", str(tiny_cross_encoder_dir), "--rerank-depth", str(DEPTH)]}


def _pairs(hits):
    return [(h["docid"], h["score"]) for h in hits]


def _same(got, want) -> None:
    """The same docids in the same order, and the same scores (up to float noise: batches of other pairs)."""
    assert [d for d, _ in got] == [d for d, _ in want]
    assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-5)


def test_the_order_is_the_cross_encoders_and_the_rest_follows_the_first_stage(world):
    from hopscotch.retriever.searchers.cross_encoder_rerank import CROSS_ENCODER_FIRST_WEIGHT, CrossEncoderReranker
    from hopscotch.retriever.searchers.rerank import RerankedSearcher

    ref = world["refs"]["bm25"]
    stage = ref.rerank_stage
    assert stage.kind == "cross_encoder" and stage.first_weight == CROSS_ENCODER_FIRST_WEIGHT
    first = ref.first
    pure = RerankedSearcher(first, CrossEncoderReranker(stage.model, depth=DEPTH, first_weight=0.0))
    for reasoning in (None, REASON):
        aware = reasoning is not None
        got = pure.search_batch(queries_of([QUERY], [reasoning], aware), 12)[0]
        cands = first.search_batch(queries_of([QUERY], [reasoning], aware), 12)[0]
        top = got[:DEPTH]
        assert sorted(d for d, _ in top) == sorted(d for d, _ in cands[:DEPTH])  # the first stage's top depth
        [side] = stage.model.format_queries([QUERY], [reasoning], reasoning_aware=aware)
        if aware:  # the reasoning's tail, cut from the left to the model's 24-token query side
            assert side.startswith("Reasoning: ") and side.endswith(f"\n\nQuery: {QUERY}")
            assert REASON.endswith(side[len("Reasoning: "):-len(f"\n\nQuery: {QUERY}")]) and "Empty" not in side
        else:
            assert side == QUERY
        docs = [first.get_document(d) for d, _ in top]
        want = stage.model.score([side] * len(docs), [f"{d.get('title')} {d['text']}" if d.get("title") else d["text"]
                                                      for d in docs])
        assert [s for _, s in top] == pytest.approx(want, abs=1e-6)
        assert [s for _, s in top] == sorted(want, reverse=True)
        assert got[DEPTH:] == [(d, top[-1][1] - j - 1) for j, (d, _) in enumerate(cands[DEPTH:12])]
        assert ref.search_batch(queries_of([QUERY], [reasoning], aware), 3)[0] == ref.search_batch(queries_of([QUERY], [reasoning], aware), 12)[0][:3]
    plain, reasoned = (pure.search_batch(queries_of([QUERY], [r], r is not None), DEPTH)[0] for r in (None, REASON))
    assert plain != reasoned  # the reasoning reaches the cross-encoder (and the first stage)


@pytest.mark.parametrize("kind", ["bm25", "dense", "hybrid"])
def test_hopscotch_search_reranks_with_a_cross_encoder(cli, world, kind, tmp_path):
    out = tmp_path / "run.trec"
    code, stdout, err = cli("search", "--queries", world["queries"], *world["argv"][kind], *world["rerank"],
                            "--reasoning", "--k", K, "--out", out)
    assert code == 0, err
    assert f"reranking the top {K} by the cross-encoder with {world['ce']}" in err and f"({kind}+rerank)" in stdout
    run = read_run(out)
    ref = world["refs"][kind]
    for row in world["rows"]:
        want = ref.search_batch(queries_of([row["text"]], [row.get("reasoning")], True), K)[0]
        assert list(run[row["_id"]]) == [d for d, _ in want]
        assert list(run[row["_id"]].values()) == pytest.approx([s for _, s in want], abs=1e-4)
    code, _, err = cli("search", "--queries", world["queries"], *world["argv"][kind], *world["rerank"],
                       "--reasoning", "--k", 12, "--out", tmp_path / "wide.trec")
    assert code == 0 and f"the top {DEPTH} are reranked by the cross-encoder, the first stage's next 4" in err


@pytest.mark.parametrize("flag, value", [("--rerank-cache", "c"), ("--rerank-query-mix", "0.5"),
                                         ("--rerank-windows", "2")])
def test_the_maxsim_only_flags_are_refused_for_a_cross_encoder(cli, world, tmp_path, flag, value):
    code, _, err = cli("search", "--queries", world["queries"], *world["argv"]["bm25"], *world["rerank"], flag, value,
                       "--reasoning", "--out", tmp_path / "r.trec")
    assert code == 2 and f"{flag} applies to a multi-vector reranker" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("kind", ["bm25", "hybrid"])
def test_browsecomp_plus_and_agentir_searchers_rerank_with_it(world, kind, harness):
    from hopscotch.retriever.searchers.rerank import RerankedSearcher

    argv = ["--searcher-type", kind, *world["argv"][kind], *world["rerank"], "--k", str(K)]
    searcher, args = harness.bcp_build(argv)
    assert isinstance(searcher, RerankedSearcher) and searcher.rerank_stage.kind == "cross_encoder"
    ref = world["refs"]["hybrid_harness" if kind == "hybrid" else kind]
    hits = json.loads(harness.BcpSearchToolHandler(searcher, k=args.k)._search(QUERY, "q0"))
    _same(_pairs(hits), ref.search_batch([QUERY], K)[0])
    assert searcher.search(QUERY, K, REASON) == ref.search(QUERY, K, REASON)
    parser = harness.agentir_parser()
    temp, _ = parser.parse_known_args(argv)
    SEARCHERS[temp.searcher_type].parse_args(parser)
    agentir = SEARCHERS[temp.searcher_type](parser.parse_args(argv))
    turn = harness.AgentIRSearchTool(agentir, k=K, reasoning_aware=True).handle_single(QUERY, REASON)
    sent = harness.format_reasoning_query(QUERY, REASON)  # read back at the harness edge, for the first stage and the reranker alike
    want = ref.search_batch([harness_query(sent)], K)[0]
    assert turn["docids"] == [d for d, _ in want] and turn["rerank_output"] is None
    assert agentir.search(QUERY, K, store_rerank=True)["results"] == ref.search(QUERY, K)


def test_serve_rest_and_mcp_answer_with_the_reranked_searcher(world, monkeypatch):
    import requests

    from hopscotch.retriever.cli import build_parser
    from hopscotch.retriever.commands.serve import build_server, resolve_token
    from hopscotch.retriever.serving.server import serve_in_thread

    monkeypatch.delenv("HOPSCOTCH_SERVE_TOKEN", raising=False)
    args = build_parser().parse_args(["serve", *world["argv"]["bm25"], *world["rerank"], "--port", "0",
                                      "--name", "wiki"])
    args.token = resolve_token(args)
    server = build_server(args)
    serve_in_thread(server)
    ref = world["refs"]["bm25"]
    try:
        url = f"{server.url}/v1/wiki/search"
        body = requests.get(url, params={"query": QUERY, "hits": K, "reason": REASON}, timeout=60).json()
        assert body["query"]["reason_used"] is True and body["query"]["query_input"].endswith("; rerank reasoning")
        _same([(c["docid"], c["score"]) for c in body["candidates"]],
              ref.search_batch(queries_of([QUERY], [REASON], True), K)[0])
    finally:
        server.shutdown_and_close()
    pytest.importorskip("mcp")
    import anyio
    from mcp import Client

    from hopscotch.retriever.searchers import searcher_from_args
    from hopscotch.retriever.serving.mcp_server import MCPOptions, build_mcp_server

    args = build_parser().parse_args(["serve", "--mcp", *world["argv"]["bm25"], *world["rerank"], "--k", str(K),
                                      "--snippet-max-tokens", "-1"])
    mcp = build_mcp_server(searcher_from_args(args, local_only=True), MCPOptions(k=K, snippet_max_tokens=-1))

    async def main():
        async with Client(mcp) as client:
            call = await client.call_tool("search", {"query": QUERY, "reason": REASON})
            return json.loads(call.content[0].text)

    got = anyio.run(main)
    want = ref.search(QUERY, K, reasoning=REASON)
    assert got == [{"docid": h["docid"], "score": pytest.approx(h["score"]), "snippet": h["text"]} for h in want]


def test_replay_reranks_each_call_with_it(cli, world, small_world, tmp_path):
    out = tmp_path / "replay"
    code, _, err = cli("replay", "--runs", small_world / "traces.jsonl", "--qrels", small_world / "qrels.tsv",
                       "--searcher", "bm25", *world["argv"]["bm25"], *world["rerank"], "--k", K, "--no-plot",
                       "--out", out)
    assert code == 0, err
    result = json.loads((out / "replay.json").read_text())
    assert result["retriever"]["searcher"] == "bm25+rerank"
    assert result["retriever"]["flags"]["rerank_model"] == str(world["ce"])
    run = read_run(out / "calls.trec")
    counts, queries = {}, {}
    for line in (small_world / "traces.jsonl").read_text().splitlines():
        step = json.loads(line)
        counts[step["question_id"]] = counts.get(step["question_id"], 0) + 1
        queries[f"{step['question_id']}#{counts[step['question_id']]}"] = step["query"].strip()
    ref = world["refs"]["bm25"]
    for qid in list(run)[:4]:
        assert list(run[qid]) == [d for d, _ in ref.search_batch([queries[qid]], K)[0]]


def test_a_cross_encoder_needs_documents_and_is_no_dense_model(world, small_world_index):
    with pytest.raises(UsageError, match="has no documents"):
        build_searcher("bm25", bm25=world["root"] / "bm25", rerank_model=str(world["ce"]))
    with pytest.raises(UsageError, match="a cross-encoder .reranker. model, not an encoder"):
        build_searcher("dense", index=small_world_index, model=str(world["ce"]))
