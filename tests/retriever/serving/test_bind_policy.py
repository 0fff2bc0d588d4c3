"""The one loopback rule of ``hopscotch serve`` (REST) and ``serve --mcp``: every resolved address loopback, with
the resolver monkeypatched so that names resolving to several addresses are tested without a network."""

from __future__ import annotations

import socket
from types import SimpleNamespace

import pytest

from hopscotch.retriever.serving import bind_policy
from hopscotch.retriever.serving.bind_policy import is_loopback, warn_if_open


def _infos(*addresses):
    return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "",
             (a, 0, 0, 0) if ":" in a else (a, 0)) for a in addresses]


RESOLVES = {
    "localhost": _infos("127.0.0.1", "::1"),
    "loop-only.test": _infos("127.0.1.1", "127.0.0.1"),
    "mixed.test": _infos("127.0.0.1", "10.0.0.5"),       # loopback first, a routable address after it
    "mixed6.test": _infos("::1", "2001:db8::1"),
    "public.test": _infos("93.184.216.34"),
    "empty.test": [],
}


@pytest.fixture
def resolver(monkeypatch):
    real = socket.getaddrinfo

    def fake(host, port, *args, **kwargs):
        if host in RESOLVES:
            return RESOLVES[host]
        if host == "nowhere.test":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(bind_policy.socket, "getaddrinfo", fake)


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.8.9.10", True), ("::1", True),                         # literal addresses
    ("0.0.0.0", False), ("::", False), ("10.1.2.3", False), ("2001:db8::7", False),
    ("localhost", True), ("loop-only.test", True),                                    # names: every address
    ("mixed.test", False), ("mixed6.test", False), ("public.test", False),
    ("empty.test", False), ("nowhere.test", False),
])
def test_every_resolved_address_must_be_loopback(resolver, host, loopback):
    assert is_loopback(host) is loopback


def test_the_warning_is_printed_for_an_open_host_without_a_token(resolver, capsys):
    assert warn_if_open("mixed.test", None)
    assert "binding mixed.test without a token" in capsys.readouterr().err
    assert not warn_if_open("mixed.test", "secret") and not warn_if_open("localhost", None)
    assert capsys.readouterr().err == ""


def test_rest_and_mcp_both_apply_it(resolver, capsys, monkeypatch):
    """``serve`` (REST) warns through it before building the searcher; ``serve --mcp`` (non-stdio) likewise."""
    from hopscotch.retriever.commands import serve
    from hopscotch.retriever.serving import mcp_server

    class Stop(Exception):
        pass

    def stop(*_a, **_k):
        raise Stop

    monkeypatch.setattr(serve, "searcher_from_args", stop)  # where serve looks it up
    args = SimpleNamespace(port=0, name="wiki", idle_timeout=60.0, header_timeout=10.0, max_in_flight=64, threads=4,
                           max_batch=8, host="mixed6.test", token=None, searcher_type="dense", index="x", bm25=None)
    with pytest.raises(Stop):
        serve.build_server(args)
    assert "binding mixed6.test without a token" in capsys.readouterr().err

    monkeypatch.setattr(mcp_server, "_require_sdk", lambda: None)
    with pytest.raises(Stop):
        mcp_server.run_mcp(mcp_server.MCPServeOptions(transport="sse", port=0, host="mixed6.test", token=None), stop)
    assert "binding mixed6.test without a token" in capsys.readouterr().err
    with pytest.raises(Stop):
        mcp_server.run_mcp(mcp_server.MCPServeOptions(transport="stdio", host="mixed6.test", token=None), stop)
    assert "binding" not in capsys.readouterr().err
