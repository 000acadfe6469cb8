"""The console along a newcomer's path, on a fresh data directory with no extra settings.

Issue 33: a collection created as the README says (``"embed": {"provider": "local"}``)
is shown with its embedder and searched in all three modes; Chat has a collection picker
(no RAGLINE_DEFAULT_COLLECTION); empty collections and a server without a chat model
say so. Walked as the admin and as a user key, in headless Chromium against real
``ragline serve`` processes. The chat model is the scripted one behind an
OpenAI-compatible endpoint (the only settings given: RAGLINE_LLM_BASE_URL/MODEL).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragline.testing.openai_server import scripted_openai_server
from ragline.testing.scripted_llm import citing_model
from tests.e2e.browser import chromium
from tests.e2e.test_console import Console
from tests.live_server import LiveServer

pytestmark = pytest.mark.slow

DOCS = [
    {"id": "topics", "text": "ROS 2 topics carry messages between nodes.",
     "metadata": {"title": "Topics", "chapter": 3}},
    {"id": "services", "text": "A ROS 2 service answers one request with one response.",
     "metadata": {"title": "Services", "chapter": 4}},
]
ALICE_DOC = {"id": "alice-notes", "text": "Alice keeps her lidar calibration notes here.",
             "metadata": {"title": "Alice notes"}}


class World:
    def __init__(self, srv: LiveServer, data: Path) -> None:
        self.srv = srv
        self.admin = (data / "admin-key.txt").read_text().strip()
        self.alice = ""

    def call(self, method: str, path: str, key: str, **kw: Any) -> Any:
        r = httpx.request(method, self.srv.url + path, timeout=60,
                          headers={"authorization": f"Bearer {key}"}, **kw)
        assert r.status_code < 300, (path, r.status_code, r.text)
        return r.json()


@pytest.fixture(scope="module")
def llm() -> Iterator[tuple[str, Any]]:
    model = citing_model()
    with scripted_openai_server(model) as url:
        yield url, model


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, llm: tuple[str, Any]) -> Iterator[World]:
    data = tmp_path_factory.mktemp("newcomer") / "data"
    # RAGLINE_AUTH=on is the default; tests/conftest.py turns it off for the suite
    srv = LiveServer(data, env={"RAGLINE_AUTH": "on", "RAGLINE_LLM_BASE_URL": llm[0],
                                "RAGLINE_LLM_MODEL": "scripted"})
    try:
        srv.wait_ready()
        w = World(srv, data)
        # the README's quick tour, through the API
        w.call("POST", "/collections", w.admin, json={"name": "docs",
                                                      "embed": {"provider": "local"}})
        w.call("POST", "/collections/docs/documents", w.admin, json={"documents": DOCS})
        w.call("POST", "/collections", w.admin, json={"name": "empty",
                                                      "embed": {"provider": "local"}})
        w.alice = w.call("POST", "/api/keys", w.admin,
                         json={"role": "user", "tenant": "alice"})["key"]
        w.call("POST", "/collections/docs/documents", w.alice, json={"documents": [ALICE_DOC]})
        yield w
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def browser(world: World) -> Iterator[Any]:
    with chromium() as b:
        yield b


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    p = ctx.new_page()
    p.set_default_timeout(30_000)
    yield p
    ctx.close()


def _errors(console: Console) -> list[str]:
    """Console errors, less the 403 of the role probe: the console asks GET /api/keys,
    which only admins may call, to learn whether to show admin controls."""
    return [e for e in console.errors if "status of 403" not in e]


def _search(console: Console, collection: str, query: str, mode: str) -> list[str]:
    page = console.page
    page.select_option("#search-collection", collection)
    page.fill("#search-query", query)
    page.select_option("#search-mode", mode)
    page.click("#search-form button[type=submit]")
    page.wait_for_function("document.querySelector('#search-summary').textContent"
                           f".includes('mode {mode}')")
    return [str(t) for t in page.locator("#search-results .hit-title").all_inner_texts()]


@pytest.mark.parametrize("who", ["admin", "alice"])
def test_embedding_collection_searches_in_every_mode(page: Any, world: World,
                                                     who: str) -> None:
    key = world.admin if who == "admin" else world.alice
    console = Console(page, world.srv.url, key)
    console.sign_in()
    row = page.locator("#collections-table tbody tr[data-name=docs]")
    assert "local" in row.inner_text() and "pre-computed" not in row.inner_text()
    console.open("search")
    page.select_option("#search-collection", "docs")
    enabled = page.eval_on_selector_all(
        "#search-mode option", "os => os.filter(o => !o.disabled).map(o => o.value)")
    assert {"dense", "sparse", "hybrid"} <= set(enabled), enabled
    mine = "Topics" if who == "admin" else "Alice notes"
    query = DOCS[0]["text"] if who == "admin" else ALICE_DOC["text"]
    for mode in ("dense", "sparse", "hybrid"):
        titles = _search(console, "docs", str(query), mode)
        assert titles and titles[0] == mine, (mode, titles)
        # a tenant sees its own documents only
        assert ("Alice notes" in titles) == (who == "alice"), (mode, titles)
    console.shot(f"newcomer-search-{who}")
    assert _errors(console) == []


def test_empty_collection_says_so(page: Any, world: World) -> None:
    console = Console(page, world.srv.url, world.admin)
    console.sign_in()
    console.open("search")
    page.select_option("#search-collection", "empty")
    notice = page.locator("#search-empty")
    notice.wait_for(state="visible")
    assert "no documents" in notice.inner_text()
    page.select_option("#search-collection", "docs")
    assert not notice.is_visible()


@pytest.mark.parametrize("who", ["admin", "alice"])
def test_chat_picks_a_collection_without_default_collection(page: Any, world: World,
                                                            llm: tuple[str, Any],
                                                            who: str) -> None:
    key = world.admin if who == "admin" else world.alice
    console = Console(page, world.srv.url, key)
    console.sign_in()
    assert page.is_visible("#nav-chat")
    console.open("chat")
    page.wait_for_selector("#chat-collection option", state="attached")
    options = page.eval_on_selector_all("#chat-collection option", "os => os.map(o => o.value)")
    assert set(options) == {"docs", "empty"}
    assert page.input_value("#chat-collection") == "docs"  # the one with documents
    assert not page.is_visible("#chat-notice")
    question = DOCS[0]["text"] if who == "admin" else ALICE_DOC["text"]
    page.fill("#chat-input", str(question))
    page.keyboard.press("Control+Enter")
    page.wait_for_function("document.querySelector('.msg.assistant .answer')?.textContent"
                           ".startsWith('Answer from:')")
    answer = page.inner_text(".msg.assistant .answer")
    want = "Topics" if who == "admin" else "Alice notes"
    assert want in answer, answer
    assert ("Alice notes" in answer) == (who == "alice")
    assert "not found" not in page.inner_text("#chat-log")
    assert want in page.inner_text(".msg.assistant .sources")
    page.select_option("#chat-collection", "empty")
    assert "has no documents" in page.inner_text("#chat-notice")
    console.shot(f"newcomer-chat-{who}")
    assert _errors(console) == []


def test_chat_without_a_model_says_which_settings(page: Any,
                                                  tmp_path: Path) -> None:
    data = tmp_path / "data"
    srv = LiveServer(data, env={"RAGLINE_AUTH": "on"})  # the defaults, nothing else
    try:
        srv.wait_ready()
        console = Console(page, srv.url, (data / "admin-key.txt").read_text().strip())
        console.sign_in()
        console.open("chat")
        page.wait_for_selector("#chat-notice", state="visible")
        notice = page.inner_text("#chat-notice")
        assert "No chat model is configured" in notice and "RAGLINE_LLM_BASE_URL" in notice
        assert page.is_disabled("#chat-form button[type=submit]")
        console.open("providers")
        page.wait_for_function("document.querySelector('#health').textContent"
                               ".includes('no chat model configured')")
        console.shot("newcomer-chat-unconfigured")
        assert _errors(console) == []
    finally:
        srv.stop()
