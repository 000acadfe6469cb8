"""The chat page appears when the server has ``POST /api/chat`` and renders a streamed answer.

The chat endpoint is built elsewhere; this server adds a scripted one (same
app otherwise, real uvicorn) so the console's feature detection and its
event-stream reader are tested on their own.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from ragline.api.app import create_app
from ragline.settings import Settings
from ragline.testing.server import serve_in_thread
from tests.e2e.browser import chromium_path, playwright_or_skip
from tests.e2e.test_console import Console

pytestmark = pytest.mark.slow


class ChatBody(BaseModel):
    message: str


@pytest.fixture
def chat_url(tmp_path: Path) -> Iterator[str]:
    app = create_app(Settings(data_dir=tmp_path / "data", _env_file=None))  # type: ignore[call-arg]
    asked: list[str] = []

    @app.post("/api/chat")
    async def chat(body: ChatBody) -> StreamingResponse:
        asked.append(body.message)

        async def events() -> AsyncIterator[str]:
            for part in ({"delta": "Robots sense "}, {"delta": "with lidar."},
                         {"sources": [{"title": "Lesson 1.1: How Robots Sense"}], "path": "rag"}):
                yield f"data: {json.dumps(part)}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    with serve_in_thread(app) as url:
        yield url
    assert asked == ["How do robots sense?"]


@pytest.fixture
def page(chat_url: str) -> Iterator[Any]:
    exe = chromium_path()
    sync_playwright: Any = playwright_or_skip()
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        p = b.new_page(viewport={"width": 1280, "height": 800})
        p.set_default_timeout(20_000)
        yield p
        b.close()


def test_chat_page_streams_answer_with_sources(page: Any, chat_url: str) -> None:
    console = Console(page, chat_url)
    console.sign_in()
    assert page.is_visible("#nav-chat")
    console.open("chat")
    page.fill("#chat-input", "How do robots sense?")
    page.keyboard.press("Control+Enter")
    page.wait_for_function(
        "document.querySelector('.msg.assistant .answer')?.textContent === "
        "'Robots sense with lidar.'")
    extra = page.inner_text(".msg.assistant .sources")
    assert "path: rag" in extra and "Lesson 1.1: How Robots Sense" in extra
    console.shot("chat")
    assert console.errors == []
