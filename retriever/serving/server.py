"""A Pyserini-compatible REST search service over Hopscotch searchers (standard library HTTP server).

Endpoints (``NAME`` is the served index name, ``default`` unless ``--name`` says otherwise)::

    GET /v1/NAME/search?query=...&hits=10&max_doc_length=500[&reason=...]
        -> {"api": "v1", "index": NAME, "query": {"text": ...},
            "candidates": [{"docid", "score", "rank", "doc": {"docid", "title", "text"}}]}
    GET /v1/NAME/doc/DOCID   -> {"api": "v1", "index": NAME, "docid": ..., "doc": {"docid", "title", "text"}}
    GET /v1/indexes          -> {"indexes": [NAME, ...]}
    GET /health              -> {"status": "ok"}

With ``reason`` the query is encoded reasoning-aware (``Reasoning: {reason}\\n\\nQuery: {query}``);
``max_doc_length`` cuts each candidate's text to that many characters (default: whole document).
Errors are JSON ``{"error": message}``: 400 for bad parameters, 404 for an unknown index, document or
path, 401 when a token is set and the request lacks ``Authorization: Bearer TOKEN``. The server binds
to loopback unless told otherwise. Requests arriving together are batched into one encoder call by a
:class:`QueryBatcher` per index.

Example::

    server = make_server({"default": DenseSearcher("index_dir")}, port=8000, token="s3cret")
    server.serve_forever()
"""

from __future__ import annotations

import hmac
import json
import queue
import sys
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

from hopscotch.retriever.searchers.base import BaseSearcher, Ranked

MAX_HITS = 1000


@dataclass
class _Request:
    query: str
    k: int
    reasoning: str | None
    future: Future = field(default_factory=Future)


class QueryBatcher:
    """Funnels concurrent single-query searches into batched ``search_batch`` calls on one worker thread.

    The worker takes the first waiting request, then everything else already queued (waiting at most
    ``max_wait`` seconds for more), up to ``max_batch``; requests with the same ``k`` share one call.
    ``stats`` counts calls and queries, so ``queries / calls`` is the mean batch size.
    """

    def __init__(self, searcher: BaseSearcher, max_batch: int = 64, max_wait: float = 0.002):
        self.searcher, self.max_batch, self.max_wait = searcher, max_batch, max_wait
        self.stats = {"calls": 0, "queries": 0, "max_batch": 0}
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="query-batcher", daemon=True)
        self._thread.start()

    def search(self, query: str, k: int, reasoning: str | None = None, timeout: float | None = 300) -> Ranked:
        req = _Request(query, k, reasoning)
        self._queue.put(req)
        return req.future.result(timeout=timeout)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=10)

    def _collect(self, first: _Request) -> tuple[list[_Request], bool]:
        batch, stop = [first], False
        deadline = time.monotonic() + self.max_wait
        while len(batch) < self.max_batch:
            try:
                item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if item is None:
                stop = True
                break
            batch.append(item)
        return batch, stop

    def _loop(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch, stop = self._collect(first)
            by_k: dict[int, list[_Request]] = {}
            for req in batch:
                by_k.setdefault(req.k, []).append(req)
            for k, reqs in by_k.items():
                try:
                    results = self.searcher.search_batch([r.query for r in reqs], k, [r.reasoning for r in reqs],
                                                         reasoning_aware=[r.reasoning is not None for r in reqs])
                except BaseException as exc:  # hand the failure to every waiting request
                    for r in reqs:
                        r.future.set_exception(exc)
                    continue
                self.stats["calls"] += 1
                self.stats["queries"] += len(reqs)
                self.stats["max_batch"] = max(self.stats["max_batch"], len(reqs))
                for r, res in zip(reqs, results):
                    r.future.set_result(res)
            if stop:
                return


class ApiError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def _int_param(params: dict, name: str, default: int | None, lo: int, hi: int | None = None) -> int | None:
    raw = params.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(400, f"parameter '{name}' must be an integer, got {raw!r}") from None
    if value < lo or (hi is not None and value > hi):
        bounds = f"between {lo} and {hi}" if hi is not None else f"at least {lo}"
        raise ApiError(400, f"parameter '{name}' must be {bounds}, got {value}")
    return value


def _doc_payload(doc: dict | None, max_len: int | None) -> dict | None:
    if doc is None:
        return None
    text = doc["text"] if max_len is None else doc["text"][:max_len]
    return {"docid": doc["docid"], "title": doc.get("title", ""), "text": text}


class SearchService:
    """The request logic, independent of HTTP: index names -> searchers, token check, batching."""

    def __init__(self, searchers: dict[str, BaseSearcher], token: str | None = None, max_batch: int = 64,
                 max_wait: float = 0.002):
        self.searchers = searchers
        self.token = token
        self.batchers = {name: QueryBatcher(s, max_batch, max_wait) for name, s in searchers.items()}

    def authorized(self, header: str | None) -> bool:
        if not self.token:
            return True
        if not header or not header.startswith("Bearer "):
            return False
        return hmac.compare_digest(header[len("Bearer "):].strip().encode(), self.token.encode())

    def _searcher(self, name: str) -> BaseSearcher:
        if name not in self.searchers:
            raise ApiError(404, f"unknown index {name!r}; served: {', '.join(sorted(self.searchers))}")
        return self.searchers[name]

    def search(self, name: str, params: dict) -> dict:
        searcher = self._searcher(name)
        query = params.get("query")
        if query is None or not query.strip():
            raise ApiError(400, "parameter 'query' is required")
        hits = _int_param(params, "hits", 10, 1, MAX_HITS)
        max_len = _int_param(params, "max_doc_length", None, 0)
        reason = params.get("reason")  # present (even blank) -> reasoning-aware; blank reads as 'Empty'
        ranked = self.batchers[name].search(query, hits, reason)
        candidates = []
        for rank, (docid, score) in enumerate(ranked, start=1):
            doc = _doc_payload(searcher.get_document(docid), max_len)
            candidates.append({"docid": docid, "score": float(score), "rank": rank, "doc": doc})
        return {"api": "v1", "index": name, "query": {"text": query}, "candidates": candidates}

    def document(self, name: str, docid: str) -> dict:
        searcher = self._searcher(name)
        if not docid.strip():
            raise ApiError(400, "path parameter 'docid' is required")
        doc = searcher.get_document(docid)
        if doc is None:
            raise ApiError(404, f"document not found: {docid}")
        return {"api": "v1", "index": name, "docid": docid, "doc": _doc_payload(doc, None)}

    def close(self) -> None:
        for b in self.batchers.values():
            b.close()
        for s in self.searchers.values():
            s.close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: clients may reuse a connection
    service: SearchService
    verbose = False

    def log_message(self, fmt, *args):  # quiet unless asked
        if self.verbose:
            super().log_message(fmt, *args)

    def _send(self, status: int, payload: dict) -> None:
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802 (http.server's naming)
        try:
            if not self.service.authorized(self.headers.get("Authorization")):
                raise ApiError(401, "missing or wrong token: send 'Authorization: Bearer TOKEN'")
            url = urlsplit(self.path)
            params = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
            parts = url.path.strip("/").split("/")
            if parts == ["health"]:
                return self._send(200, {"status": "ok"})
            if parts == ["v1", "indexes"]:
                return self._send(200, {"indexes": sorted(self.service.searchers)})
            if len(parts) == 3 and parts[0] == "v1" and parts[2] == "search":
                return self._send(200, self.service.search(unquote(parts[1]), params))
            if len(parts) >= 4 and parts[0] == "v1" and parts[2] == "doc":
                return self._send(200, self.service.document(unquote(parts[1]), unquote("/".join(parts[3:]))))
            raise ApiError(404, f"no such endpoint {url.path!r}; use /v1/NAME/search or /v1/NAME/doc/DOCID")
        except ApiError as exc:
            self._send(exc.status, {"error": exc.message})
        except Exception as exc:  # a failing searcher must not kill the connection without an answer
            print(f"hopscotch serve: error: {type(exc).__name__}: {exc}", file=sys.stderr)
            self._send(500, {"error": f"{type(exc).__name__}: {exc}"})

    def _method_not_allowed(self):
        self.close_connection = True  # the request body was not read: do not reuse this connection
        self._send(405, {"error": f"method {self.command} not allowed; use GET"})

    do_POST = do_PUT = do_DELETE = do_PATCH = _method_not_allowed


class SearchHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def shutdown_and_close(self) -> None:
        self.shutdown()
        self.server_close()
        self.service.close()


def make_server(searchers: dict[str, BaseSearcher], host: str = "127.0.0.1", port: int = 8000,
                token: str | None = None, max_batch: int = 64, max_wait: float = 0.002,
                verbose: bool = False) -> SearchHTTPServer:
    """A ready (not yet serving) HTTP server; ``port=0`` picks a free port (see ``server.url``)."""
    service = SearchService(searchers, token=token, max_batch=max_batch, max_wait=max_wait)
    handler = type("Handler", (_Handler,), {"service": service, "verbose": verbose})
    server = SearchHTTPServer((host, port), handler)
    server.service = service
    return server


def serve_in_thread(server: SearchHTTPServer) -> threading.Thread:
    """Run ``server.serve_forever`` on a daemon thread (tests, notebooks); stop with ``shutdown_and_close``."""
    thread = threading.Thread(target=server.serve_forever, name="search-server", daemon=True)
    thread.start()
    return thread
