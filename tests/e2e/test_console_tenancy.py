"""A user key in the console cannot see another tenant's data.

The server does not store API keys yet, so the app's caller lookup
(``ragline.api.deps.get_caller``) is overridden with a fixed key table, the
way FastAPI overrides a dependency; everything else is real (uvicorn, routes,
facade, the browser). The console is only trusted to send the key it was
given: what it shows must come from the server's scoping.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import Request

from ragline.api.app import create_app
from ragline.api.deps import get_caller
from ragline.core.principal import Principal, Role
from ragline.errors import AuthenticationError
from ragline.settings import Settings
from ragline.testing.server import serve_in_thread
from tests.e2e.browser import chromium_path, playwright_or_skip
from tests.e2e.test_console import Console

pytestmark = pytest.mark.slow

KEYS = {"key-admin": Principal(tenant="default", role=Role.ADMIN, key_id="adm"),
        "key-a": Principal(tenant="tenant-a", role=Role.USER, key_id="a"),
        "key-b": Principal(tenant="tenant-b", role=Role.USER, key_id="b")}
SECRET = "Tenant A's launch window opens at dawn over the northern ridge."


async def caller_from_key(request: Request) -> Principal:
    auth = request.headers.get("authorization", "")
    key = auth[7:] if auth.lower().startswith("bearer ") else request.headers.get("x-api-key")
    if key not in KEYS:
        raise AuthenticationError("Invalid or missing API key")
    return KEYS[key]


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    app = create_app(Settings(data_dir=tmp_path / "data", _env_file=None))  # type: ignore[call-arg]
    app.dependency_overrides[get_caller] = caller_from_key
    with serve_in_thread(app) as base:
        r = httpx.post(f"{base}/api/rag/ingest/text", json={"text": SECRET, "title": "Launch"},
                       headers={"authorization": "Bearer key-a"}, timeout=60)
        assert r.status_code == 201, r.text
        yield base


@pytest.fixture
def page(url: str) -> Iterator[Any]:
    exe = chromium_path()
    sync_playwright: Any = playwright_or_skip()
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        p = b.new_page(viewport={"width": 1280, "height": 800})
        p.set_default_timeout(20_000)
        yield p
        b.close()


def count_cell(page: Any, name: str) -> str:
    row = page.locator(f"#collections-table tbody tr[data-name={name}]")
    return str(row.locator("td").nth(0).inner_text())


def search(page: Any, query: str) -> None:
    page.click("#nav a[data-page=search]")
    page.wait_for_selector("#page-search h1", state="visible")
    page.wait_for_load_state("networkidle")
    page.select_option("#search-collection", "knowledge")
    page.fill("#search-query", query)
    page.click("#search-form button[type=submit]")
    page.wait_for_function("document.querySelector('#search-summary').textContent"
                           ".includes('result(s)')")


def test_user_key_cannot_see_another_tenants_data(page: Any, url: str) -> None:
    console = Console(page, url)
    # a wrong key is refused at sign-in with the server's message
    page.goto(url + "/ui")
    page.fill("#signin-key", "not-a-key")
    page.click("#signin-form button[type=submit]")
    page.wait_for_selector("#signin-error:visible")
    assert "Invalid or missing API key" in page.inner_text("#signin-error")
    assert page.evaluate("sessionStorage.getItem('ragline.apiKey')") is None

    console.sign_in("key-a")
    assert count_cell(page, "knowledge") == "1"
    search(page, "launch window")
    assert "launch window" in page.inner_text("#search-results li:first-child .hit-text")
    page.click("#search-results li:first-child button.open-context")
    page.wait_for_selector("#page-context .chunk.current")
    context_hash = page.evaluate("location.hash")
    console.shot("tenant-a-context")

    page.click("#signout")
    console.sign_in("key-b")
    assert count_cell(page, "knowledge") == "0"
    search(page, "launch window")
    assert page.locator("#search-results li").count() == 0
    assert page.inner_text("#search-summary").startswith("0 result(s)")
    # a's chunk, opened by its link, is a 404 for b
    page.evaluate(f"location.hash = {context_hash!r}")
    page.wait_for_selector("#toast:visible")
    assert "not found" in page.inner_text("#toast").lower()
    assert "not found" in page.inner_text("#context-body").lower()
    assert "launch window" not in page.inner_text("#page-context")
    console.shot("tenant-b-denied")
