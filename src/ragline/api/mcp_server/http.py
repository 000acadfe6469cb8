"""The MCP streamable-HTTP transport at ``/mcp`` on the ragline app.

The MCP server is built in the app's lifespan, once the facade exists, and its
session manager runs for the app's lifetime (a mounted sub-app's own lifespan
would never run). Stateless mode: every POST is self-contained, so any number
of server processes can answer and nothing is kept per client.

Every request is authenticated here with the same API key headers as the HTTP
API (``Authorization: Bearer KEY`` or ``X-API-Key: KEY``); the resolved caller
(a ``Principal``) is left in the ASGI scope's state, where the tools read it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ragline.api.mcp_server.auth import resolve_principal
from ragline.api.mcp_server.server import PRINCIPAL_STATE, build_server
from ragline.errors import RaglineError
from ragline.facade import Ragline

PATH = "/mcp"


class _McpEndpoint:
    """ASGI endpoint: authenticate, then hand the request to the MCP transport."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self.transport: StreamableHTTPASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.transport is None:
            await _error(send, 503, "service_unavailable", "MCP is not running")
            return
        rl: Ragline = self.app.state.ragline
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", [])}
        try:
            caller = resolve_principal(rl, headers)
        except RaglineError as exc:
            await _error(send, exc.status, exc.code, exc.message)
            return
        scope.setdefault("state", {})[PRINCIPAL_STATE] = caller
        await self.transport(scope, receive, send)


async def _error(send: Send, status: int, code: str, message: str) -> None:
    body = json.dumps({"detail": message, "error": code, "message": message}).encode()
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def install(app: FastAPI) -> None:
    """Add ``/mcp`` to ``app`` and run the MCP session manager inside its lifespan."""
    endpoint = _McpEndpoint(app)
    app.router.routes.append(Route(PATH, endpoint=endpoint))  # an ASGI app: every method
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with inner(a) as state:
            rl: Ragline = a.state.ragline
            server = build_server(lambda: rl)
            server.streamable_http_app(streamable_http_path=PATH, stateless_http=True,
                                       json_response=True, host=rl.settings.host)
            async with server.session_manager.run():
                endpoint.transport = StreamableHTTPASGIApp(server.session_manager)
                try:
                    yield state
                finally:
                    endpoint.transport = None

    app.router.lifespan_context = lifespan
