"""The chat page appears when the server has ``POST /api/chat`` and renders a streamed answer.

The server is the real app (real uvicorn) with ragline's own ``/api/chat``; the chat
model is the scripted test model, so the console's feature detection and its
event-stream reader are tested on ragline's real SSE events (``token`` then ``done``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragline.api.app import create_app
from ragline.facade import DocumentInput, Ragline
from ragline.testing.scripted_llm import ScriptedChatModel
from ragline.testing.server import serve_in_thread
from tests.e2e.browser import desktop_page
from tests.e2e.test_console import Console
from tests.ingestion_support import fake_settings

pytestmark = pytest.mark.slow


@pytest.fixture
def chat_url(tmp_path: Path) -> Iterator[str]:
    # threshold 0: this test is about the console, not about which documents pass it
    settings = fake_settings(tmp_path, default_collection="book", rag_relevance_threshold=0.0)
    llm = ScriptedChatModel(replies=['{"tool_name": "none"}'],
                            default="Robots sense with lidar.")
    rl = Ragline(settings, llm=llm).start()
    rl.collections.create(rl.owner(), "book", embed={"provider": "fake"})
    rl.documents.add(rl.owner(), "book", [DocumentInput(
        "How do robots sense? With lidar, cameras and touch sensors.",
        {"title": "Lesson 1.1: How Robots Sense"}, None, "l1")])
    with serve_in_thread(create_app(ragline=rl)) as url:
        yield url
    rl.close()
    asked = [c.prompt for c in llm.calls]
    assert asked and all("How do robots sense?" in p for p in asked)


@pytest.fixture
def page(chat_url: str) -> Iterator[Any]:
    with desktop_page() as p:
        yield p


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
