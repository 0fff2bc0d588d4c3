"""The HTTP layer: a FastAPI app over a :class:`~hopscotch.retriever.serving.service.SearchService`.

Routes (Pyserini's ``/v1`` plus a few of its service routes)::

    GET /                       {"name", "version", "description", "openapi", "documentation"}
    GET /health                 {"status": "ok"}
    GET /openapi.yaml           the contract (YAML); /openapi.json the same as JSON; /docs Swagger UI
    GET /v1/indexes             {"indexes": [NAME, ...], "details": {...}}
    GET /v1/NAME/search?query=&hits=10&parse=true&max_doc_length=&reason=
    GET /v1/NAME/doc/DOCID?parse=true&max_doc_length=

:class:`Guard`, the outermost layer, answers before any route: methods other than GET and HEAD (405),
request bodies over the limit or chunked (413, connection closed), a request line and headers over
``max_header_bytes`` (431; h11 itself answers 400 while they are still arriving), missing or wrong credentials under
``/v1/`` (401; ``x-api-key: T`` or ``Authorization: Bearer T``, the scheme in any case), more than
``max_in_flight`` concurrent ``/v1/`` requests (503 with ``Retry-After``); and it turns any failure into
a JSON 500. Every answer is JSON (``{"error": message}`` for errors) except ``/openapi.yaml`` and
``/docs``; HEAD answers as GET without the body. Searches wait on the batcher without holding a thread;
document reads run on a bounded thread pool.
"""

from __future__ import annotations

import asyncio
import json
import logging
from concurrent.futures import Executor
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException

from hopscotch.retriever.serving.openapi import openapi_spec, openapi_yaml
from hopscotch.retriever.serving.protocol import HttpLimits
from hopscotch.retriever.serving.service import API_VERSION, ApiError, SearchService

log = logging.getLogger("hopscotch.serve")

ROUTE_ERROR = "Expected route /v1/{index}/search, /v1/{index}/doc/{docid} or /v1/indexes"
ALLOWED_METHODS = "GET, HEAD"
SEARCH_TIMEOUT = 300.0


def json_bytes(payload: Any) -> bytes:
    return json.dumps(payload, ensure_ascii=False).encode("utf-8")


async def send_json(send, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
    """Send a whole JSON response through an ASGI ``send``."""
    body = json_bytes(payload)
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    head += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body})


class Guard:
    """ASGI middleware that applies the service's method, body, credential and concurrency rules."""

    def __init__(self, app, service: SearchService, limits: HttpLimits):
        self.app, self.service, self.limits = app, service, limits
        self.in_flight = 0  # touched only on the event loop's thread

    def refusal(self, method: str, path: str, headers: dict[str, str], head_bytes: int = 0) -> ApiError | None:
        """The error a request gets before routing (``head_bytes``: its target and headers), or None."""
        if head_bytes > self.limits.max_header_bytes:
            return ApiError(431, f"Request line and headers too large (at most {self.limits.max_header_bytes} bytes)",
                            {"connection": "close"})
        length = headers.get("content-length", "0").strip() or "0"
        unbounded = "transfer-encoding" in headers or not length.isdigit() or int(length) > self.limits.max_body
        close = {"connection": "close"} if unbounded else {}
        if method not in ("GET", "HEAD"):
            return ApiError(405, f"Method {method} not allowed: only GET (and HEAD) are supported",
                            {"allow": ALLOWED_METHODS, **close})
        if unbounded:
            return ApiError(413, f"Request body too large (at most {self.limits.max_body} bytes; requests need none)",
                            close)
        if (path == "/" + API_VERSION or path.startswith(f"/{API_VERSION}/")) and not self.service.authorized(headers):
            return ApiError(401, "Unauthorized: send 'Authorization: Bearer TOKEN' or 'x-api-key: TOKEN'",
                            {"www-authenticate": "Bearer"})
        return None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = False

        async def tracked(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        counted = False
        try:
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
            size = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"")
            size += sum(len(k) + len(v) + 4 for k, v in scope["headers"])
            refused = self.refusal(scope["method"], scope["path"], headers, size)
            if refused is not None:
                return await send_json(tracked, refused.status, {"error": refused.message}, refused.headers)
            if scope["path"].startswith(f"/{API_VERSION}/"):
                if self.in_flight >= self.limits.max_in_flight:
                    return await send_json(tracked, 503, {"error": "Server busy: too many requests in flight; "
                                                                   "retry later"}, {"retry-after": "1"})
                self.in_flight += 1
                counted = True
            if scope["method"] == "HEAD":  # routed as GET; the server drops the body
                scope = {**scope, "method": "GET"}
            await self.app(scope, receive, tracked)
        except Exception as exc:  # noqa: BLE001 - the client gets JSON whatever failed
            if not started:
                log.error("error answering %s %s: %s: %s", scope.get("method"), scope.get("path"),
                          type(exc).__name__, exc)
                await send_json(tracked, 500, {"error": f"{type(exc).__name__}: {exc}"})
        finally:
            if counted:
                self.in_flight -= 1


def create_app(service: SearchService, limits: HttpLimits, executor: Executor):
    """The ASGI app: :class:`Guard` around the FastAPI routes."""
    app = FastAPI(title="Hopscotch search API", version=API_VERSION, docs_url="/docs", redoc_url=None,
                  openapi_url="/openapi.json")
    app.openapi = openapi_spec

    def answer(payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
        return Response(json_bytes(payload), status_code=status, media_type="application/json", headers=headers)

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError):
        return answer({"error": exc.message}, exc.status, exc.headers)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException):
        message = ROUTE_ERROR if exc.status_code == 404 else str(exc.detail)
        return answer({"error": message}, exc.status_code, dict(exc.headers or {}) or None)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError):
        return answer({"error": json.dumps(exc.errors(), default=str)}, 400)

    @app.exception_handler(Exception)
    async def failure(request: Request, exc: Exception):
        log.error("error answering %s: %s: %s", request.url.path, type(exc).__name__, exc)
        return answer({"error": f"{type(exc).__name__}: {exc}"}, 500)

    @app.get("/", include_in_schema=False)
    async def root():
        return answer({"name": "Hopscotch search API", "version": API_VERSION,
                       "description": "Pyserini-compatible REST search: GET /v1/{index}/search?query=... and "
                                      "GET /v1/{index}/doc/{docid}",
                       "openapi": "/openapi.yaml", "documentation": "/docs"})

    @app.get("/health", include_in_schema=False)
    async def health():
        return answer({"status": "ok"})

    @app.get("/openapi.yaml", include_in_schema=False)
    async def spec_yaml():
        return Response(openapi_yaml(), media_type="application/yaml")

    @app.get(f"/{API_VERSION}/indexes", include_in_schema=False)
    async def indexes():
        return answer(service.indexes())

    # the two hot routes are plain Starlette routes: no per-request dependency solving
    async def search(request: Request):
        req = service.parse_search(request.path_params["index"], dict(request.query_params))
        ranked = await asyncio.wait_for(asyncio.wrap_future(service.submit(req)), SEARCH_TIMEOUT)
        body = await asyncio.get_running_loop().run_in_executor(executor, service.render_search, req, ranked)
        return answer(body)

    async def document(request: Request):
        index, docid = request.path_params["index"], request.path_params["docid"]
        params = dict(request.query_params)
        body = await asyncio.get_running_loop().run_in_executor(executor, service.document, index, docid, params)
        return answer(body)

    app.add_route(f"/{API_VERSION}/{{index}}/search", search, methods=["GET"], include_in_schema=False)
    app.add_route(f"/{API_VERSION}/{{index}}/doc/{{docid:path}}", document, methods=["GET"], include_in_schema=False)
    return Guard(app, service, limits)
