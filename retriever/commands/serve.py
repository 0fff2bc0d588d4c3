"""``hopscotch serve``: a Pyserini-compatible REST search service over a dense (or hybrid) index.

    hopscotch serve --index DIR [--model M] [--bm25 DIR] [--host 127.0.0.1] [--port 8000] [--token T]
                    [--name NAME]

``GET /v1/NAME/search?query=...&hits=10&max_doc_length=500[&reason=...]`` and ``GET /v1/NAME/doc/DOCID``;
see :mod:`hopscotch.retriever.serving.server`. The token may also come from ``$HOPSCOTCH_SERVE_TOKEN``.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys


def register(sub) -> None:
    p = sub.add_parser("serve", help="serve an index over HTTP (Pyserini-compatible /v1 REST)",
                       description="Serve a dense index (hybrid with --bm25) over HTTP with the Pyserini /v1 "
                                   "search and document endpoints.")
    p.add_argument("--index", required=True, help="dense index folder (hopscotch index)")
    p.add_argument("--model", help="query encoder (default: the model recorded in --index)")
    p.add_argument("--bm25", help="BM25 index folder: serve BM25 + dense fused (--fusion)")
    p.add_argument("--fusion", choices=["rrf", "interp"], help="with --bm25: rrf (default) or interp")
    p.add_argument("--alpha", type=float, default=1.0)
    p.add_argument("--rrf-k", type=float, default=60.0)
    p.add_argument("--depth", type=int, default=100, help="hybrid: candidates from each list before fusing")
    p.add_argument("--instruction", help="prefix of every encoded query (default: the model's own, else none)")
    p.add_argument("--nprobe", type=int)
    p.add_argument("--ef-search", type=int)
    p.add_argument("--refine", type=int, default=1)
    p.add_argument("--faiss", dest="faiss_name")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback only)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--token", default=os.environ.get("HOPSCOTCH_SERVE_TOKEN"),
                   help="require 'Authorization: Bearer TOKEN' (default $HOPSCOTCH_SERVE_TOKEN)")
    p.add_argument("--name", default="default", help="index name in the URL (/v1/NAME/...)")
    p.add_argument("--max-batch", type=int, default=64, help="most concurrent queries encoded together")
    p.add_argument("--verbose", action="store_true", help="log every request")
    p.set_defaults(func=run)


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(socket.gethostbyname(host)).is_loopback
    except (OSError, ValueError):
        return False


def run(args) -> int:
    from hopscotch.retriever.commands.search import build_from_args
    from hopscotch.retriever.errors import UsageError
    from hopscotch.retriever.serving.server import make_server

    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: not a TCP port")
    if "/" in args.name or not args.name.strip():
        raise UsageError(f"--name {args.name!r}: use a non-empty name without '/'")
    if not _is_loopback(args.host) and not args.token:
        print(f"hopscotch serve: warning: binding {args.host} without --token: anyone who can reach this "
              "machine can query the index", file=sys.stderr)
    searcher = build_from_args(args)
    try:
        server = make_server({args.name: searcher}, host=args.host, port=args.port, token=args.token,
                             max_batch=args.max_batch, verbose=args.verbose)
    except OSError as exc:
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    print(f"serving {searcher.name} index {args.index} as '{args.name}' on {server.url}/v1/{args.name}/search"
          + (" (token required)" if args.token else ""), file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
        server.service.close()
    return 0
