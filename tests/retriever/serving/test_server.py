"""The REST service over a dense index, exercised over real HTTP: equality with ``hopscotch search``, ``reason``,
load, errors, the remote client, the ``serve`` command."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import requests

from hopscotch.retriever.io.queries import read_queries
from hopscotch.retriever.io.runs import read_run
from hopscotch.retriever.model.query_template import format_query
from hopscotch.retriever.io.queries import queries_of

TOKEN = "s3cret-token"


@pytest.fixture(scope="module")
def index_dir(small_world_index):
    return small_world_index


@pytest.fixture(scope="module")
def servers(index_dir):
    """An open server over a plain dense searcher, and one that requires a token over the same index and
    encoder told to read reasoning (``--query-input reasoning``)."""
    from hopscotch.retriever.searchers import build_searcher
    from hopscotch.retriever.serving.server import make_server, serve_in_thread

    searcher = build_searcher("dense", index=index_dir)
    aware = build_searcher("dense", index=index_dir, encoder=searcher.encoder, query_input="reasoning")
    assert not searcher.takes_reasoning and aware.takes_reasoning
    open_server = make_server({"default": searcher}, port=0)
    locked = make_server({"wiki": aware}, port=0, token=TOKEN)
    for s in (open_server, locked):
        serve_in_thread(s)
    yield {"open": open_server, "locked": locked, "searcher": searcher, "aware": aware}
    open_server.shutdown_and_close()
    locked.shutdown_and_close()


def get(server, path, token=None, **params):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return requests.get(server.url + path, params=params, headers=headers, timeout=30)


def test_results_equal_hopscotch_search(cli, servers, index_dir, small_world, tmp_path):
    run_path = tmp_path / "run.trec"
    code, _, err = cli("search", "--queries", small_world / "queries.jsonl", "--index", index_dir, "--k", 10,
                       "--out", run_path)
    assert code == 0, err
    run = read_run(run_path)
    for q in read_queries(small_world / "queries.jsonl"):
        resp = get(servers["open"], "/v1/default/search", query=q.text, hits=10)
        assert resp.status_code == 200
        body = resp.json()
        assert body["query"] == {"text": q.text}
        cands = body["candidates"]
        assert [c["rank"] for c in cands] == list(range(1, 11))
        assert {c["docid"] for c in cands} == set(run[q.qid])
        for c in cands:
            assert c["score"] == pytest.approx(run[q.qid][c["docid"]], abs=1e-5)
            doc = servers["searcher"].get_document(c["docid"])
            assert c["doc"] == f"{doc['title']}\n{doc['text']}"


def test_reason_is_encoded_only_by_a_reasoning_aware_service(servers):
    searcher, aware = servers["searcher"], servers["aware"]
    query, reason = "Which river flows through the capital?", "The capital is probably in the north."
    emb = searcher.encoder.encode_texts([format_query(query, reason), query])
    assert not np.allclose(emb[0], emb[1])  # the two texts differ, so the searches do
    want = aware.search_batch(queries_of([query], [reason], True), 5)[0]
    plain = searcher.search_batch([query], 5)[0]

    body = get(servers["locked"], "/v1/wiki/search", token=TOKEN, query=query, reason=reason, hits=5).json()
    assert body["query"] == {"text": query, "reason_used": True, "query_input": "reasoning"}
    assert [(c["docid"], c["score"]) for c in body["candidates"]] == [(d, pytest.approx(s, abs=1e-5)) for d, s in want]
    body = get(servers["locked"], "/v1/wiki/search", token=TOKEN, query=query, hits=5).json()
    assert body["query"] == {"text": query} and [c["docid"] for c in body["candidates"]] == [d for d, _ in plain]

    body = get(servers["open"], "/v1/default/search", query=query, reason=reason, hits=5).json()
    assert body["query"] == {"text": query, "reason_used": False}  # a plain model: logged, not encoded
    assert [c["docid"] for c in body["candidates"]] == [d for d, _ in plain]


def test_document_endpoint_and_truncation(servers, small_world):
    from hopscotch.retriever.io.corpus import read_corpus

    doc = next(iter(read_corpus(small_world / "corpus.jsonl")))
    body = get(servers["open"], f"/v1/default/doc/{doc.docid}").json()
    assert body == {"api": "v1", "index": "default", "docid": doc.docid, "doc": f"{doc.title}\n{doc.text}"}
    cands = get(servers["open"], "/v1/default/search", query=doc.text, hits=3, max_doc_length=12).json()["candidates"]
    assert len(cands) == 3
    for c in cands:
        d = servers["searcher"].get_document(c["docid"])
        assert c["doc"] == f"{d['title']}\n{d['text']}"[:12]
    assert get(servers["open"], "/health").json() == {"status": "ok"}
    assert get(servers["open"], "/v1/indexes").json()["indexes"] == ["default"]


@pytest.mark.parametrize("path,params,status,needle", [
    ("/v1/default/search", {}, 400, "'query' is required"),
    ("/v1/default/search", {"query": "  "}, 400, "'query' is required"),
    ("/v1/default/search", {"query": "x", "hits": "ten"}, 400, "'hits' must be an integer"),
    ("/v1/default/search", {"query": "x", "hits": "0"}, 400, "'hits' must be between 1 and 1000"),
    ("/v1/default/search", {"query": "x", "hits": "5000"}, 400, "'hits' must be between 1 and 1000"),
    ("/v1/default/search", {"query": "x", "max_doc_length": "-1"}, 400, "'max_doc_length' must be at least 0"),
    ("/v1/default/search", {"query": "x", "parse": "maybe"}, 400, "'parse' must be 'true' or 'false'"),
    ("/v1/nope/search", {"query": "x"}, 400, "Index 'nope' not available"),
    ("/v1/default/doc/not-a-doc", {}, 404, "Document not found: not-a-doc"),
    ("/v1/nope/doc/w000001", {}, 400, "not available"),
    ("/v2/whatever", {}, 404, "Expected route"),
])
def test_bad_requests_get_json_errors(servers, path, params, status, needle):
    resp = get(servers["open"], path, **params)
    assert resp.status_code == status
    assert resp.headers["Content-Type"].startswith("application/json")
    assert needle in resp.json()["error"]


def test_token_is_required_when_set(servers):
    locked = servers["locked"]
    for token in (None, "wrong"):
        resp = get(locked, "/v1/wiki/search", token=token, query="x")
        assert resp.status_code == 401 and "TOKEN" in resp.json()["error"]
    assert get(locked, "/v1/wiki/doc/w000001", token=None).status_code == 401
    resp = get(locked, "/v1/wiki/search", token=TOKEN, query="harbour city", hits=2)
    assert resp.status_code == 200 and len(resp.json()["candidates"]) == 2
    assert requests.post(locked.url + "/v1/wiki/search", headers={"Authorization": f"Bearer {TOKEN}"},
                         timeout=30).status_code == 405


def test_1000_requests_from_8_threads(servers, small_world):
    """Zero errors under concurrent load; concurrent queries are batched into shared encoder calls."""
    questions = [q.text for q in read_queries(small_world / "queries.jsonl")]
    server = servers["open"]
    batcher = server.service.batchers["default"]
    calls0, queries0 = batcher.stats["calls"], batcher.stats["queries"]
    latencies, errors, lock = [], [], threading.Lock()

    def worker(tid: int):
        session = requests.Session()
        for i in range(125):
            q = questions[(tid * 125 + i) % len(questions)]
            t0 = time.perf_counter()
            try:
                resp = session.get(server.url + "/v1/default/search", params={"query": q, "hits": 10}, timeout=60)
                ok = resp.status_code == 200 and len(resp.json()["candidates"]) == 10
            except requests.RequestException as exc:
                ok = False
                resp = exc
            with lock:
                latencies.append(time.perf_counter() - t0)
                if not ok:
                    errors.append(str(resp))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    assert errors == [] and len(latencies) == 1000
    calls, queries = batcher.stats["calls"] - calls0, batcher.stats["queries"] - queries0
    assert queries == 1000 and calls < queries and batcher.stats["max_batch"] > 1
    p50, p95 = np.percentile(latencies, [50, 95]) * 1000
    print(f"\n1000 requests / 8 threads: {1000 / wall:.0f} req/s, p50 {p50:.1f} ms, p95 {p95:.1f} ms, "
          f"{queries / calls:.1f} queries per encoder call")


def test_remote_searcher_matches_local(servers, small_world):
    from hopscotch.retriever.searchers import build_searcher
    from hopscotch.retriever.searchers.remote import RemoteSearchError

    local = servers["aware"]
    remote = build_searcher("remote", url=servers["locked"].url, name="wiki", token=TOKEN)
    queries = [q.text for q in read_queries(small_world / "queries.jsonl")][:6]
    got = remote.search_batch(queries, 7)
    want = local.search_batch(queries, 7)
    for g, w in zip(got, want):
        assert [d for d, _ in g] == [d for d, _ in w]
    aware = remote.search_batch(queries_of(queries[:2], ["some reasoning", None], True), 5)
    local_aware = local.search_batch(queries_of(queries[:2], ["some reasoning", None], True), 5)
    assert [[d for d, _ in r] for r in aware] == [[d for d, _ in r] for r in local_aware]
    hits = remote.search(queries[0], k=3)
    assert [h["docid"] for h in hits] == [d for d, _ in want[0][:3]] and all(h["snippet"] for h in hits)
    assert remote.get_document(hits[0]["docid"]) == local.get_document(hits[0]["docid"])
    assert remote.get_document("missing") is None
    with pytest.raises(RemoteSearchError, match="401"):
        build_searcher("remote", url=servers["locked"].url, name="wiki").search("x")


def test_hybrid_service_matches_local(servers, index_dir, small_world, tmp_path):
    from hopscotch.retriever.index.bm25 import BM25Index
    from hopscotch.retriever.io.corpus import read_corpus
    from hopscotch.retriever.searchers import build_searcher
    from hopscotch.retriever.serving.server import make_server, serve_in_thread

    BM25Index.build(read_corpus(small_world / "corpus.jsonl"), show_progress=False).save(tmp_path / "bm25")
    hybrid = build_searcher("hybrid", bm25=tmp_path / "bm25", index=index_dir, encoder=servers["searcher"].encoder)
    server = make_server({"hybrid": hybrid}, port=0)
    serve_in_thread(server)
    try:
        for q in list(read_queries(small_world / "queries.jsonl"))[:5]:
            body = get(server, "/v1/hybrid/search", query=q.text, hits=8).json()
            want = hybrid.search_batch([q.text], 8)[0]
            assert [(c["docid"], c["score"]) for c in body["candidates"]] == [
                (d, pytest.approx(sc, abs=1e-6)) for d, sc in want]
            assert all(isinstance(c["doc"], str) and c["doc"] for c in body["candidates"])
    finally:
        server.shutdown_and_close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_command_runs_a_server(index_dir, tmp_path):
    port = _free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "hopscotch.retriever.cli", "serve", "--index", str(index_dir), "--port",
                             str(port), "--name", "mini", "--token", TOKEN], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 1800
        while time.monotonic() < deadline:
            try:
                if requests.get(url + "/health", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=2).ok:
                    break
            except requests.ConnectionError:
                time.sleep(0.2)
            assert proc.poll() is None, proc.stderr.read()
        resp = requests.get(url + "/v1/mini/search", params={"query": "harbour", "hits": 3},
                            headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
        assert resp.status_code == 200 and len(resp.json()["candidates"]) == 3
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert f"on http://127.0.0.1:{port}/v1/mini/search (token required)" in proc.stderr.read()


def test_serve_refuses_a_busy_port(cli, index_dir):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        code, _, err = cli("serve", "--index", index_dir, "--port", s.getsockname()[1])
    assert code == 2 and "cannot listen" in err
