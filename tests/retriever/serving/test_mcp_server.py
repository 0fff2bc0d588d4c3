"""``hopscotch serve --mcp``: the tools ``search`` and ``get_document`` called through the MCP SDK's own client
(in-process, over stdio from a ``hopscotch serve`` subprocess, and over streamable HTTP with a token)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import anyio
import pytest
from mcp import Client, StdioServerParameters

from hopscotch.retriever.searchers import build_searcher
from hopscotch.retriever.serving.mcp_server import MCPOptions, build_mcp_server, cut_snippet, load_snippet_tokenizer

QUERIES = ["shipbuilding company headquarters", "Which city is the harbour in?", "founded by an engineer"]
TOKEN = "mcp-s3cret"


@pytest.fixture(scope="module")
def bm25_world(small_world, tmp_path_factory):
    """A BM25 index of the small world and a BM25 searcher with the corpus for document text."""
    from hopscotch.retriever.index.bm25 import BM25Index
    from hopscotch.retriever.io.corpus import read_corpus

    out = tmp_path_factory.mktemp("mcp") / "bm25"
    BM25Index.build(read_corpus(small_world / "corpus.jsonl")).save(out)
    corpus = small_world / "corpus.jsonl"
    return {"bm25": out, "corpus": corpus, "searcher": build_searcher("bm25", bm25=out, corpus=corpus),
            # BM25 with its reasoning expansion off (--bm25-reasoning query): a searcher that ignores a reason
            "plain": build_searcher("bm25", bm25=out, corpus=corpus, bm25_reasoning="query")}


def with_client(server, work):
    """Run ``await work(client)`` with an SDK client connected to ``server`` (an MCPServer or a transport)."""
    async def main():
        async with Client(server) as client:
            return await work(client)

    return anyio.run(main)


def tool_json(result):
    """The JSON an agent reads in a tool result (its one text block)."""
    [block] = result.content
    return json.loads(block.text)


def expected_hits(searcher, query, k, tokenizer=None, max_tokens=-1, reasoning=None):
    return [{"docid": h["docid"], "score": h["score"], "snippet": cut_snippet(h["text"], tokenizer, max_tokens)}
            for h in searcher.search(query, k, reasoning=reasoning)]


def test_tools_are_listed_as_browsecomp_plus_registers_them(bm25_world):
    server = build_mcp_server(bm25_world["searcher"], MCPOptions(k=4, snippet_max_tokens=-1))
    tools = {t.name: t for t in with_client(server, lambda c: c.list_tools()).tools}
    assert set(tools) == {"search", "get_document"}
    search = tools["search"]
    assert search.description.startswith(bm25_world["searcher"].search_description(4)) and "top-4" in search.description
    assert "this retriever reads it together with the query" in search.description   # reasoning-aware BM25
    assert search.input_schema["required"] == ["query"] and set(search.input_schema["properties"]) == {"query",
                                                                                                       "reason"}
    plain = build_mcp_server(bm25_world["plain"], MCPOptions(k=4, snippet_max_tokens=-1))
    [tool] = [t for t in with_client(plain, lambda c: c.list_tools()).tools if t.name == "search"]
    assert "'reason' argument is accepted but ignored" in tool.description
    assert tools["get_document"].input_schema["required"] == ["docid"]
    only = build_mcp_server(bm25_world["searcher"], MCPOptions(snippet_max_tokens=-1, get_document=False))
    assert [t.name for t in with_client(only, lambda c: c.list_tools()).tools] == ["search"]


def test_search_and_get_document_match_the_searcher(bm25_world):
    searcher = bm25_world["searcher"]
    server = build_mcp_server(searcher, MCPOptions(k=4, snippet_max_tokens=-1))

    async def work(client):
        hits = [await client.call_tool("search", {"query": q}) for q in QUERIES]
        top = tool_json(hits[0])[0]["docid"]
        return hits, await client.call_tool("get_document", {"docid": top}), await client.call_tool(
            "get_document", {"docid": "no-such-doc"})

    hits, doc, missing = with_client(server, work)
    for query, result in zip(QUERIES, hits):
        want = expected_hits(searcher, query, 4)
        assert not result.is_error and tool_json(result) == want == result.structured_content["result"]
        assert len(want) == 4 and all(h["snippet"].startswith(searcher.get_document(h["docid"])["title"]) for h in want)
    top = expected_hits(searcher, QUERIES[0], 1)[0]["docid"]
    assert tool_json(doc) == searcher.get_document(top) == doc.structured_content and not doc.is_error
    assert missing.is_error and tool_json(missing) == {"error": "Document with docid 'no-such-doc' not found"}


def test_snippets_are_cut_to_tokens_of_the_snippet_tokenizer(bm25_world):
    searcher = bm25_world["searcher"]
    tok = load_snippet_tokenizer("minilm")
    server = build_mcp_server(searcher, MCPOptions(k=3, snippet_max_tokens=7), tokenizer=tok)
    got = tool_json(with_client(server, lambda c: c.call_tool("search", {"query": QUERIES[0]})))
    assert got == expected_hits(searcher, QUERIES[0], 3, tok, 7)
    for hit, full in zip(got, searcher.search(QUERIES[0], 3)):
        tokens = tok.encode(full["text"], add_special_tokens=False)
        assert len(tokens) > 7 and hit["snippet"] == tok.decode(tokens[:7], skip_special_tokens=True)
    assert cut_snippet("short text", tok, 7) == "short text" and cut_snippet("a b c d e f g h i", None, 3) == (
        "a b c d e f g h i")


def test_get_document_takes_either_climbmix_spelling(tmp_path):
    from hopscotch.retriever.index.bm25 import BM25Index
    from hopscotch.retriever.io.corpus import read_corpus

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"_id": "shard_00045_6622", "title": "Harbour", "text": "a harbour city"}) + "\n"
                      + json.dumps({"_id": "shard_00045_10", "title": "Mill", "text": "a paper mill"}) + "\n")
    BM25Index.build(read_corpus(corpus)).save(tmp_path / "bm25")
    server = build_mcp_server(build_searcher("bm25", bm25=tmp_path / "bm25", corpus=corpus),
                              MCPOptions(k=1, snippet_max_tokens=-1))

    async def work(client):
        return [tool_json(await client.call_tool("get_document", {"docid": d}))
                for d in ("shard_00045_06622", "shard_00045_6622")]

    padded, plain = with_client(server, work)
    assert padded == plain == {"docid": "shard_00045_6622", "title": "Harbour", "text": "a harbour city"}


def test_reason_expands_a_bm25_query(bm25_world):
    searcher = bm25_world["searcher"]
    server = build_mcp_server(searcher, MCPOptions(k=5, snippet_max_tokens=-1))
    reason = "the harbour city of the shipbuilder, not its founder"

    async def work(client):
        return [tool_json(await client.call_tool("search", {"query": QUERIES[1], **extra}))
                for extra in ({}, {"reason": reason})]

    plain, reasoned = with_client(server, work)
    assert plain == expected_hits(searcher, QUERIES[1], 5)
    assert reasoned == expected_hits(searcher, QUERIES[1], 5, reasoning=reason) != plain


def test_reason_is_ignored_by_a_model_that_does_not_read_it(bm25_world, caplog):
    searcher = bm25_world["plain"]
    server = build_mcp_server(searcher, MCPOptions(k=5, snippet_max_tokens=-1))

    async def work(client):
        return [tool_json(await client.call_tool("search", {"query": QUERIES[1], **extra}))
                for extra in ({}, {"reason": "the harbour city of the shipbuilder, not its founder"})]

    with caplog.at_level(logging.INFO, logger="hopscotch.mcp"):
        plain, reasoned = with_client(server, work)
    assert plain == reasoned == expected_hits(searcher, QUERIES[1], 5)
    assert any("'reason' ignored" in r.getMessage() for r in caplog.records)


def test_reason_reaches_a_reasoning_aware_dense_model(small_world_index):
    dense = build_searcher("dense", index=small_world_index, query_input="reasoning")  # told to read reasoning
    assert dense.takes_reasoning
    server = build_mcp_server(dense, MCPOptions(k=5, snippet_max_tokens=-1))
    reason = "I already know the founder; now I need the city of the shipyard."

    async def work(client):
        tools = await client.list_tools()
        return (tools.tools[0].description, tool_json(await client.call_tool("search", {"query": QUERIES[0]})),
                tool_json(await client.call_tool("search", {"query": QUERIES[0], "reason": reason})))

    description, plain, reasoned = with_client(server, work)
    assert "this retriever reads it together with the query" in description
    assert plain == expected_hits(dense, QUERIES[0], 5)
    assert reasoned == expected_hits(dense, QUERIES[0], 5, reasoning=reason) != plain


def test_serve_mcp_over_stdio(bm25_world):
    args = ["-m", "hopscotch.retriever.cli", "serve", "--mcp", "--transport", "stdio", "--bm25", str(bm25_world["bm25"]),
            "--corpus", str(bm25_world["corpus"]), "--k", "3", "--snippet-max-tokens", "-1"]
    params = StdioServerParameters(command=sys.executable, args=args, env={**os.environ, "OMP_NUM_THREADS": "1"})

    async def work(client):
        names = [t.name for t in (await client.list_tools()).tools]
        return names, tool_json(await client.call_tool("search", {"query": QUERIES[0]}))

    names, hits = with_client(params, work)
    assert names == ["search", "get_document"] and hits == expected_hits(bm25_world["searcher"], QUERIES[0], 3)


@pytest.mark.parametrize("transport", ["sse", "streamable-http"])
def test_serve_mcp_over_http_needs_the_token(bm25_world, transport):
    import httpx2
    from mcp.client.sse import sse_client
    from mcp.client.streamable_http import streamable_http_client

    proc = subprocess.Popen([sys.executable, "-m", "hopscotch.retriever.cli", "serve", "--transport", transport,
                             "--port", "0", "--token", TOKEN, "--bm25", str(bm25_world["bm25"]), "--corpus",
                             str(bm25_world["corpus"]), "--k", "2", "--snippet-max-tokens", "-1", "--no-get-document"],
                            env={**os.environ, "OMP_NUM_THREADS": "1"}, stderr=subprocess.PIPE, text=True)
    try:
        deadline, line = time.monotonic() + 1800, ""
        while "MCP server" not in line and time.monotonic() < deadline:
            line = proc.stderr.readline()
            assert line or proc.poll() is None, "serve exited"
        assert f"tools: search, transport {transport} at http://127.0.0.1:" in line and "(token required)" in line
        url = line.split(" at ")[1].split()[0]
        assert url.endswith("/mcp")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url, timeout=10)
        assert refused.value.code == 401

        async def work():
            if transport == "sse":  # a bearer token on every request
                async with Client(sse_client(url, headers={"Authorization": f"Bearer {TOKEN}"})) as client:
                    return tool_json(await client.call_tool("search", {"query": QUERIES[2]}))
            async with httpx2.AsyncClient(headers={"x-api-key": TOKEN}) as http, \
                    Client(streamable_http_client(url, http_client=http)) as client:
                return tool_json(await client.call_tool("search", {"query": QUERIES[2]}))

        assert anyio.run(work) == expected_hits(bm25_world["searcher"], QUERIES[2], 2)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_serve_mcp_errors_are_one_line_exit_2(cli, bm25_world, tmp_path):
    common = ("serve", "--mcp", "--bm25", bm25_world["bm25"], "--corpus", bm25_world["corpus"])
    for argv, needle in [
        ((*common, "--snippet-tokenizer", tmp_path / "missing"), "cannot load the snippet tokenizer"),
        (("serve", "--transport", "stdio", "--snippet-max-tokens", "-1"), "give --bm25 DIR, --index DIR"),
        ((*common, "--snippet-max-tokens", "-1", "--k", "0"), "--k 0: give at least 1"),
        ((*common, "--snippet-max-tokens", "-1", "--port", "70000"), "--port 70000: not a TCP port"),
    ]:
        code, out, err = cli(*argv)
        assert code == 2 and needle in err and len(err.strip().splitlines()) == 1 and not out, err


def test_default_snippet_tokenizer_falls_back_to_the_bundled_one_offline(tmp_path, monkeypatch, capsys):
    from hopscotch.retriever.serving.mcp_server import default_or_named_tokenizer

    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty_hf_home"))  # BrowseComp-Plus's Qwen3 tokenizer not cached
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tok = default_or_named_tokenizer(None)
    assert tok.encode("harbour", add_special_tokens=False) == \
        load_snippet_tokenizer("minilm").encode("harbour", add_special_tokens=False)
    assert "not in the local Hugging Face cache" in capsys.readouterr().err
