"""The web console in headless Chromium against a real ``ragline serve`` process.

One server per module, seeded over HTTP with the fixture book (a directory
job) so search, context and lesson have real chunks. Every test signs in
through the form, as a person would, and screenshots land in
``test-artifacts/console/`` (git-ignored) for a human to look at.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.browser import ARTIFACTS, chromium
from tests.live_server import LiveServer

pytestmark = pytest.mark.slow

BOOK = Path(__file__).resolve().parents[1] / "fixtures" / "book"
SYNC_MAX = 400  # bytes: larger uploads become jobs, so progress polling is exercised
KEYS: dict[str, str] = {}  # server URL -> its first admin key


def admin_key(data_dir: Path) -> str:
    """The admin key a data directory's first start wrote (auth is on by default)."""
    return (data_dir / "admin-key.txt").read_text().strip()


def hdr(srv: LiveServer) -> dict[str, str]:
    return {"authorization": f"Bearer {KEYS[srv.url]}"}


def wait_job(url: str, job_id: str, headers: dict[str, str] | None = None,
             timeout: float = 120) -> dict[str, Any]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        job = httpx.get(f"{url}/ingestion/status/{job_id}", headers=headers, timeout=10).json()
        if job["status"] in ("succeeded", "failed"):
            return dict(job)
        time.sleep(0.2)
    raise TimeoutError(job_id)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    data = tmp_path_factory.mktemp("console") / "data"
    srv = LiveServer(data, env={"RAGLINE_AUTH": "on",
                                "RAGLINE_INGEST_SYNC_MAX_BYTES": str(SYNC_MAX),
                                "RAGLINE_INGEST_ALLOWED_ROOTS": json.dumps([str(BOOK.parent)])})
    try:
        srv.wait_ready()
        KEYS[srv.url] = admin_key(data)
        r = httpx.post(f"{srv.url}/ingestion/trigger", headers=hdr(srv),
                       json={"collection": "book", "path": str(BOOK)}, timeout=30)
        assert r.status_code == 202, r.text
        assert wait_job(srv.url, r.json()["job_id"], hdr(srv))["status"] == "succeeded"
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def browser(server: LiveServer) -> Iterator[Any]:
    with chromium() as b:
        yield b


class Console:
    """A page plus the console errors it logged; helpers mirror what a person does."""

    def __init__(self, page: Any, url: str, key: str = "") -> None:
        self.page = page
        self.url = url
        self.key = key
        self.errors: list[str] = []
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(f"uncaught: {e}"))

    def sign_in(self, key: str | None = None) -> None:
        self.page.goto(self.url + "/ui")
        self.page.fill("#signin-key", self.key if key is None else key)
        self.page.click("#signin-form button[type=submit]")
        self.page.wait_for_selector("#page-collections h1", state="visible")
        self.page.wait_for_selector("#collections-table tbody tr, #collections-empty:visible")

    def open(self, name: str) -> None:
        self.page.click(f"#nav a[data-page={name}]")
        self.page.wait_for_selector(f"#page-{name} h1", state="visible")
        self.page.wait_for_load_state("networkidle")

    def shot(self, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path


@pytest.fixture
def console(browser: Any, server: LiveServer) -> Iterator[Console]:
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    page = ctx.new_page()
    page.set_default_timeout(20_000)
    yield Console(page, server.url, KEYS[server.url])
    ctx.close()


def test_sign_in_lists_collections_with_counts(console: Console, server: LiveServer) -> None:
    console.sign_in()
    row = console.page.locator("#collections-table tbody tr[data-name=book]")
    count = httpx.get(f"{server.url}/collections/book", headers=hdr(server)).json()["count"]
    assert count > 0
    assert row.locator("td").nth(0).inner_text() == f"{count:,}"
    assert "B" in row.locator("td").nth(1).inner_text()  # a size such as "1.2 MB"
    # the key lives in session storage only
    assert console.page.evaluate("sessionStorage.getItem('ragline.apiKey')") == console.key
    assert console.page.evaluate("localStorage.length") == 0
    console.shot("collections")
    assert console.errors == []


def test_each_page_loads_without_console_errors(console: Console) -> None:
    console.sign_in()
    for name in ("search", "ingest", "providers", "collections"):
        console.open(name)
        console.shot(f"page-{name}")
    # /api/chat is part of the API (docs/answers.md): the chat page is offered; with no chat
    # model configured it reports the 503 (tests/e2e/test_console_chat.py covers a model)
    assert console.page.is_visible("#nav-chat")
    assert console.page.is_visible("#page-collections")
    console.open("providers")
    assert "qdrant-edge" in console.page.inner_text("#providers")
    assert "healthy" in console.page.inner_text("#health")
    assert console.errors == []


def test_keyboard_only_sign_in(console: Console) -> None:
    console.page.goto(console.url + "/ui")
    console.page.focus("#signin-key")
    console.page.keyboard.type(console.key)
    console.page.keyboard.press("Enter")
    console.page.wait_for_selector("#page-collections h1", state="visible")
    # every form control on the search page has a label
    console.open("search")
    unlabeled = console.page.evaluate("""() => [...document.querySelectorAll(
        '#page-search input, #page-search select, #page-search textarea')]
        .filter(e => !e.hidden && !(e.labels && e.labels.length) && !e.getAttribute('aria-label'))
        .map(e => e.id)""")
    assert unlabeled == []


def test_search_opens_hit_in_context_and_whole_source(console: Console) -> None:
    console.sign_in()
    console.open("search")
    page = console.page
    page.select_option("#search-collection", "book")
    page.fill("#search-query", "how do robots sense the world")
    page.click("#search-form button[type=submit]")
    page.wait_for_selector("#search-results li")
    hits = page.locator("#search-results li")
    assert hits.count() >= 1
    assert "result(s)" in page.inner_text("#search-summary")
    first_score = float(hits.nth(0).locator(".score").inner_text())
    assert first_score > 0
    assert "Score" in hits.nth(0).inner_text()  # the score explanation
    console.shot("search-results")
    hit_text = hits.nth(0).locator(".hit-text").inner_text()

    hits.nth(0).locator("button.open-context").click()
    page.wait_for_selector("#page-context .chunk.current")
    current = page.inner_text("#page-context .chunk.current")
    assert hit_text.strip()[:40] in current
    console.shot("context")
    page.click("#show-lesson")
    page.wait_for_selector("#lesson .lesson-text")
    lesson = page.inner_text("#lesson .lesson-text")
    # the whole lesson is joined without the contextual header ('Title > Heading') each
    # chunk starts with (ingest_context_header = text)
    body = hit_text.strip()
    if body[:40] not in lesson:
        body = body.split("\n\n", 1)[-1]
    assert body.strip()[:40] in lesson
    assert len(lesson) > len(hit_text)
    console.shot("lesson")
    assert console.errors == []


def test_bad_where_shows_the_servers_message(console: Console, server: LiveServer) -> None:
    console.sign_in()
    console.open("search")
    page = console.page
    page.select_option("#search-collection", "book")
    page.fill("#search-query", "sensors")
    page.fill("#search-where", '{"chapter": {"$near": 3}}')
    page.click("#search-form button[type=submit]")
    page.wait_for_selector("#where-error:visible")
    shown = page.inner_text("#where-error")
    expected = httpx.post(f"{server.url}/collections/book/search", headers=hdr(server),
                          json={"query": "sensors", "where": {"chapter": {"$near": 3}}}).json()
    assert expected["message"] in shown
    # malformed JSON is caught before anything is sent
    page.fill("#search-where", '{"chapter": ')
    page.click("#search-form button[type=submit]")
    page.wait_for_function(
        "document.querySelector('#where-error').textContent.includes('not valid JSON')")
    console.shot("where-error")
    # the only console line is the browser's own note about the 400 response
    assert all("400" in e for e in console.errors), console.errors


def test_upload_runs_to_completion_with_progress(console: Console, server: LiveServer,
                                                  tmp_path: Path) -> None:
    doc = tmp_path / "field-notes.md"
    doc.write_text("# Field notes\n\n" + "\n\n".join(
        f"## Note {i}\n\nThe rover's wheel encoder drifted by {i} ticks near crater {i}."
        for i in range(12)), encoding="utf-8")
    assert doc.stat().st_size > SYNC_MAX
    console.sign_in()
    console.open("ingest")
    page = console.page
    page.set_input_files("#upload-file", str(doc))
    page.click("#upload-form button[type=submit]")
    page.wait_for_selector("#progress:visible")
    page.wait_for_selector("#progress[data-state=done]", timeout=60_000)
    assert page.get_attribute("#progress-bar", "value") == "100"
    label = page.inner_text("#progress-label")
    assert "succeeded" in label
    stats = page.inner_text("#progress-stats")
    assert "Chunks written" in stats
    console.shot("upload-done")
    # the history shows the job, and the text is searchable
    page.click("#jobs-refresh")
    page.wait_for_selector("#jobs-table tbody tr")
    assert "upload" in page.inner_text("#jobs-table tbody tr:first-child")
    r = httpx.post(f"{server.url}/collections/knowledge/search", headers=hdr(server),
                   json={"query": "wheel encoder drift", "limit": 1}).json()
    assert "encoder" in r["results"][0]["text"]
    assert console.errors == []


def test_text_ingest_and_collection_admin(console: Console, server: LiveServer) -> None:
    console.sign_in()
    page = console.page
    # create a scratch collection through the form
    page.click("#create-collection summary")
    page.fill("#create-name", "scratch")
    page.select_option("#create-embedder", "local")
    page.fill("#create-meta", '{"owner": "qa"}')
    page.click("#create-form button[type=submit]")
    page.wait_for_selector("#collections-table tbody tr[data-name=scratch]")
    httpx.post(f"{server.url}/collections/scratch/documents", headers=hdr(server),
               json={"documents": [{"id": "a", "text": "alpha"}, {"id": "b", "text": "beta"}]})
    page.reload()
    page.wait_for_selector("#collections-table tbody tr[data-name=scratch]")
    row = page.locator("#collections-table tbody tr[data-name=scratch]")
    assert row.locator("td").nth(0).inner_text() == "2"

    # metadata: merge keeps the old key
    row.get_by_role("button", name="Edit metadata of scratch").click()
    page.fill("#meta-json", '{"team": "robots"}')
    page.click("#dialog-ok")
    page.wait_for_selector("#dialog", state="hidden")
    meta = httpx.get(f"{server.url}/collections/scratch", headers=hdr(server)).json()["metadata"]
    assert meta["owner"] == "qa" and meta["team"] == "robots"
    # replace drops it
    row.get_by_role("button", name="Edit metadata of scratch").click()
    page.fill("#meta-json", '{"team": "rovers"}')
    page.check("input[name=meta-mode][value=replace]")
    page.click("#dialog-ok")
    page.wait_for_selector("#dialog", state="hidden")
    meta = httpx.get(f"{server.url}/collections/scratch", headers=hdr(server)).json()["metadata"]
    assert meta.get("team") == "rovers" and "owner" not in meta

    # empty asks first; cancelling keeps the documents
    row.get_by_role("button", name="Empty scratch").click()
    console.shot("confirm-empty")
    page.click("#dialog-cancel")
    assert httpx.get(f"{server.url}/collections/scratch", headers=hdr(server)).json()["count"] == 2
    row.get_by_role("button", name="Empty scratch").click()
    page.click("#dialog-ok")
    page.wait_for_selector("#dialog", state="hidden")
    assert httpx.get(f"{server.url}/collections/scratch", headers=hdr(server)).json()["count"] == 0

    # delete needs the name typed
    page.locator("#collections-table tbody tr[data-name=scratch]").get_by_role(
        "button", name="Delete scratch").click()
    page.fill("#confirm-name", "wrong")
    page.click("#dialog-ok")
    page.wait_for_selector("#dialog-error:visible")
    assert httpx.get(f"{server.url}/collections/scratch", headers=hdr(server)).status_code == 200
    page.fill("#confirm-name", "scratch")
    page.click("#dialog-ok")
    page.wait_for_selector("#collections-table tbody tr[data-name=scratch]", state="detached")
    assert httpx.get(f"{server.url}/collections/scratch", headers=hdr(server)).status_code == 404
    assert console.errors == []


def test_every_api_call_carries_the_key(console: Console) -> None:
    """Every request the console makes carries the key it was given."""
    sent: list[tuple[str, str | None]] = []
    console.page.on("request", lambda r: sent.append((r.url, r.headers.get("authorization"))))
    console.sign_in()
    console.open("search")
    console.open("ingest")
    console.open("providers")
    api_calls = [(u, a) for u, a in sent if not u.split("?")[0].rstrip("/").endswith("/ui")
                 and "/ui/" not in u]
    assert len(api_calls) >= 6
    assert all(a == f"Bearer {console.key}" for _, a in api_calls), api_calls
    assert console.page.evaluate("sessionStorage.getItem('ragline.apiKey')") == console.key
    console.page.click("#signout")
    console.page.wait_for_selector("#page-signin h1", state="visible")
    assert console.page.evaluate("sessionStorage.getItem('ragline.apiKey')") is None


def test_directory_job_progress_and_history(console: Console, server: LiveServer) -> None:
    console.sign_in()
    console.open("ingest")
    page = console.page
    page.fill("#dir-path", str(BOOK))
    page.fill("#dir-collection", "book_copy")
    page.click("#dir-form button[type=submit]")
    page.wait_for_selector("#progress[data-state=done]", timeout=90_000)
    stats = page.inner_text("#progress-stats")
    assert "Files" in stats and "Texts embedded" in stats
    jobs = httpx.get(f"{server.url}/ingestion/status", headers=hdr(server),
                     params={"collection": "book_copy"}).json()
    job = jobs["jobs"][0]
    assert job["status"] == "succeeded" and job["files_seen"] > 0
    assert job["job_id"][:8] in page.inner_text("#progress-label")
    page.wait_for_selector(f"#jobs-table tbody tr:has-text('{job['job_id'][:8]}')")
    console.shot("directory-job")
    # a bad path is refused with the server's reason, shown where the progress was
    page.fill("#dir-path", "/definitely/not/here")
    page.click("#dir-form button[type=submit]")
    page.wait_for_selector("#progress[data-state=failed]")
    assert page.inner_text("#progress-error").strip()
    assert all("400" in e for e in console.errors), console.errors


def test_rerank_toggle_follows_the_loaded_cross_encoder(browser: Any, console: Console,
                                                        tmp_path: Path) -> None:
    # this module's server has no cross-encoder: no toggle
    console.sign_in()
    console.open("search")
    assert not console.page.is_visible("#search-rerank")

    from ragline.testing.cross_encoder import tiny_cross_encoder_dir

    srv = LiveServer(tmp_path / "data", "--cross-encoder-path", str(tiny_cross_encoder_dir()),
                     env={"RAGLINE_AUTH": "on"})
    try:
        srv.wait_ready(120)
        KEYS[srv.url] = admin_key(tmp_path / "data")
        httpx.post(f"{srv.url}/collections", headers=hdr(srv), json={"name": "notes",
                                                   "embed": {"provider": "local"}})
        httpx.post(f"{srv.url}/collections/notes/documents", headers=hdr(srv), json={"documents": [
            {"id": "a", "text": "Lidar measures distance with laser pulses."},
            {"id": "b", "text": "Cameras measure light."}]}, timeout=60)
        ctx = browser.new_context(viewport={"width": 1280, "height": 800})
        other = Console(ctx.new_page(), srv.url, KEYS[srv.url])
        other.sign_in()
        other.open("search")
        page = other.page
        assert page.is_visible("#search-rerank")
        page.select_option("#search-collection", "notes")
        page.fill("#search-query", "lidar distance")
        page.check("#search-rerank")
        page.click("#search-form button[type=submit]")
        page.wait_for_selector("#search-results li")
        assert "rerank" in page.inner_text("#search-summary")
        assert "cross-encoder" in page.inner_text("#search-results li:first-child")
        other.shot("search-rerank")
        assert other.errors == []
        ctx.close()
    finally:
        srv.stop()
