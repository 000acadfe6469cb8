"""The MCP streamable-HTTP transport at ``/mcp`` on the ragline app.

The MCP server is started by the first request to ``/mcp``, not at start-up:
importing the ``mcp`` SDK took ~1.2 s of a server's ~3 s start (2 cores), and most
servers never serve MCP. The import runs in a worker thread, so the event loop
keeps answering other requests meanwhile; MCP requests that arrive during it wait
for it. The server's session manager then runs in a task of the app's lifespan
until shutdown (a mounted sub-app's own lifespan would never run). Stateless mode:
every POST is self-contained, so any number of server processes can answer and
nothing is kept per client.

Every request is authenticated here, before anything is started, with the same
API key headers as the HTTP API (``Authorization: Bearer KEY`` or ``X-API-Key:
KEY``); the resolved caller (a ``Principal``) is left in the ASGI scope's state,
where the tools read it.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread
from anyio.abc import TaskStatus
from fastapi import FastAPI
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ragline.api.mcp_server.auth import PRINCIPAL_STATE, resolve_principal
from ragline.errors import RaglineError
from ragline.facade import Ragline

PATH = "/mcp"


class _McpEndpoint:
    """ASGI endpoint: authenticate, start the MCP server if it is not running yet, then
    hand the request to its transport."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self.transport: ASGIApp | None = None
        self.start: Callable[[], Awaitable[None]] | None = None  # set while the app runs

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.start is None:
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
        if self.transport is None:
            await self.start()
        transport = self.transport
        if transport is None:  # the app is shutting down
            await _error(send, 503, "service_unavailable", "MCP is not running")
            return
        scope.setdefault("state", {})[PRINCIPAL_STATE] = caller
        await transport(scope, receive, send)


async def _error(send: Send, status: int, code: str, message: str) -> None:
    body = json.dumps({"detail": message, "error": code, "message": message}).encode()
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def install(app: FastAPI) -> None:
    """Add ``/mcp`` to ``app``; the MCP server starts on its first request and runs
    inside the app's lifespan."""
    endpoint = _McpEndpoint(app)
    app.router.routes.append(Route(PATH, endpoint=endpoint))  # an ASGI app: every method
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with inner(a) as state, anyio.create_task_group() as tg:
            lock = anyio.Lock()

            async def start() -> None:
                async with lock:  # one start, whoever asks first
                    if endpoint.transport is None and endpoint.start is not None:
                        await tg.start(_serve, a.state.ragline, endpoint)

            endpoint.start = start
            try:
                yield state
            finally:
                endpoint.start = None
                tg.cancel_scope.cancel()

    app.router.lifespan_context = lifespan


async def _serve(rl: Ragline, endpoint: _McpEndpoint, *,
                 task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
    """Import and build the MCP server, then run its session manager until cancelled."""
    server_mod, manager_mod = await anyio.to_thread.run_sync(_import_sdk)
    server = server_mod.build_server(lambda: rl)
    server.streamable_http_app(streamable_http_path=PATH, stateless_http=True,
                               json_response=True, host=rl.settings.host)
    async with server.session_manager.run():
        endpoint.transport = manager_mod.StreamableHTTPASGIApp(server.session_manager)
        task_status.started()
        try:
            await anyio.sleep_forever()
        finally:
            endpoint.transport = None


def _import_sdk() -> tuple[Any, Any]:
    return (importlib.import_module("ragline.api.mcp_server.server"),
            importlib.import_module("mcp.server.streamable_http_manager"))
