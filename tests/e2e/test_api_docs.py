"""``/docs`` in headless Chromium: Authorize with an API key, Try it out, 200.

Auth is on by default, so the API docs are only useful if Swagger UI can send a key:
the OpenAPI document declares the bearer and X-API-Key schemes (issue 33). Driven as
a person would: the Authorize button, the key typed into the dialog, an operation
opened, "Try it out", "Execute", and the live response read from the page.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.browser import ARTIFACTS, desktop_page
from tests.live_server import LiveServer

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    srv = LiveServer(tmp_path_factory.mktemp("docs") / "data", env={"RAGLINE_AUTH": "on"})
    try:
        srv.wait_ready()
        yield srv
    finally:
        srv.stop()


def _key(srv: LiveServer) -> str:
    return (Path(srv.log.parent) / "data" / "admin-key.txt").read_text().strip()


def _try_list_collections(page: Any) -> str:
    """Open GET /collections, Try it out, Execute; the live response's status code."""
    op = page.locator("#operations-collections-list_collections_collections_get")
    if not op.count():  # the operation id is FastAPI's; find the block by its path
        op = page.locator(".opblock-get", has=page.locator(
            ".opblock-summary-path[data-path='/collections']")).first
    op.locator(".opblock-summary").first.click()
    op.locator("button.try-out__btn").click()
    op.locator("button.execute").click()
    cell = op.locator(".live-responses-table .response .response-col_status").first
    cell.wait_for()
    return str(cell.inner_text()).strip()


@pytest.mark.parametrize("scheme", ["bearer", "apiKey"])
def test_authorize_then_try_it_out_answers_200(server: LiveServer, scheme: str) -> None:
    with desktop_page() as page:
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(server.url + "/docs")
        page.locator("button.authorize").first.click()
        dialog = page.locator(".modal-ux")
        box = dialog.locator(".auth-container", has=page.locator(f"h4:has-text('{scheme}')"))
        box.locator("input").fill(_key(server))
        box.locator("button.authorize").click()
        dialog.locator("button.btn-done, button.close-modal").first.click()
        assert _try_list_collections(page) == "200"
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"docs-authorize-{scheme}.png"), full_page=True)
        assert errors == []


def test_without_authorize_try_it_out_is_refused(server: LiveServer) -> None:
    with desktop_page() as page:
        page.goto(server.url + "/docs")
        assert _try_list_collections(page) == "401"
