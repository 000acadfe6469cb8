"""uvicorn's HTTP protocol with the deadlines uvicorn lacks, and a cap on open connections.

uvicorn closes idle keep-alive connections, but a client that connects and then
sends nothing, or sends its headers or body a byte at a time, is kept forever:
measured, about 20,000 such sockets exhausted the file descriptors and every
real request failed (issue 10), and 1,100 sockets sending one body byte every
10 s stopped every request at the connection cap (issue 32). This protocol adds:

* a **header deadline**: the request line and headers must arrive within
  ``header_timeout`` seconds of the connection (or of the request's first byte
  on a kept-alive connection);
* a **body deadline**: while a body is being received, at most
  ``body_timeout`` seconds may pass without a byte;
* a **total deadline**: headers and body together within ``request_timeout``
  seconds, however the bytes are spaced (a byte every 10 s never trips the body
  deadline);
* a **connection cap that serves the newcomer**: past ``max_connections`` open
  connections, the connection that has waited longest without delivering a
  complete request (half-sent headers, a trickling body, an idle keep-alive) is
  closed to make room, so a new client is always served. Only when every open
  connection is busy with a complete request is the new one answered 503.

Neither body deadline counts while the server itself has paused reading because
the app is behind (the client is not at fault then). A connection that misses a
deadline is closed without an answer: the client was not sending one.

Authentication before the body (an unauthenticated request with a body is
refused with 401 before any of the body is read) is the request guard's
(:mod:`ragline.api.middleware`): uvicorn starts the app when the headers are
complete, so the guard answers from the headers alone.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger(__name__)

_BUSY = (b'{"detail":"Server busy: every connection is serving a request; retry shortly",'
         b'"error":"service_unavailable"}')
SERVICE_UNAVAILABLE = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
                       b"content-length: %d\r\nretry-after: 1\r\nconnection: close\r\n\r\n%s"
                       % (len(_BUSY), _BUSY))
"""Sent (before reading the request) when the cap is reached and nobody can make room."""

PAUSED_RECHECK_S = 1.0
"""While the server has paused reading, an expired body deadline is looked at again
after this long instead of closing the connection."""


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    request_timeout: float = 120.0
    max_connections: int = 1000
    waiting: ClassVar[dict[GuardedHttpToolsProtocol, None]] = {}
    """Connections that have not delivered a complete request, the longest-waiting
    first (a dict keeps insertion order): the ones the cap closes to make room.
    One per configured class (see :func:`protocol_class`), i.e. per server."""
    evicted: ClassVar[set[GuardedHttpToolsProtocol]] = set()
    """Closed to make room, not yet gone: not counted against the cap."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._total: asyncio.TimerHandle | None = None
        self._in_body = False

    # -- deadlines -----------------------------------------------------------------------
    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _arm_total(self, seconds: float) -> None:
        self._disarm_total()
        self._total = self.loop.call_later(seconds, self._total_expired)

    def _disarm_total(self) -> None:
        if self._total is not None:
            self._total.cancel()
            self._total = None

    def _close(self, why: str) -> None:
        if not self.transport.is_closing():
            log.info("closing a connection: %s", why)
            self.transport.close()

    def _expired(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self._in_body and self.flow.read_paused:  # we stopped reading, not the client
            self._arm(self.body_timeout)
            return
        self._close("no %s in time" % ("body" if self._in_body else "request headers"))

    def _total_expired(self) -> None:
        self._total = None
        if self.transport.is_closing():
            return
        if self._in_body and self.flow.read_paused:
            self._arm_total(PAUSED_RECHECK_S)
            return
        self._close(f"request not complete within {self.request_timeout:g} s")

    # -- the cap -------------------------------------------------------------------------
    def _mark_waiting(self) -> None:
        self.waiting.pop(self, None)
        self.waiting[self] = None  # to the end: the most recent to start waiting

    def _make_room(self) -> bool:
        """Close the longest-waiting incomplete connection; False if there is none."""
        while self.waiting:
            oldest = next(iter(self.waiting))
            del self.waiting[oldest]
            if (oldest is self or oldest.transport.is_closing()
                    or oldest not in self.connections):  # upgraded to a WebSocket: not ours
                continue
            self.evicted.add(oldest)
            log.info("connection cap (%d) reached; closing the connection that waited "
                     "longest without a complete request", self.max_connections)
            oldest.transport.close()
            return True
        return False

    # -- protocol hooks ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) - len(self.evicted) > self.max_connections \
                and not self._make_room():
            log.warning("connection cap (%d) reached and every connection is serving a "
                        "request; answering 503", self.max_connections)
            transport.write(SERVICE_UNAVAILABLE)
            transport.close()
            return
        self._mark_waiting()
        self._arm(self.header_timeout)
        self._arm_total(self.request_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._disarm_total()
        self.waiting.pop(self, None)
        self.evicted.discard(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.transport.is_closing():
            return
        if self._in_body:
            self._arm(self.body_timeout)
        elif self._deadline is None and (self.cycle is None or self.cycle.response_complete):
            # bytes of a next request on a kept-alive connection: its deadlines start now
            self._arm(self.header_timeout)
            self._arm_total(self.request_timeout)

    def on_headers_complete(self) -> None:
        self._disarm()
        self._in_body = True
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._in_body = False
        self._disarm()
        self._disarm_total()
        self.waiting.pop(self, None)  # a complete request: being served, not evictable
        super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # uvicorn arms its keep-alive timer now; ours restart with the next bytes. Idle,
        # the connection may be closed to make room again.
        if not self.transport.is_closing():
            self._mark_waiting()


def protocol_class(header_timeout: float, body_timeout: float, max_connections: int,
                   request_timeout: float = 120.0) -> type[GuardedHttpToolsProtocol]:
    """A protocol class with these limits (uvicorn takes a class, not an instance), with
    its own registry of waiting connections."""
    return type("ConfiguredHttpProtocol", (GuardedHttpToolsProtocol,), {
        "header_timeout": header_timeout, "body_timeout": body_timeout,
        "request_timeout": request_timeout, "max_connections": max_connections,
        "waiting": {}, "evicted": set()})
