"""uvicorn's HTTP protocol with the deadlines uvicorn lacks, and a cap on open connections.

uvicorn closes idle keep-alive connections, but a client that connects and then
sends nothing, or sends its headers or body a byte at a time, is kept forever:
measured, about 20,000 such sockets exhausted the file descriptors and every
real request failed (issue 10). This protocol adds:

* a **header deadline**: the request line and headers must arrive within
  ``header_timeout`` seconds of the connection (or of the previous response);
* a **body deadline**: while a body is being received, at most
  ``body_timeout`` seconds may pass without a byte (not counted while the
  server itself has paused reading because the app is behind);
* a **connection cap**: past ``max_connections`` open connections a new one is
  closed at once, so the process keeps descriptors for the clients it serves.

A connection that misses a deadline is closed without an answer: the client
was not sending one.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger(__name__)


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    max_connections: int = 1000

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._in_body = False

    # -- deadlines -----------------------------------------------------------------------
    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self._in_body and self.flow.read_paused:  # we stopped reading, not the client
            self._arm(self.body_timeout)
            return
        log.info("closing a connection that sent no %s in time",
                 "body" if self._in_body else "request headers")
        self.transport.close()

    # -- protocol hooks ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            log.warning("connection cap (%d) reached; closing a new connection",
                        self.max_connections)
            transport.close()
            return
        self._arm(self.header_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._in_body:
            self._arm(self.body_timeout)
        elif self._deadline is None and not self.transport.is_closing() and (
                self.cycle is None or self.cycle.response_complete):
            # bytes of a next request on a kept-alive connection: its headers get a deadline
            self._arm(self.header_timeout)

    def on_headers_complete(self) -> None:
        self._disarm()
        self._in_body = True
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._in_body = False
        self._disarm()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # uvicorn arms its keep-alive timer now; ours restarts with the next bytes


def protocol_class(header_timeout: float, body_timeout: float,
                   max_connections: int) -> type[GuardedHttpToolsProtocol]:
    """A protocol class with these limits (uvicorn takes a class, not an instance)."""
    return type("ConfiguredHttpProtocol", (GuardedHttpToolsProtocol,), {
        "header_timeout": header_timeout, "body_timeout": body_timeout,
        "max_connections": max_connections})
