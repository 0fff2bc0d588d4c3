"""A Pyserini-compatible REST search service over Hopscotch searchers (FastAPI on uvicorn).

Endpoints (``NAME`` is the served index name, ``default`` unless ``--name`` says otherwise)::

    GET /v1/NAME/search?query=...&hits=10[&parse=true][&max_doc_length=500][&reason=...]
        -> {"api": "v1", "index": NAME, "query": {"text": ...}, "candidates": [{"docid", "score", "rank", "doc"}]}
    GET /v1/NAME/doc/DOCID   -> {"api": "v1", "index": NAME, "docid": ..., "doc": ...}
    GET /v1/indexes          -> {"indexes": [NAME, ...], "details": {...}}
    GET /health, GET /, GET /openapi.yaml, GET /docs

``doc`` is a string (the document's text, ``title\\ntext`` with a title; ``parse=false``: the stored record
as JSON); ``reason`` is logged, and encoded with the query only on a reasoning-aware model (the response's
``query.reason_used`` says which): see :mod:`hopscotch.retriever.serving.service`. Errors are JSON
``{"error": message}`` for every method and status: 400 bad parameter or unknown index, 401 missing or
wrong token (only under ``/v1/``, ``Authorization: Bearer TOKEN`` or ``x-api-key: TOKEN``), 404 unknown
document or route, 405 a method other than GET/HEAD, 408 a request that does not arrive in time, 413 a
request body, 503 too many requests in flight. The layers: :mod:`.batcher` (the micro-batcher),
:mod:`.service` (request logic), :mod:`.app` (HTTP), :mod:`.protocol` (connections and timeouts).
Requests arriving together are batched into one encoder call by a :class:`QueryBatcher` per index.

Example (not run: it needs a dense index)::

    server = make_server({"default": DenseSearcher("index_dir")}, port=8000, token="s3cret")
    server.serve_forever()                  # or serve_in_thread(server); server.shutdown_and_close()
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

from hopscotch.retriever.searchers.base import BaseSearcher
from hopscotch.retriever.serving.app import create_app
from hopscotch.retriever.serving.batcher import QueryBatcher
from hopscotch.retriever.serving.protocol import HttpLimits, guarded_protocol
from hopscotch.retriever.serving.service import MAX_HITS, ApiError, SearchService

__all__ = ["MAX_HITS", "ApiError", "HttpLimits", "QueryBatcher", "SearchServer", "SearchService", "listen",
           "make_server", "serve_in_thread"]


def listen(host: str, port: int, backlog: int = HttpLimits.backlog) -> socket.socket:
    """A listening TCP socket on ``host`` (IPv4 or IPv6; ``::`` also takes IPv4) and ``port`` (0: any free
    port); OSError when the address cannot be bound."""
    family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind(address)
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    return sock


class SearchServer:
    """A bound, not yet serving, search service: :meth:`serve_forever` runs it on the calling thread until
    :meth:`shutdown` (from another thread); :meth:`shutdown_and_close` also releases the searchers."""

    def __init__(self, service: SearchService, sock: socket.socket, limits: HttpLimits, verbose: bool = False):
        import uvicorn

        self.service, self.socket, self.limits = service, sock, limits
        self.executor = ThreadPoolExecutor(max_workers=limits.threads, thread_name_prefix="hopscotch-serve")
        config = uvicorn.Config(
            create_app(service, limits, self.executor), http=guarded_protocol(limits), ws="none", lifespan="off",
            interface="asgi3", log_config=None, log_level=logging.INFO if verbose else logging.WARNING,
            access_log=verbose, server_header=False, proxy_headers=False, timeout_keep_alive=limits.idle_timeout,
            timeout_graceful_shutdown=5, h11_max_incomplete_event_size=limits.max_header_bytes,
            backlog=limits.backlog)
        self._server = uvicorn.Server(config)
        self._stopped = threading.Event()
        self._running = False

    @property
    def server_address(self) -> tuple:
        return self.socket.getsockname()

    @property
    def url(self) -> str:
        """``http://HOST:PORT`` of the listening socket (IPv6 hosts in brackets)."""
        host, port = self.server_address[:2]
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    @property
    def started(self) -> bool:
        return self._server.started

    def serve_forever(self) -> None:
        """Serve until :meth:`shutdown` (or SIGINT/SIGTERM when run on the main thread)."""
        self._running = True
        try:
            self._server.run(sockets=[self.socket])
        finally:
            self._stopped.set()

    def shutdown(self, timeout: float = 30) -> None:
        """Stop serving (idle connections are closed, answers in progress finish) and wait for it."""
        self._server.should_exit = True
        if self._running:
            self._stopped.wait(timeout)

    def server_close(self) -> None:
        self.socket.close()

    def shutdown_and_close(self) -> None:
        self.shutdown()
        self.server_close()
        self.executor.shutdown(wait=False, cancel_futures=True)
        self.service.close()


def make_server(searchers: Mapping[str, BaseSearcher], host: str = "127.0.0.1", port: int = 8000,
                token: str | None = None, max_batch: int = 64, max_wait: float = 0.002, verbose: bool = False,
                limits: HttpLimits | None = None) -> SearchServer:
    """A bound (not yet serving) search server; ``port=0`` picks a free port (see ``server.url``).
    OSError when the address cannot be bound."""
    limits = limits or HttpLimits()
    sock = listen(host, port, limits.backlog)
    try:
        service = SearchService(searchers, token=token, max_batch=max_batch, max_wait=max_wait)
    except BaseException:
        sock.close()
        raise
    return SearchServer(service, sock, limits, verbose)


def serve_in_thread(server: SearchServer, timeout: float = 30) -> threading.Thread:
    """Run ``server.serve_forever`` on a daemon thread (tests, notebooks, benchmarks) and return once it
    accepts requests; stop it with ``shutdown_and_close``."""
    thread = threading.Thread(target=server.serve_forever, name="search-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the search server did not start")
        time.sleep(0.01)
    return thread
