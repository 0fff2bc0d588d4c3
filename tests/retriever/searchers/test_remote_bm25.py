"""A hybrid whose BM25 half is a Pyserini-compatible REST endpoint (``--bm25-url``, issue 37 item 2).

Two endpoints serve the small world's BM25 index: ``hopscotch serve`` (in a thread) and a minimal stand-in for
Pyserini's ``server/rest`` written here from its code (``routes/v1.py``, ``backend.py``, ``document_format.py``):
``doc`` the raw stored document string (a JSON collection record ``{"id", "contents"}``: ``parse=true`` gives the
contents, ``parse=false`` the raw JSON), scores as floats rounded to 6 decimals, ranks from 1, ``{"error"}`` bodies,
and Anserini's bag-of-words query (one term clause per analysed token: a repeated token scores again). Against
both, the remote hybrid returns the local hybrid's fused list, plain and reasoning-aware; ``search``, ``replay`` and
the BrowseComp-Plus registry accept it; failures are one-line errors naming the endpoint.
"""

from __future__ import annotations

import argparse
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.io.corpus import read_corpus
from hopscotch.retriever.searchers import SEARCHERS, build_searcher
from hopscotch.retriever.io.queries import queries_of

TOKEN = "bm25-secret"
K = 10


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a client that gave up (the timeout test) leaves a broken pipe behind: not the test's output


class PyseriniShaped:
    """Pyserini's ``/v1`` search and document routes over a BM25 index, in a thread; ``mode`` breaks it on purpose
    (``malformed``: not JSON; ``shapeless``: JSON without candidates; ``hang``: answers once ``release`` is set;
    ``foreign``: docids of another corpus; ``busy-once``: one 503). ``requests`` records each ``(path, params)``."""

    def __init__(self, bm25_dir, corpus, name: str = "climbmix-400b", token: str | None = None):
        from hopscotch.retriever.index.bm25 import BM25Index

        self.index = BM25Index.load(bm25_dir)
        self.raw = {d.docid: json.dumps({"id": d.docid, "contents": f"{d.title}\n{d.text}" if d.title else d.text})
                    for d in read_corpus(corpus)}
        self.name, self.token, self.mode = name, token, None
        self.requests: list[tuple[str, dict]] = []
        self.release = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def send(self, status: int, payload, raw: bytes | None = None):
                body = raw if raw is not None else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):  # noqa: N802 - http.server's name
                owner.answer(self)

        self.httpd = QuietServer(("127.0.0.1", 0), Handler)  # listening once constructed: no wait needed
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1/{name}"

    def close(self):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def document(self, docid: str, parse: bool, max_len: int | None):
        raw = self.raw[docid]
        if not parse:  # format_lucene_document(parse=False): the stored raw field
            return raw
        fields = {k: str(v) for k, v in json.loads(raw).items() if k not in ("id", "_id", "docid")}
        doc = next(iter(fields.values())) if len(fields) == 1 else fields  # _normalize_parsed_object
        return doc[:max_len] if max_len is not None and isinstance(doc, str) else doc

    def answer(self, h):
        parts = urlsplit(h.path)
        params = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        self.requests.append((parts.path, params))
        if self.token and h.headers.get("Authorization") != f"Bearer {self.token}":
            return h.send(401, {"error": "Invalid or missing API token"})
        if self.mode == "hang":
            self.release.wait()
        if self.mode == "busy-once":  # a shared service under load: 503 with Retry-After, then an answer
            self.mode = None
            h.send_response(503)
            h.send_header("Retry-After", "0")
            h.send_header("Content-Length", "0")
            h.end_headers()
            return None
        if self.mode == "malformed":
            return h.send(200, None, raw=b"<html>upstream proxy error</html>")
        if self.mode == "shapeless":
            return h.send(200, {"api": "v1", "hits": []})
        prefix = f"/v1/{self.name}/"
        if not unquote(parts.path).startswith(prefix):
            return h.send(400, {"error": f"Unable to open index: {parts.path}"})
        route = unquote(parts.path)[len(prefix):]
        parse = params.get("parse", "true").lower() != "false"
        max_len = int(params["max_doc_length"]) if params.get("max_doc_length") else None
        if route == "search":
            query = params.get("query")
            if query is None or not query.strip():
                return h.send(400, {"error": "Parameter 'query' is required"})
            hits = int(params.get("hits") or 10)
            # Anserini's BagOfWordsQueryGenerator: one SHOULD clause per analysed token, repeats included
            ranked = self.index.search_weighted([[(query, 1.0)]], k=hits)[0]
            candidates = [{"docid": ("other-" if self.mode == "foreign" else "") + docid, "score": round(score, 6),
                           "rank": rank, "doc": self.document(docid, parse, max_len)}
                          for rank, (docid, score) in enumerate(ranked, start=1)]
            return h.send(200, {"api": "v1", "index": self.name, "query": {"text": query}, "candidates": candidates})
        if route.startswith("doc/"):
            docid = route[len("doc/"):]
            if docid not in self.raw:
                return h.send(404, {"error": f"Document not found: {docid}"})
            return h.send(200, {"api": "v1", "index": self.name, "docid": docid,
                                "doc": self.document(docid, parse, max_len)})
        return h.send(404, {"error": "Not Found"})


@pytest.fixture(scope="module")
def world(small_world, small_world_index, tmp_path_factory):
    """The small world's BM25 index served by ``hopscotch serve`` (name ``wiki``) and by the Pyserini stand-in
    (``climbmix-400b``, with a token), and the local hybrid they are compared with."""
    from hopscotch.retriever.index.bm25 import BM25Index
    from hopscotch.retriever.serving.server import make_server, serve_in_thread

    root = tmp_path_factory.mktemp("remote_bm25")
    corpus = small_world / "corpus.jsonl"
    BM25Index.build(read_corpus(corpus), show_progress=False).save(root / "bm25")
    ours = make_server({"wiki": build_searcher("bm25", bm25=root / "bm25", corpus=corpus)}, port=0)
    serve_in_thread(ours)
    pyserini = PyseriniShaped(root / "bm25", corpus, token=TOKEN)
    local = build_searcher("hybrid", bm25=root / "bm25", index=small_world_index)
    queries = [json.loads(line) for line in (small_world / "queries.jsonl").read_text().splitlines()]
    texts = [q["text"] for q in queries]
    reasonings = [f"So far I found {texts[(i + 3) % len(texts)]}; next I need the {texts[i].split()[-1]} part."
                  if i % 2 else None for i in range(len(texts))]
    yield {"root": root, "bm25": root / "bm25", "corpus": corpus, "index": small_world_index, "ours": ours,
           "ours_url": f"{ours.url}/v1/wiki", "pyserini": pyserini, "local": local, "texts": texts,
           "reasonings": reasonings}
    ours.shutdown_and_close()
    pyserini.close()


@pytest.fixture(autouse=True)
def _no_env_token(monkeypatch):
    monkeypatch.delenv("PYSERINI_API_TOKEN", raising=False)


def endpoint(world, which: str) -> dict:
    if which == "ours":
        return {"bm25_url": world["ours_url"]}
    world["pyserini"].mode = None
    return {"bm25_url": world["pyserini"].url, "bm25_token": TOKEN}


def remote_hybrid(world, which: str, **options):
    return build_searcher("hybrid", index=world["index"], encoder=world["local"].dense.encoder,
                          **endpoint(world, which), **options)


def assert_same_lists(got, want, tol):
    for g, w in zip(got, want, strict=True):
        assert [d for d, _ in g] == [d for d, _ in w]
        assert [s for _, s in g] == pytest.approx([s for _, s in w], rel=tol, abs=tol)


# --- the acceptance: the same fused list --------------------------------------------------------------------

@pytest.mark.parametrize("which", ["ours", "pyserini"])
@pytest.mark.parametrize("fusion", [{}, {"fusion": "rrf"}, {"fusion": "adaptive"}], ids=["default", "rrf", "adaptive"])
def test_remote_bm25_half_fuses_as_the_local_one(world, which, fusion):
    # every document of the 300 in each list: which of the documents tied at a shorter list's cut get in is each
    # engine's own choice (bm25s' top-k and the served index's differ there with the CPU's sort), not the fusion's
    depth = 300
    local = build_searcher("hybrid", bm25=world["bm25"], index=world["index"], encoder=world["local"].dense.encoder,
                           depth=depth, **fusion)
    remote = remote_hybrid(world, which, depth=depth, **fusion)
    assert remote.remote_bm25 is not None and local.remote_bm25 is None
    tol = 1e-5 if which == "ours" else 1e-4  # float32 sums there, and Pyserini rounds its scores to 6 decimals
    texts, reasonings = world["texts"], world["reasonings"]
    assert_same_lists(remote.search_batch(texts, K), local.search_batch(texts, K), tol)
    # reasoning-aware: BM25 expands each query with its reasoning, sent as repeated text
    assert_same_lists(remote.search_batch(queries_of(texts, reasonings, True), K),
                      local.search_batch(queries_of(texts, reasonings, True), K), tol)
    # each list is asked for --depth hits, without text
    sent = remote.remote_bm25.client.search_path
    if which == "pyserini":
        params = [p for path, p in world["pyserini"].requests if path == sent][-1]
        assert params["hits"] == str(remote.depth) and params["max_doc_length"] == "0" and "reason" not in params


def test_the_expansion_is_sent_as_repeated_text(world):
    """The default weight (8): the query eight times, then the reasoning text; 2.5: the query five times, the text
    twice, scores halved, and still the local list; a weight that is no small fraction is refused up front."""
    from hopscotch.retriever.searchers.bm25_expansion import DEFAULT_BM25_EXPANSION

    pys = world["pyserini"]
    remote = remote_hybrid(world, "pyserini")
    query, reasoning = world["texts"][0], "the harbour city of the shipbuilding company"
    pys.requests.clear()
    remote.search_batch(queries_of([query], [reasoning], True), K)
    sent = [p["query"] for _, p in pys.requests]
    tail = DEFAULT_BM25_EXPANSION.expansion_text(query, reasoning)
    assert DEFAULT_BM25_EXPANSION.query_weight == 8 and sent == [" ".join([query] * 8 + [tail])]

    local = build_searcher("hybrid", bm25=world["bm25"], index=world["index"], encoder=remote.dense.encoder,
                           bm25_query_weight=2.5)
    half = remote_hybrid(world, "pyserini", bm25_query_weight=2.5)
    pys.requests.clear()
    got = half.bm25.search_batch(queries_of([query], [reasoning], True), 50)
    assert [p["query"] for _, p in pys.requests] == [" ".join([query] * 5 + [tail] * 2)]
    want = local.bm25.search_batch(queries_of([query], [reasoning], True), 50)
    assert_same_lists(got, want, 1e-5)
    with pytest.raises(UsageError, match=r"--bm25-query-weight 0.37: a remote BM25 endpoint .* denominator up to 10"):
        remote_hybrid(world, "pyserini", bm25_query_weight=0.37)


def test_documents_from_the_dense_docstore_else_the_endpoint(world, small_world, tmp_path):
    from hopscotch.retriever.index.encode import EncodeOptions, encode_corpus

    remote = remote_hybrid(world, "pyserini")
    docid = remote.search_batch([world["texts"][1]], 1)[0][0][0]
    assert remote.get_document(docid) == world["local"].get_document(docid)
    bare = tmp_path / "bare"
    encode_corpus(world["corpus"], world["local"].dense.meta.model_path, bare,
                  EncodeOptions(shard_size=64, batch_size=32, max_length=64, show_progress=False, docstore=False))
    no_store = build_searcher("hybrid", index=bare, encoder=remote.dense.encoder, **endpoint(world, "pyserini"))
    assert not no_store.dense.has_documents and no_store.has_documents
    want = world["local"].get_document(docid)
    whole = f"{want['title']}\n{want['text']}"  # a JSON collection's contents: the title is the first line
    assert no_store.get_document(docid) == {"docid": docid, "text": whole}  # Pyserini's raw {"id", "contents"}
    hit = no_store.search(world["texts"][1], 1)[0]
    assert hit["docid"] == docid and hit["text"] == whole
    assert no_store.get_document("no-such-doc") is None


# --- the harnesses: BrowseComp-Plus, replay, search, serve -------------------------------------------------

def test_browsecomp_plus_builds_it(world):
    """``SearcherClass.parse_args(parser)`` then ``SearcherClass(args)`` beside the harness's own flags."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--searcher-type", required=True)
    parser.add_argument("--model", default="gpt-4.1")
    parser.add_argument("--k", type=int, default=5)
    SEARCHERS["hybrid"].parse_args(parser)
    args = parser.parse_args(["--searcher-type", "hybrid", "--bm25-url", world["pyserini"].url, "--bm25-token", TOKEN,
                              "--index", str(world["index"]), "--k", "5"])
    world["pyserini"].mode = None
    searcher = SEARCHERS["hybrid"](args)
    assert args.model == "gpt-4.1" and searcher.remote_bm25 is not None
    hits = searcher.search(world["texts"][2], args.k)
    want = world["local"].search(world["texts"][2], args.k)
    assert [h["docid"] for h in hits] == [h["docid"] for h in want]
    assert [h["text"] for h in hits] == [h["text"] for h in want]
    assert [h["score"] for h in hits] == pytest.approx([h["score"] for h in want], abs=1e-4)
    # the harness's namespace is held to the CLI's rules
    for extra, words in ((["--bm25", str(world["bm25"])], "not both"), ([], "--url http")):
        argv = ["--searcher-type", "hybrid", "--bm25-url", world["ours_url"], *extra]
        argv += ["--index", str(world["index"])] if extra else []
        with pytest.raises(UsageError, match=words):
            SEARCHERS["hybrid"](parser.parse_args(argv))


def test_replay_and_search_accept_it(world, small_world, tmp_path, cli):
    from hopscotch.retriever.io.runs import read_run

    common = ["--runs", small_world / "traces.jsonl", "--qrels", small_world / "qrels.tsv", "--no-plot",
              "--reasoning", "--index", world["index"]]
    code, _, err = cli("replay", *common, "--bm25", world["bm25"], "--out", tmp_path / "local")
    assert code == 0, err
    code, _, err = cli("replay", *common, "--bm25-url", world["pyserini"].url, "--bm25-token", TOKEN,
                       "--out", tmp_path / "remote")
    assert code == 0, err
    local, remote = (read_run(tmp_path / d / "calls.trec") for d in ("local", "remote"))
    assert local.keys() == remote.keys()
    for qid in local:
        assert sorted(local[qid], key=local[qid].get) == sorted(remote[qid], key=remote[qid].get)
    result = json.loads((tmp_path / "remote" / "replay.json").read_text())
    assert result["retriever"]["searcher"] == "hybrid"
    assert result["retriever"]["flags"]["bm25_url"] == world["pyserini"].url
    assert TOKEN not in (tmp_path / "remote" / "replay.json").read_text()  # the token is never written down
    queries = small_world / "queries.jsonl"
    code, _, err = cli("search", "--queries", queries, "--bm25-url", world["ours_url"], "--index", world["index"],
                       "--k", K, "--out", tmp_path / "remote.trec")
    assert code == 0, err
    code, _, err = cli("search", "--queries", queries, "--bm25", world["bm25"], "--index", world["index"],
                       "--k", K, "--out", tmp_path / "local.trec")
    assert code == 0, err
    local, remote = read_run(tmp_path / "local.trec"), read_run(tmp_path / "remote.trec")
    assert {q: list(h) for q, h in local.items()} == {q: list(h) for q, h in remote.items()}


def test_serve_serves_such_a_hybrid(world):
    from hopscotch.retriever.cli import build_parser
    from hopscotch.retriever.commands.serve import build_server
    from hopscotch.retriever.searchers.remote import RemoteSearcher
    from hopscotch.retriever.serving.server import serve_in_thread

    args = build_parser().parse_args(["serve", "--bm25-url", world["ours_url"], "--index", str(world["index"]),
                                      "--port", "0", "--name", "hy"])
    server = build_server(args)
    serve_in_thread(server)
    try:
        client = RemoteSearcher(server.url, index="hy")
        got = client.search_batch(world["texts"][:4], K)
        assert_same_lists(got, world["local"].search_batch(world["texts"][:4], K), 1e-5)
    finally:
        server.shutdown_and_close()


# --- refusals and failures: one line naming the endpoint ------------------------------------------------------

def test_selection_and_flag_refusals(world, small_world, cli, tmp_path):
    url, queries, out = world["ours_url"], small_world / "queries.jsonl", tmp_path / "x.trec"
    code, _, err = cli("search", "--queries", queries, "--bm25-url", url, "--out", out)
    assert code == 2 and err.count("\n") == 1
    assert f"--url {world['ours'].url} --name wiki" in err and "needs --index" in err
    code, _, err = cli("search", "--queries", queries, "--bm25-url", url, "--bm25", world["bm25"], "--index",
                       world["index"], "--out", out)
    assert code == 2 and "not both" in err and err.count("\n") == 1
    for flag_ in (["--bm25-token", "t"], ["--remote-timeout", "3"]):
        code, _, err = cli("search", "--queries", queries, "--bm25", world["bm25"], "--index", world["index"],
                           *flag_, "--out", out)
        assert code == 2 and flag_[0] in err and "remote BM25 half only" in err
    for bad, words in (("127.0.0.1:9", r"http\(s\)://HOST"), ("http://127.0.0.1:9", "name the index")):
        with pytest.raises(UsageError, match=words):
            build_searcher("hybrid", bm25_url=bad, index=world["index"])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("case, words", [
    ("down", "cannot reach the search service at http://127.0.0.1:"),
    ("no-token", "refused the request (401 Invalid or missing API token): give the service's token with --bm25-token"),
    ("bad-token", "refused the request (401 Invalid or missing API token): check the token given with --bm25-token"),
    ("malformed", "expected a JSON answer (Pyserini's /v1 REST shape), got '<html>upstream proxy error</html>'"),
    ("shapeless", "expected Pyserini's search answer"),
    ("unknown-index", "search service error 400: Unable to open index"),
])
def test_endpoint_failures_are_one_line_usage_errors(world, case, words):
    pys = world["pyserini"]
    pys.mode = case if case in ("malformed", "shapeless") else None
    url = {"down": f"http://127.0.0.1:{free_port()}/v1/x", "unknown-index": pys.url + "-missing"}.get(case, pys.url)
    token = {"no-token": None, "bad-token": "wrong"}.get(case, TOKEN)
    try:
        with pytest.raises(UsageError) as err:
            build_searcher("hybrid", bm25_url=url, bm25_token=token, index=world["index"])
    finally:
        pys.mode = None
    message = str(err.value)
    assert words in message and "\n" not in message
    assert message.count(url.split("/v1/")[0]) >= 1 and "query=" not in message


def test_a_busy_service_is_asked_again(world):
    pys = world["pyserini"]
    remote = remote_hybrid(world, "pyserini")
    want = remote.search_batch([world["texts"][3]], K)
    pys.requests.clear()
    pys.mode = "busy-once"
    assert remote.search_batch([world["texts"][3]], K) == want
    assert len(pys.requests) == 2 and pys.mode is None


def test_a_timeout_and_a_foreign_corpus(world, cli, tmp_path):
    pys = world["pyserini"]
    remote = remote_hybrid(world, "pyserini", remote_timeout=0.5)
    pys.mode, pys.release = "hang", threading.Event()
    try:
        with pytest.raises(UsageError, match=r"/v1/climbmix-400b/search: no answer within 0.5 s \(raise it with "
                                             r"--remote-timeout\)"):
            remote.search_batch([world["texts"][0]], K)
    finally:
        pys.release.set()
        pys.mode = None
    pys.mode = "foreign"
    try:
        with pytest.raises(UsageError, match=r"returned document 'other-.*', which the dense index .* does not hold: "
                                             r"the BM25 endpoint and the dense index must index the same corpus"):
            remote.search_batch([world["texts"][0]], K)
        queries = tmp_path / "q.jsonl"
        queries.write_text(json.dumps({"_id": "q1", "text": world["texts"][0]}) + "\n")
        code, _, err = cli("search", "--queries", queries, "--bm25-url", pys.url, "--bm25-token", TOKEN,
                           "--index", world["index"], "--out", tmp_path / "run.trec")
        assert code == 2 and "must index the same corpus" in err and err.count("\n") == 1
        assert not Path(tmp_path / "run.trec").exists()
    finally:
        pys.mode = None
