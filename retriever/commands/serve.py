"""``hopscotch serve``: a Pyserini-compatible REST search service over a BM25, dense or hybrid index.

    hopscotch serve --index DIR [--model M] [--bm25 DIR] [--host 127.0.0.1] [--port 8000] [--name NAME]
    hopscotch serve --searcher bm25 --bm25-index DIR --corpus FILE ...     (BM25 alone, no dense index)
    hopscotch serve ... --rerank-model M [--rerank-depth N] [--rerank-cache DIR]   (reranked by MaxSim)
    hopscotch serve --index DIR --bm25-url http://HOST/v1/NAME [--bm25-token T]    (hybrid, BM25 from an endpoint)

The searcher flags are the local backends' own (:mod:`hopscotch.retriever.searchers.registry`), as in
``hopscotch search`` (``--searcher`` is ``--searcher-type``, ``--bm25-index`` is ``--bm25``); the remote
client's flags are not offered (``--token`` and ``--name`` are the server's). A BM25 service without
``--index`` reads the documents it returns from ``--corpus`` (held in memory). ``--rerank-model M`` (with
``--rerank-depth N``, ...: every backend's flags, :mod:`hopscotch.retriever.searchers.rerank`) serves the
backend's top ``--rerank-depth`` reranked by MaxSim with a multi-vector model, over REST and MCP alike.

``reason`` (a request's reasoning, cmass's tool argument) is logged to stderr (``--no-reason-log``: not)
and encoded with the query only when the model reads reasoning: a trained reasoning-aware model, or any
model with ``--query-input VARIANT`` (the dense backend's flag, which also sets what ``reason`` becomes in
the encoder's ``Reasoning:`` slot; default: the trained model's own variant). A request carries only
``reason``, read as the step's full reasoning: ``current_reasoning`` then uses it whole (send the
reasoning since the last tool result), ``reasoning_tail:N`` keeps its end, ``reasoning_focus:N`` its
sentences related to the query, and ``prior_queries`` and ``with_documents`` see no earlier queries or
results (``prior_queries`` reads ``Empty``). Responses say whether it was used (``query.reason_used``).

The token (required under ``/v1/`` as ``Authorization: Bearer TOKEN`` or ``x-api-key: TOKEN``) comes
from ``$HOPSCOTCH_SERVE_TOKEN``, ``--token-file FILE`` or ``--token T``; the last is visible to every user
of the machine in ``ps``. ``--host ::`` listens on IPv6 and IPv4. Routes, errors and limits:
:mod:`hopscotch.retriever.serving.server`.
"""

from __future__ import annotations

import logging
import os
import sys

from hopscotch.retriever.commands.arg_groups import add_k_flag
from hopscotch.retriever.errors import UsageError
from hopscotch.retriever.searchers import add_searcher_arguments, searcher_from_args, searcher_names
from hopscotch.retriever.serving.bind_policy import warn_if_open
from hopscotch.retriever.serving.mcp_server import (
    DEFAULT_SNIPPET_TOKENIZER,
    MCP_PATH,
    TRANSPORTS,
    MCPOptions,
    MCPServeOptions,
    run_mcp,
)

TOKEN_ENV = "HOPSCOTCH_SERVE_TOKEN"


def register(sub) -> None:
    from hopscotch.retriever.serving.protocol import HttpLimits

    p = sub.add_parser("serve", help="serve an index over HTTP (Pyserini-compatible /v1 REST)",
                       description="Serve a BM25, dense or hybrid index over HTTP with Pyserini's /v1 search and "
                                   "document endpoints (OpenAPI at /openapi.yaml, /docs). A request's 'reason' is "
                                   "logged, and encoded with the query only when the model reads reasoning (a "
                                   "trained reasoning-aware model, or --query-input VARIANT); each response says "
                                   "which (query.reason_used). --rerank-model M reranks the backend's candidates "
                                   "by MaxSim with a multi-vector model.")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback only; '::' for IPv6 "
                                                        "and IPv4)")
    p.add_argument("--port", type=int, default=8000, help="TCP port to listen on (0: any free port)")
    p.add_argument("--token", help=f"require this token under /v1/ (default ${TOKEN_ENV}); visible to other users "
                                   f"in ps: prefer ${TOKEN_ENV} or --token-file")
    p.add_argument("--token-file", metavar="FILE", help="read the token from the first line of FILE")
    p.add_argument("--name", default="default", help="index name in the URL (/v1/NAME/...)")
    p.add_argument("--max-batch", type=int, default=64, help="most concurrent queries encoded together")
    p.add_argument("--idle-timeout", type=float, default=HttpLimits.idle_timeout,
                   help=f"seconds a connection may wait for its next request (default {HttpLimits.idle_timeout:g})")
    p.add_argument("--header-timeout", type=float, default=HttpLimits.header_timeout,
                   help="seconds from a request's first byte until it is complete, else 408 "
                        f"(default {HttpLimits.header_timeout:g})")
    p.add_argument("--max-in-flight", type=int, default=HttpLimits.max_in_flight,
                   help=f"/v1 requests answered at once; more get 503 (default {HttpLimits.max_in_flight})")
    p.add_argument("--threads", type=int, default=HttpLimits.threads,
                   help=f"threads that read documents; idle connections use none (default {HttpLimits.threads})")
    p.add_argument("--no-reason-log", action="store_true", help="do not log the requests' reason to stderr")
    p.add_argument("--verbose", action="store_true", help="log every request")
    p.add_argument("--searcher", dest="searcher_type", choices=searcher_names(local_only=True),
                   help="the searcher backend (same as --searcher-type)")
    p.add_argument("--bm25-index", dest="bm25", metavar="DIR", help="BM25 index folder (same as --bm25)")
    # --searcher-type, --index, --model, --bm25, --corpus, --fusion, --rerank-model, ...: the local backends' own flags
    add_searcher_arguments(p, local_only=True)
    _add_mcp_flags(p)  # --mcp, --transport, --k, --snippet-max-tokens, ...: MCP tools instead of REST
    p.set_defaults(func=run)


def _add_mcp_flags(parser) -> None:
    """``hopscotch serve``'s MCP flags (BrowseComp-Plus's ``mcp_server.py`` names and defaults); ``--k`` and
    ``--snippet-max-tokens`` stay plain integers, checked when the server starts
    (:class:`~hopscotch.retriever.serving.mcp_server.MCPOptions`: ``--k 0: give at least 1``)."""
    g = parser.add_argument_group("MCP (--mcp)")
    g.add_argument("--mcp", action="store_true", help="serve MCP tools search and get_document instead of REST")
    g.add_argument("--transport", choices=TRANSPORTS, help="MCP transport (implies --mcp; default sse); the HTTP "
                                                           f"ones listen at http://HOST:PORT{MCP_PATH}")
    add_k_flag(g, type=int, help=f"MCP: hits per search (default {MCPOptions.k})")
    g.add_argument("--snippet-max-tokens", type=int,
                   help=f"MCP: tokens of each hit's text shown as its snippet (default {MCPOptions.snippet_max_tokens}; "
                        "-1: whole text)")
    g.add_argument("--snippet-tokenizer",
                   help="MCP: tokenizer that counts snippet tokens: a folder, minilm, or a hub name in the local "
                        f"Hugging Face cache (default {DEFAULT_SNIPPET_TOKENIZER}, as BrowseComp-Plus, when it is "
                        "cached; else the bundled minilm, with a note)")
    g.add_argument("--no-get-document", action="store_true", help="MCP: register the search tool only")


def resolve_token(args) -> str | None:
    """``--token``, else the first line of ``--token-file``, else ``$HOPSCOTCH_SERVE_TOKEN`` (None: no token)."""
    if args.token and args.token_file:
        raise UsageError("give --token or --token-file, not both")
    if args.token_file:
        try:
            with open(args.token_file, encoding="utf-8") as fh:
                token = fh.readline().strip()
        except OSError as exc:
            raise UsageError(f"--token-file {args.token_file}: {exc.strerror or exc}") from None
        if not token:
            raise UsageError(f"--token-file {args.token_file}: the first line is empty")
        return token
    return args.token or os.environ.get(TOKEN_ENV) or None


def _check_documents(args) -> None:
    """A BM25-only service needs documents to return: ``--corpus`` (or ``--index``'s docstore)."""
    bm25, index = getattr(args, "bm25", None), getattr(args, "index", None)
    kind = getattr(args, "searcher_type", None) or ("bm25" if bm25 and not index else None)
    if kind == "bm25" and not index and not getattr(args, "corpus", None):
        raise UsageError("a BM25 service needs the documents it returns: add --corpus FILE (the corpus the BM25 "
                         "index was built from) or --index DIR (a dense index's docstore)")


def _setup_logging(args) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("hopscotch serve: %(name)s: %(message)s"))
    reasons = logging.getLogger("hopscotch.serve.reason")
    reasons.propagate = False
    if not args.no_reason_log:
        reasons.addHandler(handler)
        reasons.setLevel(logging.INFO)
    if args.verbose:
        for name in ("hopscotch.serve", "uvicorn.error", "uvicorn.access"):
            logging.getLogger(name).addHandler(handler)
            logging.getLogger(name).setLevel(logging.INFO)


#: the MCP tools' flags (``--mcp``): a REST service, which takes ``hits=`` per request, has no use for them
MCP_ONLY = {"k": "--k", "snippet_max_tokens": "--snippet-max-tokens", "snippet_tokenizer": "--snippet-tokenizer",
            "no_get_document": "--no-get-document"}


def build_server(args):
    """The bound (not yet serving) REST server ``args`` describe (its searcher built by the registry, reranked
    with ``--rerank-model``); UsageError for a bad flag or a busy port."""
    from hopscotch.retriever.serving.server import HttpLimits, make_server

    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: not a TCP port")
    if "/" in args.name or not args.name.strip():
        raise UsageError(f"--name {args.name!r}: use a non-empty name without '/'")
    try:
        limits = HttpLimits(idle_timeout=args.idle_timeout, header_timeout=args.header_timeout,
                            max_in_flight=args.max_in_flight, threads=args.threads)
    except ValueError as exc:
        raise UsageError(str(exc).replace("_", "-")) from None
    if args.max_batch < 1:
        raise UsageError(f"--max-batch {args.max_batch}: give at least 1")
    given = [flag for dest, flag in MCP_ONLY.items() if getattr(args, dest, None) not in (None, False)]
    if given:
        raise UsageError(f"{given[0]} applies to the MCP tools (--mcp) only, not to the REST service (whose requests "
                         "give hits=): add --mcp, or drop it")
    _check_documents(args)
    warn_if_open(args.host, args.token)
    searcher = searcher_from_args(args, local_only=True)
    try:
        return make_server({args.name: searcher}, host=args.host, port=args.port, token=args.token,
                           max_batch=args.max_batch, verbose=args.verbose, limits=limits)
    except OSError as exc:
        searcher.close()
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None


def run(args) -> int:
    args.token = resolve_token(args)
    if args.mcp or args.transport:  # MCP: --mcp or a --transport
        given = {"k": args.k, "snippet_max_tokens": args.snippet_max_tokens}
        tools = MCPOptions(**{k: v for k, v in given.items() if v is not None}, get_document=not args.no_get_document)
        serve = MCPServeOptions(transport=args.transport, host=args.host, port=args.port, token=args.token,
                                verbose=args.verbose, snippet_tokenizer=args.snippet_tokenizer, tools=tools)
        return run_mcp(serve, lambda: searcher_from_args(args, local_only=True))
    server = build_server(args)
    searcher = server.service.searchers[args.name]
    _setup_logging(args)
    variant = server.service.query_input(args.name)
    print("hopscotch serve: 'reason' is " + (f"used with the query ({variant})" if variant else
          "logged only: this searcher does not read reasoning (--query-input VARIANT makes a dense model read it; "
          "BM25 expands with it unless --bm25-reasoning query)"), file=sys.stderr)
    parts = (getattr(args, "bm25", None), getattr(args, "bm25_url", None), getattr(args, "index", None))
    where = " + ".join(str(p) for p in parts if p)
    print(f"serving {searcher.name} index {where} as '{args.name}' on {server.url}/v1/{args.name}/search"
          + (" (token required)" if args.token else ""), file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
        server.executor.shutdown(wait=False)
        server.service.close()
    return 0
