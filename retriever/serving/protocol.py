"""The HTTP connection layer: uvicorn's h11 protocol with idle and request timeouts and JSON-only errors.

uvicorn times a connection out only between requests after a response (``timeout_keep_alive``); a client
that connects and sends nothing, or sends a request a byte at a time, would hold its socket forever. Here
every connection has one timer, re-armed by its state:

* waiting for a request with nothing received yet (a fresh or a kept-alive connection): ``idle_timeout``,
  then the connection is closed quietly;
* a request begun (part of its headers, or a body still arriving): ``header_timeout`` from the first
  byte, then ``408`` (JSON) and close;
* a request complete (the app is answering it): no timer.

Malformed requests (including headers beyond ``max_header_bytes``) get a JSON ``400`` instead of
uvicorn's plain text. :class:`HttpLimits` holds these numbers and the service's other bounds.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol


@dataclass(frozen=True)
class HttpLimits:
    """The service's bounds.

    :param idle_timeout: seconds a connection may wait for its next request (fresh or kept alive)
    :param header_timeout: seconds from a request's first byte until it is complete (else 408)
    :param max_header_bytes: request line + headers (a long ``reason`` travels in the query string)
    :param max_body: request bodies up to this many bytes are read and dropped; larger ones (or chunked
        ones) are refused with 413 and the connection closed
    :param max_in_flight: ``/v1/`` requests answered at once; more get 503 with ``Retry-After``
    :param threads: worker threads that read documents (the only threads requests use; idle connections
        use none)
    :param backlog: the listening socket's accept queue
    """

    idle_timeout: float = 5.0
    header_timeout: float = 10.0
    max_header_bytes: int = 256 * 1024
    max_body: int = 64 * 1024
    max_in_flight: int = 256
    threads: int = 4
    backlog: int = 2048

    def __post_init__(self):
        for name in ("idle_timeout", "header_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("max_header_bytes", "max_body", "max_in_flight", "threads", "backlog"):
            if getattr(self, name) < (0 if name == "max_body" else 1):
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")


def raw_json_response(status: int, reason: str, message: str) -> bytes:
    """A complete ``Connection: close`` HTTP/1.1 response with the body ``{"error": message}``."""
    body = json.dumps({"error": message}).encode()
    head = (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
            "connection: close\r\n\r\n")
    return head.encode("ascii") + body


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the timers described in the module docstring (subclass per server with
    :func:`guarded_protocol` to set them)."""

    idle_timeout: float = HttpLimits.idle_timeout
    header_timeout: float = HttpLimits.header_timeout

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._timer: asyncio.TimerHandle | None = None
        self._phase: str | None = None
        super().connection_made(transport)
        self._sync_timer()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._sync_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._sync_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._set_phase(None)
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        self._set_phase(None)
        self.transport.write(raw_json_response(400, "Bad Request", msg))
        self.transport.close()

    # -- the timer --------------------------------------------------------------------------------
    def _sync_timer(self) -> None:
        if self.transport.is_closing() or self.conn.their_state not in (h11.IDLE, h11.SEND_BODY):
            self._set_phase(None)  # request complete (being answered), closed or broken
        elif self.conn.their_state is h11.SEND_BODY or self.conn.trailing_data[0]:
            self._set_phase("request")
        else:
            self._set_phase("idle")

    def _set_phase(self, phase: str | None) -> None:
        if phase == self._phase:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._phase = phase
        if phase is not None:
            delay = self.idle_timeout if phase == "idle" else self.header_timeout
            self._timer = self.loop.call_later(delay, self._expired)

    def _expired(self) -> None:
        self._timer = None
        if self.transport.is_closing():
            return
        answering = self.cycle is not None and not self.cycle.response_complete
        if self._phase == "request" and not answering:
            self.transport.write(raw_json_response(408, "Request Timeout",
                                                   f"request not received within {self.header_timeout:g} s"))
        self._phase = None
        self.transport.close()


def guarded_protocol(limits: HttpLimits) -> type[GuardedH11Protocol]:
    """A :class:`GuardedH11Protocol` subclass with ``limits``' timeouts (uvicorn builds one per connection)."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,),
                {"idle_timeout": limits.idle_timeout, "header_timeout": limits.header_timeout})
