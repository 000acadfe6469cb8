"""API documentation pages served from ragline's own files, and the front door.

FastAPI's default ``/docs`` and ``/redoc`` load Swagger UI and ReDoc from a CDN,
so offline (or behind a strict proxy) they render blank. The same pages here
load copies vendored under ``api/static/`` (see the README there); the Google
fonts ReDoc would fetch are left out. ``/`` sends a browser somewhere useful:
the web console when one is mounted at ``/ui``, else the API docs.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

STATIC_DIR = Path(__file__).parent / "static"
STATIC_URL = "/static/api-docs"
CONSOLE_PATH = "/ui"


def has_console(app: FastAPI) -> bool:
    """True when some route or mount serves the console under ``/ui``."""
    return any(
        getattr(r, "path", "") in (CONSOLE_PATH, CONSOLE_PATH + "/")
        or getattr(r, "path", "").startswith(CONSOLE_PATH + "/")
        for r in app.routes
    )


def install(app: FastAPI) -> None:
    """Add ``/docs``, ``/redoc`` and ``/``; the app must be built with docs_url=None."""
    app.mount(STATIC_URL, StaticFiles(directory=STATIC_DIR), name="api-docs-static")
    openapi_url = app.openapi_url or "/openapi.json"
    oauth_redirect = "/docs/oauth2-redirect"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{app.title} - API docs",
            oauth2_redirect_url=oauth_redirect,
            swagger_js_url=f"{STATIC_URL}/swagger-ui/swagger-ui-bundle.js",
            swagger_css_url=f"{STATIC_URL}/swagger-ui/swagger-ui.css",
            swagger_favicon_url=f"{STATIC_URL}/swagger-ui/favicon-32x32.png",
        )

    @app.get(oauth_redirect, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=openapi_url,
            title=f"{app.title} - API reference",
            redoc_js_url=f"{STATIC_URL}/redoc/redoc.standalone.js",
            redoc_favicon_url=f"{STATIC_URL}/swagger-ui/favicon-32x32.png",
            with_google_fonts=False,
        )

    @app.get("/", include_in_schema=False)
    async def front_door() -> RedirectResponse:
        return RedirectResponse(CONSOLE_PATH if has_console(app) else "/docs", status_code=307)
