"""REST parity with Pyserini's ``server/rest`` and cmass's ClimbMix client, over a BM25 service of the small world:
Pyserini's response schemas for every route, our served OpenAPI document, ``doc`` as a string, both credential
headers, JSON for every method, the BM25-only ``serve`` command, IPv6 and the token sources."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
import yaml
from jsonschema import Draft202012Validator

from hopscotch.retriever.io.corpus import read_corpus
from hopscotch.retriever.io.queries import queries_of

TOKEN = "parity-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

# Pyserini's contract (castorini/pyserini, pyserini/server/rest/openapi.yaml, components.schemas), as data
PYSERINI = {"components": {"schemas": {
    "Query": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    "Candidate": {"type": "object", "required": ["docid", "score", "rank", "doc"], "properties": {
        "docid": {"type": "string"}, "score": {"type": "number"}, "rank": {"type": "integer", "minimum": 1},
        "doc": {"allOf": [{"$ref": "#/components/schemas/DocumentPayload"}]}}},
    "SearchResponse": {"type": "object", "required": ["api", "index", "query", "candidates"], "properties": {
        "api": {"type": "string"}, "index": {"type": "string"}, "query": {"$ref": "#/components/schemas/Query"},
        "candidates": {"type": "array", "items": {"$ref": "#/components/schemas/Candidate"}}}},
    "DocumentResponse": {"type": "object", "required": ["api", "index", "docid", "doc"], "properties": {
        "api": {"type": "string"}, "index": {"type": "string"}, "docid": {"type": "string"},
        "doc": {"allOf": [{"$ref": "#/components/schemas/DocumentPayload"}]}}},
    "DocumentPayload": {"oneOf": [{"type": "string"}, {"type": "object", "additionalProperties": True},
                                  {"type": "array", "items": {}}, {"type": "number"}, {"type": "boolean"}]},
    "ErrorResponse": {"type": "object", "properties": {"error": {"type": "string"}}, "required": ["error"]},
}}}


def check(spec: dict, schema: str, payload) -> None:
    """Validate ``payload`` against ``#/components/schemas/<schema>`` of an OpenAPI document."""
    validator = Draft202012Validator({"$ref": f"#/components/schemas/{schema}", "components": spec["components"]})
    errors = [e.message for e in validator.iter_errors(payload)]
    assert not errors, (schema, errors, payload)


@pytest.fixture(scope="module")
def bm25_dir(small_world, tmp_path_factory):
    from hopscotch.retriever.index.bm25 import BM25Index

    out = tmp_path_factory.mktemp("parity") / "bm25"
    BM25Index.build(read_corpus(small_world / "corpus.jsonl"), show_progress=False).save(out)
    return out


@pytest.fixture(scope="module")
def service(bm25_dir, small_world):
    """A BM25-only service with a token, in-process."""
    from hopscotch.retriever.searchers import build_searcher
    from hopscotch.retriever.serving.server import make_server, serve_in_thread

    searcher = build_searcher("bm25", bm25=bm25_dir, corpus=small_world / "corpus.jsonl")
    server = make_server({"wiki": searcher}, port=0, token=TOKEN)
    serve_in_thread(server)
    yield {"server": server, "url": server.url, "searcher": searcher,
           "docs": {d.docid: d for d in read_corpus(small_world / "corpus.jsonl")}}
    server.shutdown_and_close()


def test_every_route_matches_pyserini_and_our_openapi(service):
    url = service["url"]
    ours = yaml.safe_load(requests.get(url + "/openapi.yaml", timeout=10).text)
    assert ours == requests.get(url + "/openapi.json", timeout=10).json()
    assert set(ours["paths"]) >= {"/{index}/search", "/{index}/doc/{docid}"}
    assert {"ApiKeyAuth", "BearerAuth"} <= set(ours["components"]["securitySchemes"])
    search = requests.get(url + "/v1/wiki/search", params={"query": "harbour city", "hits": 5}, headers=AUTH, timeout=10)
    docid = search.json()["candidates"][0]["docid"]
    cases = [  # (path, params, status, schema)
        ("/v1/wiki/search", {"query": "harbour city", "hits": 5}, 200, "SearchResponse"),
        ("/v1/wiki/search", {"query": "harbour", "parse": "false", "max_doc_length": 40}, 200, "SearchResponse"),
        ("/v1/wiki/search", {"query": "harbour", "reason": "the city has a port"}, 200, "SearchResponse"),
        (f"/v1/wiki/doc/{docid}", {}, 200, "DocumentResponse"),
        (f"/v1/wiki/doc/{docid}", {"parse": "false"}, 200, "DocumentResponse"),
        ("/v1/wiki/search", {}, 400, "ErrorResponse"),
        ("/v1/wiki/search", {"query": "x", "hits": "0"}, 400, "ErrorResponse"),
        ("/v1/wiki/search", {"query": "x", "parse": "maybe"}, 400, "ErrorResponse"),
        ("/v1/nope/search", {"query": "x"}, 400, "ErrorResponse"),
        ("/v1/wiki/doc/no-such-doc", {}, 404, "ErrorResponse"),
        ("/v1/wiki/nothing", {}, 404, "ErrorResponse"),
    ]
    for path, params, status, schema in cases:
        resp = requests.get(url + path, params=params, headers=AUTH, timeout=10)
        assert resp.status_code == status, (path, params, resp.text)
        assert resp.headers["content-type"] == "application/json"
        check(PYSERINI, schema, resp.json())
        check(ours, schema, resp.json())
    for path, schema in [("/v1/indexes", "IndexList"), ("/health", "Health"), ("/", "Root")]:
        resp = requests.get(url + path, headers=AUTH, timeout=10)
        assert resp.status_code == 200
        check(ours, schema, resp.json())
    assert requests.get(url + "/", timeout=10).json()["openapi"] == "/openapi.yaml"
    docs = requests.get(url + "/docs", timeout=10)
    assert docs.status_code == 200 and "/openapi.json" in docs.text


def test_cmass_client_sees_plain_text_documents(service):
    """What cmass's cm.py reads: ``doc`` strings (no JSON syntax shown to the agent), cut by max_doc_length."""
    url, docs = service["url"], service["docs"]
    body = requests.get(url + "/v1/wiki/search", params={"query": "harbour city", "hits": 5, "max_doc_length": 500},
                        headers=AUTH, timeout=10).json()
    assert body["api"] == "v1" and body["index"] == "wiki" and body["query"] == {"text": "harbour city"}
    assert [c["rank"] for c in body["candidates"]] == [1, 2, 3, 4, 5]
    want = service["searcher"].search_batch(["harbour city"], 5)[0]
    assert [(c["docid"], c["score"]) for c in body["candidates"]] == [(d, pytest.approx(s)) for d, s in want]
    for cand in body["candidates"]:
        doc = docs[cand["docid"]]
        assert isinstance(cand["doc"], str) and len(cand["doc"]) <= 500
        assert cand["doc"] == f"{doc.title}\n{doc.text}"[:500] and not cand["doc"].lstrip().startswith("{")
    first = body["candidates"][0]["docid"]
    answer = requests.get(f"{url}/v1/wiki/doc/{first}", headers=AUTH, timeout=10).json()
    assert answer == {"api": "v1", "index": "wiki", "docid": first,
                      "doc": f"{docs[first].title}\n{docs[first].text}"}
    raw = requests.get(f"{url}/v1/wiki/doc/{first}", params={"parse": "FALSE"}, headers=AUTH, timeout=10).json()
    assert json.loads(raw["doc"]) == {"docid": first, "title": docs[first].title, "text": docs[first].text}


def test_reason_is_logged_and_expands_a_bm25_query(service, caplog):
    reason = "I think the city is by the sea, a shipbuilding harbour"
    with caplog.at_level("INFO", logger="hopscotch.serve.reason"):
        with_reason = requests.get(service["url"] + "/v1/wiki/search", params={
            "query": "harbour city", "hits": 5, "reason": reason}, headers=AUTH, timeout=10)
    plain = requests.get(service["url"] + "/v1/wiki/search", params={"query": "harbour city", "hits": 5},
                         headers=AUTH, timeout=10)
    searcher = service["searcher"]
    assert with_reason.json()["query"] == {"text": "harbour city", "reason_used": True,
                                           "query_input": searcher.reasoning_input}
    assert searcher.reasoning_input.startswith("bm25 query x")
    want = searcher.search_batch(queries_of(["harbour city"], [reason], True), 5)[0]
    assert [(c["docid"], c["score"]) for c in with_reason.json()["candidates"]] == [
        (d, pytest.approx(s)) for d, s in want]
    assert [c["docid"] for c in plain.json()["candidates"]] == [d for d, _ in searcher.search_batch(["harbour city"], 5)[0]]
    logged = [json.loads(r.getMessage()) for r in caplog.records if r.name == "hopscotch.serve.reason"]
    assert logged == [{"index": "wiki", "query": "harbour city", "reason": reason, "used": True}]
    index_list = requests.get(service["url"] + "/v1/indexes", headers=AUTH, timeout=10).json()
    assert index_list["indexes"] == ["wiki"] and index_list["details"]["wiki"]["reason_used"] is True


def test_reason_is_logged_and_not_used_by_a_bm25_service_without_expansion(bm25_dir, small_world, caplog):
    from hopscotch.retriever.searchers import build_searcher
    from hopscotch.retriever.serving.server import make_server, serve_in_thread

    searcher = build_searcher("bm25", bm25=bm25_dir, corpus=small_world / "corpus.jsonl", bm25_reasoning="query")
    server = make_server({"wiki": searcher}, port=0, token=TOKEN)
    serve_in_thread(server)
    try:
        with caplog.at_level("INFO", logger="hopscotch.serve.reason"):
            with_reason = requests.get(server.url + "/v1/wiki/search", params={
                "query": "harbour city", "hits": 5, "reason": "I think the city is by the sea"}, headers=AUTH,
                timeout=10)
        plain = requests.get(server.url + "/v1/wiki/search", params={"query": "harbour city", "hits": 5},
                             headers=AUTH, timeout=10)
    finally:
        server.shutdown_and_close()
    assert with_reason.json()["query"] == {"text": "harbour city", "reason_used": False}
    assert with_reason.json()["candidates"] == plain.json()["candidates"]
    logged = [json.loads(r.getMessage()) for r in caplog.records if r.name == "hopscotch.serve.reason"]
    assert logged == [{"index": "wiki", "query": "harbour city", "reason": "I think the city is by the sea",
                       "used": False}]


@pytest.mark.parametrize("headers,status", [
    ({}, 401),
    ({"Authorization": "Bearer wrong"}, 401),
    ({"Authorization": f"Basic {TOKEN}"}, 401),
    ({"Authorization": TOKEN}, 401),
    ({"x-api-key": "wrong"}, 401),
    ({"Authorization": f"Bearer {TOKEN}"}, 200),
    ({"Authorization": f"bearer {TOKEN}"}, 200),
    ({"authorization": f"BEARER  {TOKEN} "}, 200),
    ({"x-api-key": TOKEN}, 200),
    ({"X-API-Key": TOKEN}, 200),
    ({"x-api-key": "wrong", "Authorization": f"Bearer {TOKEN}"}, 200),
])
def test_both_credential_headers_and_only_under_v1(service, headers, status):
    url = service["url"]
    for path in ("/v1/wiki/search?query=harbour", "/v1/wiki/doc/w000001", "/v1/indexes"):
        resp = requests.get(url + path, headers=headers, timeout=10)
        assert resp.status_code == status, (path, headers, resp.text)
        if status == 401:
            assert "Unauthorized" in resp.json()["error"] and resp.headers["www-authenticate"] == "Bearer"
    for path in ("/", "/health", "/openapi.yaml", "/openapi.json", "/docs"):
        assert requests.get(url + path, headers=headers, timeout=10).status_code == 200


@pytest.mark.parametrize("method", ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "FOO"])
def test_every_method_gets_json_and_no_banner(service, method):
    url = service["url"]
    for path, get_status in [("/", 200), ("/v1/wiki/search?query=harbour", 200), ("/nope", 404),
                             ("/v1/wiki/doc/missing", 404), ("/v1/nope/search?query=x", 400)]:
        resp = requests.request(method, url + path, headers=AUTH, timeout=10)
        assert "server" not in resp.headers and resp.headers["content-type"] == "application/json"
        if method in ("GET", "HEAD"):
            assert resp.status_code == get_status
        else:
            assert resp.status_code == 405 and resp.headers["allow"] == "GET, HEAD"
        if method == "HEAD":
            assert resp.content == b"" and int(resp.headers["content-length"]) > 0
        else:
            body = resp.json()
            assert ("error" in body) == (resp.status_code != 200)
    unauthorized = requests.request(method, url + "/v1/wiki/search?query=x", timeout=10)
    assert unauthorized.status_code == (401 if method in ("GET", "HEAD") else 405)


def test_docids_in_either_climbmix_spelling():
    from hopscotch.retriever.searchers.base import BaseSearcher
    from hopscotch.retriever.serving.service import ApiError, SearchService

    class ClimbMix(BaseSearcher):
        def __init__(self):
            self.docs = {"shard_00045_6622": "a ClimbMix document"}

        def search_batch(self, queries, k=10):
            return [[(d, 1.0) for d in self.docs][:k] for _ in queries]

        def get_document(self, docid):
            return {"docid": docid, "text": self.docs[docid]} if docid in self.docs else None

    svc = SearchService({"climbmix-400b": ClimbMix()})
    try:
        for spelling in ("shard_00045_06622", "shard_00045_6622"):
            assert svc.document("climbmix-400b", spelling) == {
                "api": "v1", "index": "climbmix-400b", "docid": "shard_00045_6622", "doc": "a ClimbMix document"}
        with pytest.raises(ApiError, match="Document not found: shard_00045_6623") as err:
            svc.document("climbmix-400b", "shard_00045_06623")
        assert err.value.status == 404
        with pytest.raises(ApiError, match="'max_doc_length' must be at least 0"):
            svc.search("climbmix-400b", {"query": "x", "max_doc_length": "-3"})
    finally:
        svc.close()


def _free_port(family=socket.AF_INET, host="127.0.0.1") -> int:
    with socket.socket(family) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def test_serve_bm25_alone_with_a_token_file(bm25_dir, small_world, tmp_path, cli):
    code, _, err = cli("serve", "--searcher", "bm25", "--bm25-index", bm25_dir, "--port", 0)
    assert code == 2 and "needs the documents" in err and "--corpus" in err
    token_file = tmp_path / "token"
    token_file.write_text(f"{TOKEN}\nignored second line\n")
    port = _free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("HOPSCOTCH_SERVE_TOKEN", None)
    proc = subprocess.Popen([sys.executable, "-m", "hopscotch.retriever.cli", "serve", "--searcher", "bm25",
                             "--bm25-index", str(bm25_dir), "--corpus", str(small_world / "corpus.jsonl"),
                             "--port", str(port), "--name", "bm25", "--token-file", str(token_file),
                             "--bm25-reasoning", "query"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 1800
        while time.monotonic() < deadline:
            try:
                if requests.get(url + "/health", timeout=2).ok:  # no token needed outside /v1
                    break
            except requests.ConnectionError:
                time.sleep(0.2)
            assert proc.poll() is None, proc.stderr.read()
        assert requests.get(url + "/v1/bm25/search", params={"query": "harbour"}, timeout=10).status_code == 401
        resp = requests.get(url + "/v1/bm25/search", params={"query": "harbour city", "hits": 3, "reason": "why"},
                            headers={"x-api-key": TOKEN}, timeout=10)
        assert resp.status_code == 200 and len(resp.json()["candidates"]) == 3
        assert resp.json()["query"]["reason_used"] is False
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    err = proc.stderr.read()
    assert f"on http://127.0.0.1:{port}/v1/bm25/search (token required)" in err
    assert "'reason' is logged only" in err and '"reason": "why"' in err
    assert TOKEN not in err


def test_token_sources(tmp_path, monkeypatch):
    import argparse

    from hopscotch.retriever.commands.serve import resolve_token
    from hopscotch.retriever.errors import UsageError

    def ns(**kw):
        return argparse.Namespace(**{"token": None, "token_file": None, **kw})

    monkeypatch.delenv("HOPSCOTCH_SERVE_TOKEN", raising=False)
    assert resolve_token(ns()) is None
    monkeypatch.setenv("HOPSCOTCH_SERVE_TOKEN", "from-env")
    assert resolve_token(ns()) == "from-env"
    assert resolve_token(ns(token="given")) == "given"
    (tmp_path / "t").write_text("  from-file \n")
    assert resolve_token(ns(token_file=str(tmp_path / "t"))) == "from-file"
    (tmp_path / "empty").write_text("\n")
    for bad, needle in [(ns(token="a", token_file=str(tmp_path / "t")), "not both"),
                        (ns(token_file=str(tmp_path / "empty")), "empty"),
                        (ns(token_file=str(tmp_path / "missing")), "missing")]:
        with pytest.raises(UsageError, match=needle):
            resolve_token(bad)


def test_ipv6_listening(service):
    from hopscotch.retriever.serving.server import make_server, serve_in_thread

    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    try:
        _free_port(socket.AF_INET6, "::1")
    except OSError:
        pytest.skip("cannot bind ::1 here")
    for host, url_host, also in [("::1", "[::1]", None), ("::", "[::]", "127.0.0.1")]:
        server = make_server({"wiki": service["searcher"]}, host=host, port=0)
        serve_in_thread(server)
        try:
            assert server.url.startswith(f"http://{url_host}:")
            port = server.server_address[1]
            assert requests.get(f"http://[::1]:{port}/health", timeout=10).json() == {"status": "ok"}
            if also:  # '::' takes IPv4 too
                assert requests.get(f"http://{also}:{port}/v1/wiki/search?query=harbour", timeout=10).status_code == 200
        finally:
            server.shutdown()
            server.server_close()
            server.executor.shutdown()
            for batcher in server.service.batchers.values():  # the searcher stays open for the other tests
                batcher.close()
