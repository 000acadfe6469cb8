"""Every refusal caused by configuration names the setting that would change it (issue 33):
a person reading the message knows what to set, without reading the code."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ragline.api.app import create_app
from ragline.facade import Ragline
from tests.ingestion_support import fake_settings


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    (tmp_path / "root").mkdir()
    settings = fake_settings(tmp_path, ingest_allowed_roots=[tmp_path / "root"],
                             max_upload_bytes=64, max_documents_per_request=2,
                             allowed_hosts=["testserver"])
    rl = Ragline(settings).start()
    rl.collections.create(rl.owner(), "book", embed={"provider": "fake"})
    with TestClient(create_app(ragline=rl)) as c:
        yield c
    rl.close()


def _refusal(r: object, status: int, setting: str) -> None:
    assert r.status_code == status, r.text  # type: ignore[attr-defined]
    assert setting in r.json()["message"], r.json()  # type: ignore[attr-defined]


def test_each_configured_limit_is_named(client: TestClient, tmp_path: Path) -> None:
    _refusal(client.post("/ingestion/trigger", json={"collection": "book",
                                                     "path": str(tmp_path)}),
             400, "RAGLINE_INGEST_ALLOWED_ROOTS")
    _refusal(client.post("/api/rag/ingest/text", json={"text": "x" * 100}),
             413, "max_upload_bytes")
    _refusal(client.post("/api/rag/ingest/upload",
                         files={"documentFile": ("a.md", b"y" * 100, "text/markdown")},
                         headers={"X-API-Key": "any"}),  # auth is off here; forms need one
             413, "max_upload_bytes")
    _refusal(client.post("/collections/book/documents", json={"documents": [
        {"id": str(i), "text": "t"} for i in range(3)]}), 413, "max_documents_per_request")
    _refusal(client.post("/api/rag/ingest/url", json={"url": "http://127.0.0.1:9/x"}),
             400, "allow_private_urls")
    _refusal(client.post("/api/chat", json={"message": "hi", "collection": "book"}),
             503, "RAGLINE_LLM_BASE_URL")


def test_rerank_without_a_cross_encoder_names_the_setting(client: TestClient) -> None:
    client.post("/collections/book/documents", json={"documents": [{"id": "a", "text": "t"}]})
    r = client.post("/collections/book/search", json={"query": "t", "rerank": True})
    assert r.status_code == 200
    assert any("cross_encoder_model" in w for w in r.json()["warnings"]), r.json()


def test_chat_without_a_collection_names_the_default_setting(tmp_path: Path) -> None:
    """The console's old failure: every message answered a bare "Collection 'knowledge'
    not found" when the default collection did not exist."""
    from ragline.testing.scripted_llm import ScriptedChatModel

    settings = fake_settings(tmp_path, default_collection="knowledge",
                             allowed_hosts=["testserver"])
    rl = Ragline(settings, llm=ScriptedChatModel()).start()
    try:
        with TestClient(create_app(ragline=rl)) as c:
            _refusal(c.post("/api/chat", json={"message": "hi", "stream": False}), 404,
                     "RAGLINE_DEFAULT_COLLECTION")
            rl.collections.create(rl.owner(), "knowledge", embed={"provider": "fake"})
            ok = c.post("/api/chat", json={"message": "hi", "stream": False})
            assert ok.status_code == 200, ok.text
    finally:
        rl.close()
