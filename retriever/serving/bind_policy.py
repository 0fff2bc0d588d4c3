"""Whether a service may listen without a token: the one loopback rule of the REST and the MCP server.

A host is *loopback* when it resolves (``getaddrinfo``, TCP) to at least one address and every address it
resolves to is a loopback one (``127.0.0.0/8``, ``::1``): a name that also resolves to a routable address is
not, and neither is one that does not resolve. Binding anything else without a token prints one warning (the
service still starts: the user may mean it). The credential check itself is
:func:`hopscotch.retriever.serving.service.token_matches`.
"""

from __future__ import annotations

import ipaddress
import socket
import sys


def is_loopback(host: str) -> bool:
    """Whether every address ``host`` resolves to is a loopback address (False when it resolves to none)."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        return bool(infos) and all(ipaddress.ip_address(info[4][0]).is_loopback for info in infos)
    except (OSError, ValueError):
        return False


def warn_if_open(host: str, token: str | None) -> bool:
    """Print the warning for binding a non-loopback ``host`` without a ``token``; whether it was printed."""
    if token or is_loopback(host):
        return False
    print(f"hopscotch serve: warning: binding {host} without a token: anyone who can reach this machine can "
          "query the index", file=sys.stderr)
    return True
