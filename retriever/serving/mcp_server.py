"""An MCP server over a Hopscotch searcher: BrowseComp-Plus's ``searcher/mcp_server.py`` tools, official SDK.

    hopscotch serve --mcp [--transport sse|stdio|streamable-http] [--k 5] [--snippet-max-tokens 512]
                    [--snippet-tokenizer Qwen/Qwen3-0.6B] [--no-get-document] --index DIR | --bm25 DIR ...
                    [--rerank-model M ...]      (the searcher's hits reranked by MaxSim, as in hopscotch search)

Tools (as BrowseComp-Plus registers them; built with :func:`build_mcp_server`):

* ``search(query, reason?)``: the top ``k`` hits as ``[{"docid", "score", "snippet"}]``, the text an agent
  reads being that list as indented JSON (BrowseComp-Plus's own tool output); ``snippet`` is the hit's
  ``text`` cut to ``snippet_max_tokens`` tokens of the snippet tokenizer (BrowseComp-Plus: Qwen3-0.6B's;
  ``<= 0``: the whole text). ``reason`` is the agent's reasoning (blank: none): it is passed to the searcher
  only when the loaded model reads reasoning (:attr:`~hopscotch.retriever.searchers.base.BaseSearcher.takes_reasoning`),
  otherwise it is logged and ignored; the tool description says which.
* ``get_document(docid)``: ``{"docid", "text"[, "title"]}``; an unknown docid is an error result
  ``{"error": "Document with docid '...' not found"}``. Left out with ``--no-get-document``.

Transports: ``stdio``, ``sse`` (BrowseComp-Plus's default) and ``streamable-http``, the HTTP ones at
``http://HOST:PORT/mcp`` (``serve``'s ``--host``/``--port``), with ``--token`` required as
``Authorization: Bearer TOKEN`` or ``x-api-key: TOKEN`` when given. Searches run one at a time (the tool
functions run on worker threads; the searcher is not assumed thread-safe). The SDK is the optional
dependency ``mcp`` (``pip install 'hopscotch[serve]'``); this module imports it only when a server is built.

Example (not run: it needs an index and the mcp package)::

    server = build_mcp_server(build_searcher("bm25", bm25="idx/bm25", corpus="corpus.jsonl"),
                              MCPOptions(k=5, snippet_max_tokens=-1))
    server.run("stdio")
"""

import contextlib
import json
import logging
import socket
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.model.loading import MODEL_ALIASES, resolve_model_path
from hopscotch.retriever.searchers.base import BaseSearcher
from hopscotch.retriever.serving.bind_policy import warn_if_open
from hopscotch.retriever.serving.service import token_matches

TRANSPORTS = ("stdio", "sse", "streamable-http")
#: where the HTTP transports listen (BrowseComp-Plus serves both at /mcp)
MCP_PATH = "/mcp"
#: BrowseComp-Plus's snippet tokenizer
DEFAULT_SNIPPET_TOKENIZER = "Qwen/Qwen3-0.6B"

logger = logging.getLogger("hopscotch.mcp")


@dataclass
class MCPOptions:
    """:param k: hits per search (BrowseComp-Plus's ``--k``)
    :param snippet_max_tokens: tokens of each hit's text kept as its snippet (``<= 0``: the whole text)
    :param get_document: register the ``get_document`` tool too
    :param name: the server name clients see"""

    k: int = 5
    snippet_max_tokens: int = 512
    get_document: bool = True
    name: str = "search-server"


def load_snippet_tokenizer(name: str):
    """The tokenizer that cuts snippets: ``minilm``, a local folder, or a hub name already in the local Hugging
    Face cache (models are never downloaded at run time); UsageError when it cannot be loaded."""
    from transformers import AutoTokenizer

    local = str(name).lower() in MODEL_ALIASES or Path(name).is_dir()
    try:
        return AutoTokenizer.from_pretrained(resolve_model_path(name) if local else name, local_files_only=True)
    except (OSError, ValueError) as exc:
        where = "" if local else " (not in the local Hugging Face cache; models are never downloaded at run time)"
        raise UsageError(f"cannot load the snippet tokenizer {name!r}{where}: {str(exc).splitlines()[0]}; pass "
                         "--snippet-tokenizer DIR (or minilm) or --snippet-max-tokens -1") from None


def default_or_named_tokenizer(name: str | None):
    """``name``'s tokenizer; without a name BrowseComp-Plus's (:data:`DEFAULT_SNIPPET_TOKENIZER`) when it is in
    the local cache, else the bundled MiniLM's (a fresh machine downloads nothing), saying so on stderr."""
    if name is not None:
        return load_snippet_tokenizer(name)
    try:
        return load_snippet_tokenizer(DEFAULT_SNIPPET_TOKENIZER)
    except UsageError:
        print(f"note: {DEFAULT_SNIPPET_TOKENIZER} is not in the local Hugging Face cache: snippets are cut in "
              "minilm tokens (--snippet-tokenizer picks another)", file=sys.stderr)
        return load_snippet_tokenizer("minilm")


def cut_snippet(text: str, tokenizer, max_tokens: int) -> str:
    """``text`` cut to its first ``max_tokens`` tokens (decoded without special tokens), as BrowseComp-Plus
    cuts snippets; the text itself when it is not longer, ``max_tokens <= 0`` or there is no tokenizer."""
    if tokenizer is None or max_tokens <= 0:
        return text
    tokens = tokenizer.encode(text, add_special_tokens=False)
    if len(tokens) <= max_tokens:
        return text
    return tokenizer.decode(tokens[:max_tokens], skip_special_tokens=True)


class SearchTools:
    """The tools' logic, independent of MCP: what ``search`` and ``get_document`` return for a searcher."""

    def __init__(self, searcher: BaseSearcher, options: MCPOptions | None = None, tokenizer=None):
        self.searcher, self.options, self.tokenizer = searcher, options or MCPOptions(), tokenizer
        if self.options.k < 1:
            raise UsageError(f"--k {self.options.k}: give at least 1")
        if self.options.snippet_max_tokens > 0 and tokenizer is None:
            raise UsageError("snippets of --snippet-max-tokens tokens need a tokenizer (--snippet-tokenizer)")
        self._lock = threading.Lock()

    def search_description(self) -> str:
        note = ("Optionally pass 'reason': your reasoning so far (why you search and what you look for); this "
                "retriever reads it together with the query." if self.searcher.takes_reasoning else
                "A 'reason' argument is accepted but ignored: this retriever matches the query alone.")
        return f"{self.searcher.search_description(self.options.k)} {note}"

    def search(self, query: str, reason: str | None = None) -> list[dict[str, Any]]:
        """``[{"docid", "score", "snippet"}]`` for the top ``k`` hits (``score`` left out when None)."""
        reasoning = None
        if reason is not None and reason.strip():
            if self.searcher.takes_reasoning:
                reasoning = reason
            else:
                logger.info("search %r: 'reason' ignored (the model does not read reasoning)", query)
        with self._lock:
            hits = self.searcher.search(query, self.options.k, reasoning=reasoning)
        out = []
        for hit in hits:
            snippet = cut_snippet(hit["text"], self.tokenizer, self.options.snippet_max_tokens)
            score = hit.get("score")
            out.append({"docid": hit["docid"], "snippet": snippet} if score is None else
                       {"docid": hit["docid"], "score": score, "snippet": snippet})
        return out

    def get_document(self, docid: str) -> dict[str, Any] | None:
        with self._lock:
            return self.searcher.get_document(docid)


def _require_sdk():
    try:
        from mcp.server.mcpserver import MCPServer
    except ImportError:
        raise UsageError("hopscotch serve --mcp needs the MCP Python SDK 2.x: pip install 'hopscotch[serve]' "
                         "(or pip install 'mcp>=2')") from None
    return MCPServer


def build_mcp_server(searcher: BaseSearcher, options: MCPOptions | None = None, tokenizer=None,
                     log_level: str = "WARNING"):
    """An ``mcp.server.mcpserver.MCPServer`` with the ``search`` (and ``get_document``) tools over ``searcher``."""
    server_class = _require_sdk()
    from mcp.types import CallToolResult, TextContent
    from pydantic import Field

    tools = SearchTools(searcher, options, tokenizer)
    server = server_class(name=tools.options.name, log_level=log_level)

    def text_result(payload, is_error: bool = False, structured=None) -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text=json.dumps(payload, indent=2))],
                              structured_content=structured, is_error=is_error)

    @server.tool(name="search", description=tools.search_description())
    def search(query: Annotated[str, Field(description="Search query string")],
               reason: Annotated[str | None, Field(description="Optional: your reasoning behind this search")] = None
               ) -> CallToolResult:
        results = tools.search(query, reason)
        return text_result(results, structured={"result": results})

    if tools.options.get_document:
        @server.tool(name="get_document", description=searcher.get_document_description())
        def get_document(docid: Annotated[str, Field(description="Document ID to retrieve")]) -> CallToolResult:
            doc = tools.get_document(docid)
            if doc is None:
                return text_result({"error": f"Document with docid '{docid}' not found"}, is_error=True)
            return text_result(doc, structured=doc)

    return server


class BearerAuth:
    """ASGI middleware: HTTP requests need ``Authorization: Bearer TOKEN`` (the scheme in any case, RFC 7235)
    or ``x-api-key: TOKEN`` (else 401), checked by the REST service's own
    :func:`~hopscotch.retriever.serving.service.token_matches`."""

    def __init__(self, app, token: str):
        self.app, self.token = app, token

    def authorized(self, headers: dict[bytes, bytes]) -> bool:
        text = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in headers.items()}
        return bool(self.token) and token_matches(text, self.token)

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and not self.authorized(dict(scope.get("headers") or [])):
            body = json.dumps({"error": "missing or wrong token"}).encode()
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


@dataclass(frozen=True)
class MCPServeOptions:
    """How ``hopscotch serve --mcp`` serves: :param transport: ``stdio``, ``sse`` or ``streamable-http`` (None:
    ``sse``); :param host, port: where an HTTP transport listens; :param token: the bearer token it requires (None:
    none); :param verbose: log each request; :param snippet_tokenizer: the tokenizer snippets are cut with (None:
    the default); :param tools: the tools' options (:class:`MCPOptions`)."""

    transport: str | None = None
    host: str = "127.0.0.1"
    port: int = 8000
    token: str | None = None
    verbose: bool = False
    snippet_tokenizer: str | None = None
    tools: MCPOptions = field(default_factory=MCPOptions)


def run_mcp(serve: MCPServeOptions, load_searcher: Callable[[], BaseSearcher]) -> int:
    """``hopscotch serve --mcp``: the searcher ``load_searcher()`` builds, served as ``serve`` says until
    interrupted (loaded after the checks of ``serve``, its prints sent to stderr: stdout is stdio's wire)."""
    transport = serve.transport or "sse"
    _require_sdk()
    if transport != "stdio" and not 0 <= serve.port <= 65535:
        raise UsageError(f"--port {serve.port}: not a TCP port")
    if transport != "stdio":
        warn_if_open(serve.host, serve.token)
    options = serve.tools
    # stdout is the stdio transport's wire: anything loading prints goes to stderr
    with contextlib.redirect_stdout(sys.stderr):
        tokenizer = default_or_named_tokenizer(serve.snippet_tokenizer) if options.snippet_max_tokens > 0 else None
        searcher = load_searcher()
    server = build_mcp_server(searcher, options, tokenizer, log_level="INFO" if serve.verbose else "WARNING")
    sock = None if transport == "stdio" else _listen(serve.host, serve.port)
    tools = "search" + (", get_document" if options.get_document else "")
    where = "stdio" if sock is None else f"http://{serve.host}:{sock.getsockname()[1]}{MCP_PATH}"
    print(f"hopscotch serve: MCP server with {searcher.search_type} search (k={options.k}, snippet_max_tokens="
          f"{options.snippet_max_tokens}, reason {'used' if searcher.takes_reasoning else 'ignored'}), tools: "
          f"{tools}, transport {transport} at {where}" + (" (token required)" if serve.token else ""),
          file=sys.stderr, flush=True)
    try:
        if sock is None:
            server.run("stdio")
        else:
            _serve_http(server, transport, sock, serve.host, serve.token, serve.verbose)
    finally:
        searcher.close()
        if sock is not None:
            sock.close()
    return 0


def _listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket (port 0: any free port), or UsageError."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)  # connections wait in the backlog until the server starts accepting
    except OSError as exc:
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def _serve_http(server, transport: str, sock: socket.socket, host: str, token: str | None, verbose: bool) -> None:
    import uvicorn

    if transport == "sse":
        app = server.sse_app(sse_path=MCP_PATH, host=host)
    else:
        app = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
    if token:
        app = BearerAuth(app, token)
    uvicorn.Server(uvicorn.Config(app, log_level="info" if verbose else "warning")).run(sockets=[sock])
