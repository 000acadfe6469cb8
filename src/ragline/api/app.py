"""The FastAPI app factory.

Settings are built by the caller (CLI, tests) and passed in; nothing is read
at import time. Endpoints are plain ``def`` functions, which FastAPI runs in
its thread pool, so store and model work never blocks the event loop.
"""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import FastAPI

from ragline import __version__
from ragline.api import console, docs_ui, errors, middleware, openapi, routing
from ragline.api.json_guard import SafeJSONResponse
from ragline.api.request_context import RequestContextMiddleware
from ragline.api.routes import (
    admin,
    chat,
    checklists,
    collections,
    connections,
    context,
    documents,
    health,
    ingestion,
    keys,
    meta,
    openai_v1,
    rag_ingest,
    rerank,
    search,
    sources,
)
from ragline.facade import Ragline
from ragline.settings import Settings


def create_app(settings: Settings | None = None, ragline: Ragline | None = None) -> FastAPI:
    settings = settings or (ragline.settings if ragline else Settings())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Few worker threads: store and model calls hold the GIL, and with anyio's
        # default 40 threads the event loop waited behind them (100 concurrent
        # clients: 55 QPS and p95 4.7 s; see BENCHMARKS.md).
        limiter = anyio.to_thread.current_default_thread_limiter()
        limiter.total_tokens = settings.worker_threads
        owned = ragline is None
        rl = ragline or Ragline(settings)
        rl.start()  # idempotent: a caller that built and started it keeps ownership
        await anyio.to_thread.run_sync(rl.admin.settle_pending)  # crash-left first writes (32)
        app.state.ragline = rl
        try:
            yield
        finally:
            if owned:
                rl.close()

    app = FastAPI(title="ragline", version=__version__, lifespan=lifespan,
                  description="Self-hosted RAG backend: collections, documents, search.",
                  docs_url=None, redoc_url=None,  # served offline by docs_ui
                  default_response_class=SafeJSONResponse)  # stored bad text (issue 32)
    errors.install(app)
    middleware.install(app, settings)
    app.add_middleware(openai_v1.OpenAIErrorShape)  # around the guard: /v1 errors OpenAI's
    openapi.install(app)
    docs_ui.install(app)
    app.include_router(meta.router)
    app.include_router(meta.metrics_router if settings.metrics_enabled
                       else meta.metrics_off_router)
    # Outermost: every response, errors included, carries X-Request-ID.
    app.add_middleware(RequestContextMiddleware, access_log_enabled=settings.access_log)
    # every /collections/... route takes ?service= and is also served under /api. First,
    # search and documents leading: a request is matched against the routes in order,
    # twice (FastAPI's included routers), and behind the other routers a search paid
    # ~0.06 ms of its ~0.45 ms of Python for it (py-spy, 100 connections). No path
    # matches two routes, so the order changes no answer (tests/api/test_route_order.py)
    routing.install(app, [search.collection_router, documents.router, collections.router,
                          sources.router])
    for module in (health, connections, search, ingestion, context, rag_ingest,
                   rerank, keys, admin, chat, checklists, openai_v1):
        app.include_router(module.router)
    console.install(app)
    _install_mcp(app)
    return app


def _install_mcp(app: FastAPI) -> None:
    """``/mcp`` when the ``mcp`` package is installed (extra ``ragline[mcp]``); without
    it, a 503 naming the extra."""
    if importlib.util.find_spec("mcp") is None:
        from ragline.api.mcp_server import missing

        missing.install(app)
        return
    from ragline.api.mcp_server import http as mcp_http

    mcp_http.install(app)
