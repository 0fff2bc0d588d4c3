"""``hopscotch serve``: a Pyserini-compatible REST search service over a dense, hybrid or BM25 index.

    hopscotch serve --index DIR [--model M] [--bm25 DIR] [--host 127.0.0.1] [--port 8000] [--token T]
                    [--name NAME]
    hopscotch serve --bm25 DIR [--corpus FILE] ...

The searcher flags are the local backends' own (:mod:`hopscotch.retriever.searchers.registry`), as in
``hopscotch search``; the remote client's flags are not offered (``--token`` and ``--name`` are the server's).
``--query-input VARIANT`` (the dense backend's) sets what a request's ``reason`` becomes in the encoder's
``Reasoning:`` slot (default: the trained model's own variant, else ``reasoning``). A request carries only
``reason``, read as the step's full reasoning: ``current_reasoning`` then uses it whole (send the
reasoning since the last tool result), ``reasoning_tail:N`` keeps its end, and ``prior_queries`` and
``with_documents`` see no earlier queries or results (``prior_queries`` reads ``Empty``).

``GET /v1/NAME/search?query=...&hits=10&max_doc_length=500[&reason=...]`` and ``GET /v1/NAME/doc/DOCID``;
see :mod:`hopscotch.retriever.serving.server`. The token may also come from ``$HOPSCOTCH_SERVE_TOKEN``.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys


def register(sub) -> None:
    from hopscotch.retriever.searchers import add_searcher_arguments

    p = sub.add_parser("serve", help="serve an index over HTTP (Pyserini-compatible /v1 REST)",
                       description="Serve a dense index (hybrid with --bm25), or a BM25 index alone, over HTTP "
                                   "with the Pyserini /v1 search and document endpoints.")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback only)")
    p.add_argument("--port", type=int, default=8000, help="TCP port to listen on (0: any free port)")
    p.add_argument("--token", default=os.environ.get("HOPSCOTCH_SERVE_TOKEN"),
                   help="require 'Authorization: Bearer TOKEN' (default $HOPSCOTCH_SERVE_TOKEN)")
    p.add_argument("--name", default="default", help="index name in the URL (/v1/NAME/...)")
    p.add_argument("--max-batch", type=int, default=64, help="most concurrent queries encoded together")
    p.add_argument("--verbose", action="store_true", help="log every request")
    # --searcher-type, --index, --model, --bm25, --fusion, ...: the local backends' own flags
    add_searcher_arguments(p, local_only=True)
    p.set_defaults(func=run)


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(socket.gethostbyname(host)).is_loopback
    except (OSError, ValueError):
        return False


def run(args) -> int:
    from hopscotch.retriever.errors import UsageError
    from hopscotch.retriever.searchers import searcher_from_args
    from hopscotch.retriever.serving.server import make_server

    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: not a TCP port")
    if "/" in args.name or not args.name.strip():
        raise UsageError(f"--name {args.name!r}: use a non-empty name without '/'")
    if not _is_loopback(args.host) and not args.token:
        print(f"hopscotch serve: warning: binding {args.host} without --token: anyone who can reach this "
              "machine can query the index", file=sys.stderr)
    searcher = searcher_from_args(args, local_only=True)
    try:
        server = make_server({args.name: searcher}, host=args.host, port=args.port, token=args.token,
                             max_batch=args.max_batch, verbose=args.verbose)
    except OSError as exc:
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    variant = getattr(getattr(searcher, "dense", searcher), "query_input", None)
    if variant is not None:
        print(f"hopscotch serve: queries with 'reason' are encoded as query input {variant}", file=sys.stderr)
    print(f"serving {searcher.name} index {args.index or args.bm25} as '{args.name}' on {server.url}/v1/{args.name}/search"
          + (" (token required)" if args.token else ""), file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
        server.service.close()
    return 0
