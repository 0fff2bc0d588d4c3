"""Service hardening over real sockets: idle and header timeouts, 1,000 idle connections, request bodies,
malformed requests, the in-flight bound; and the micro-batcher as a unit."""

from __future__ import annotations

import json
import resource
import socket
import statistics
import threading
import time

import pytest

from hopscotch.retriever.io.queries import as_query
from hopscotch.retriever.searchers.base import BaseSearcher
from hopscotch.retriever.serving.batcher import QueryBatcher
from hopscotch.retriever.serving.server import HttpLimits, make_server, serve_in_thread


class WordSearcher(BaseSearcher):
    """A tiny exact searcher: documents scored by how many query words they contain; ``gate`` (when set)
    must be open before a batch is answered, ``batches`` records the batch sizes it was called with."""

    name = "words"

    def __init__(self, docs: dict[str, str]):
        self.docs, self.batches, self.gate = docs, [], None

    def search_batch(self, queries, k=10):
        if self.gate is not None:
            self.gate.wait(10)
        self.batches.append(len(queries))
        out = []
        for q in queries:
            words = set(as_query(q).text.lower().split())
            scored = sorted(((sum(w in words for w in t.lower().split()), d) for d, t in self.docs.items()),
                            key=lambda x: (-x[0], x[1]))
            out.append([(d, float(s)) for s, d in scored[:k]])
        return out

    def get_document(self, docid):
        return {"docid": docid, "text": self.docs[docid]} if docid in self.docs else None


DOCS = {f"d{i}": f"document {i} about {'harbour' if i % 2 else 'mountain'} number {i}" for i in range(20)}


def _exchange(sock: socket.socket, raw: bytes, timeout: float = 10) -> tuple[int, dict[str, str], bytes]:
    """Send one raw request and read one response (status, lower-case headers, body)."""
    sock.settimeout(timeout)
    sock.sendall(raw)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before a response: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    while len(body) < int(headers.get("content-length", "0")):
        body += sock.recv(65536)
    return int(lines[0].split()[1]), headers, body


def _closed_by_peer(sock: socket.socket, within: float) -> bool:
    sock.settimeout(within)
    try:
        while sock.recv(65536):
            pass
        return True
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


@pytest.fixture
def serve():
    """``serve(limits=None, searcher=None, **kw) -> server`` started on a free loopback port; all are closed."""
    started = []

    def start(limits: HttpLimits | None = None, searcher: BaseSearcher | None = None, **kw):
        server = make_server({"default": searcher or WordSearcher(DOCS)}, port=0, limits=limits, **kw)
        serve_in_thread(server)
        started.append(server)
        return server

    yield start
    for server in started:
        server.shutdown_and_close()


def test_1000_idle_sockets_use_no_threads_and_a_probe_is_answered_fast(serve):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2600:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))
    before = threading.active_count()
    limits = HttpLimits(threads=3, idle_timeout=3.0)
    server = serve(limits)
    host, port = server.server_address[:2]
    bound = before + 1 + 1 + limits.threads  # the event loop, one batcher, the document readers
    idle = [socket.create_connection((host, port)) for _ in range(1000)]
    try:
        time.sleep(0.3)  # let the server accept them all
        assert threading.active_count() <= bound
        probes = []
        for _ in range(5):
            with socket.create_connection((host, port)) as probe:
                t0 = time.perf_counter()
                status, _, body = _exchange(probe, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                probes.append(time.perf_counter() - t0)
            assert status == 200 and json.loads(body) == {"status": "ok"}
        assert statistics.median(probes) < 0.1, probes
        with socket.create_connection((host, port)) as c:  # a search too, while the sockets idle
            status, _, body = _exchange(c, b"GET /v1/default/search?query=harbour&hits=3 HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status == 200 and len(json.loads(body)["candidates"]) == 3
        assert threading.active_count() <= bound
        # the idle timeout closes them (quietly: no bytes before the close)
        assert _closed_by_peer(idle[0], within=limits.idle_timeout + 2)
        assert all(_closed_by_peer(s, within=0.5) for s in idle[1:50])
    finally:
        for s in idle:
            s.close()


def test_partial_and_trickled_requests_get_408_after_the_header_timeout(serve):
    server = serve(HttpLimits(header_timeout=0.6, idle_timeout=5.0))
    addr = server.server_address[:2]
    with socket.create_connection(addr) as c:
        c.sendall(b"GET /health HTTP/1.1\r\nHo")
        t0 = time.monotonic()
        status, headers, body = _exchange(c, b"")
        assert status == 408 and headers["content-type"] == "application/json" and "error" in json.loads(body)
        assert 0.4 < time.monotonic() - t0 < 2.0 and _closed_by_peer(c, within=1)
    with socket.create_connection(addr) as c:  # one byte every 0.2 s never completes the request
        t0 = time.monotonic()
        c.settimeout(0.2)
        got = b""
        for byte in b"GET /health HTTP/1.1\r\nHost: slow\r\nX-Padding: 0123456789\r\n":
            c.sendall(bytes([byte]))
            try:
                got = c.recv(4096)
                break
            except TimeoutError:
                continue
        assert got.startswith(b"HTTP/1.1 408"), got
        assert time.monotonic() - t0 < 2.0
    with socket.create_connection(addr) as c:  # a keep-alive connection: two requests, then the idle timer
        assert _exchange(c, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")[0] == 200
        assert _exchange(c, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")[0] == 200


def test_small_bodies_are_read_large_ones_refused(serve):
    server = serve(HttpLimits(max_body=1024))
    addr = server.server_address[:2]
    with socket.create_connection(addr) as c:  # a GET with a small body: answered, the connection reusable
        status, _, _ = _exchange(c, b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n0123456789")
        assert status == 200
        status, _, body = _exchange(c, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status == 200 and json.loads(body) == {"status": "ok"}
    with socket.create_connection(addr) as c:  # a POST with a small body: 405, the body read, reusable
        status, headers, body = _exchange(c, b"POST /v1/default/search HTTP/1.1\r\nHost: x\r\n"
                                             b"Content-Length: 5\r\n\r\nhello")
        assert status == 405 and headers["allow"] == "GET, HEAD" and "not allowed" in json.loads(body)["error"]
        assert _exchange(c, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")[0] == 200
    for raw, want in [(b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n", 413),
                      (b"PUT /health HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n", 405),
                      (b"GET /health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", 413)]:
        with socket.create_connection(addr) as c:  # never sent: refused and the connection closed
            status, headers, body = _exchange(c, raw)
            assert status == want and headers["connection"] == "close" and json.loads(body)["error"]
            assert _closed_by_peer(c, within=2)


@pytest.mark.parametrize("raw,statuses", [
    (b"NOT HTTP AT ALL\r\n\r\n", {400}),
    (b"GET / HTTP/1.1\r\nBad Header\r\n\r\n", {400}),
    # too long: 400 from h11 while it is still arriving, 431 when it came whole
    (b"GET /?q=" + b"x" * 70_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", {400, 431}),
    (b"GET / HTTP/1.1\r\nHost: x\r\n" + b"X-Big: " + b"y" * 70_000 + b"\r\n\r\n", {400, 431}),
])
def test_malformed_or_oversized_requests_get_json(serve, raw, statuses):
    server = serve(HttpLimits(max_header_bytes=64 * 1024))
    with socket.create_connection(server.server_address[:2]) as c:
        status, headers, body = _exchange(c, raw)
        assert status in statuses and headers["content-type"] == "application/json" and json.loads(body)["error"]
        assert "server" not in headers and headers["connection"] == "close" and _closed_by_peer(c, within=2)


def test_long_reasoning_fits_the_header_limit(serve):
    server = serve()
    reason = "because " * 10_000  # 80 kB of reasoning in the query string
    with socket.create_connection(server.server_address[:2]) as c:
        path = f"/v1/default/search?query=harbour&hits=2&reason={reason.replace(' ', '+')}"
        status, _, body = _exchange(c, f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert status == 200 and json.loads(body)["query"] == {"text": "harbour", "reason_used": False}


def test_requests_beyond_max_in_flight_get_503(serve):
    searcher = WordSearcher(DOCS)
    searcher.gate = threading.Event()
    server = serve(HttpLimits(max_in_flight=1), searcher=searcher)
    addr = server.server_address[:2]
    first = socket.create_connection(addr)
    try:
        first.sendall(b"GET /v1/default/search?query=harbour HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(0.3)  # the first search now waits on the gate
        with socket.create_connection(addr) as c:
            status, headers, body = _exchange(c, b"GET /v1/default/search?query=x HTTP/1.1\r\nHost: x\r\n\r\n")
            assert status == 503 and headers["retry-after"] == "1" and "busy" in json.loads(body)["error"]
            assert _exchange(c, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")[0] == 200  # outside /v1: not counted
        searcher.gate.set()
        status, _, body = _exchange(first, b"")
        assert status == 200 and json.loads(body)["candidates"]
    finally:
        searcher.gate.set()
        first.close()


def test_query_batcher_batches_concurrent_queries_and_groups_by_k():
    searcher = WordSearcher(DOCS)
    searcher.gate = threading.Event()
    batcher = QueryBatcher(searcher, max_batch=8, max_wait=0.05)
    try:
        futures = [batcher.submit("harbour number", 3)]
        time.sleep(0.1)  # the worker holds the first request at the gate; the rest queue up
        futures += [batcher.submit(f"mountain number {i}", 3 if i % 2 else 5) for i in range(10)]
        searcher.gate.set()
        results = [f.result(timeout=10) for f in futures]
        assert [len(r) for r in results] == [3] + [3 if i % 2 else 5 for i in range(10)]
        assert results[0] == searcher.search_batch(["harbour number"], 3)[0]
        assert batcher.stats["queries"] == 11 and batcher.stats["calls"] < 11 and batcher.stats["max_batch"] > 1
        assert max(searcher.batches[:-1]) <= 8
        assert batcher.search("harbour", 2) == searcher.search_batch(["harbour"], 2)[0]
    finally:
        batcher.close()
    with pytest.raises(RuntimeError, match="closed"):
        batcher.submit("x", 1)


def test_query_batcher_hands_a_failure_to_every_request_of_the_call():
    class Failing(WordSearcher):
        def search_batch(self, queries, k=10):
            raise ValueError("index on fire")

    batcher = QueryBatcher(Failing(DOCS))
    try:
        with pytest.raises(ValueError, match="index on fire"):
            batcher.search("x", 3)
    finally:
        batcher.close()
