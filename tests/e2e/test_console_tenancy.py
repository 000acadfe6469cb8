"""A user key in the console cannot see another tenant's data.

A real ``ragline serve`` with auth on; the first admin key makes two user keys
in two tenants through ``POST /api/keys``. The console is only trusted to send
the key it was given: what it shows must come from the server's scoping.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.browser import desktop_page
from tests.e2e.test_console import Console
from tests.live_server import LiveServer

pytestmark = pytest.mark.slow

SECRET = "Tenant A's launch window opens at dawn over the northern ridge."
KEYS: dict[str, str] = {}


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    data = tmp_path / "data"
    srv = LiveServer(data, env={"RAGLINE_AUTH": "on"})
    try:
        srv.wait_ready()
        admin = (data / "admin-key.txt").read_text().strip()
        for name, tenant in (("a", "tenant-a"), ("b", "tenant-b")):
            r = httpx.post(f"{srv.url}/api/keys", headers={"authorization": f"Bearer {admin}"},
                           json={"role": "user", "tenant": tenant, "name": name})
            assert r.status_code == 201, r.text
            KEYS[name] = r.json()["key"]
        r = httpx.post(f"{srv.url}/api/rag/ingest/text", json={"text": SECRET, "title": "Launch"},
                       headers={"authorization": f"Bearer {KEYS['a']}"}, timeout=60)
        assert r.status_code == 201, r.text
        yield srv.url
    finally:
        srv.stop()


@pytest.fixture
def page(url: str) -> Iterator[Any]:
    with desktop_page() as p:
        yield p


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
    assert "not accepted" in page.inner_text("#signin-error")
    assert page.evaluate("sessionStorage.getItem('ragline.apiKey')") is None

    console.sign_in(KEYS["a"])
    assert count_cell(page, "knowledge") == "1"
    search(page, "launch window")
    assert "launch window" in page.inner_text("#search-results li:first-child .hit-text")
    page.click("#search-results li:first-child button.open-context")
    page.wait_for_selector("#page-context .chunk.current")
    context_hash = page.evaluate("location.hash")
    console.shot("tenant-a-context")

    page.click("#signout")
    console.sign_in(KEYS["b"])
    assert count_cell(page, "knowledge") == "0"
    # a user key gets no admin controls (the role comes from GET /api/keys: 403 for users)
    page.wait_for_selector("#create-collection", state="hidden")
    assert page.locator("#collections-table button", has_text="Delete").count() == 0
    assert page.locator("#collections-table button", has_text="Metadata").count() == 0
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
