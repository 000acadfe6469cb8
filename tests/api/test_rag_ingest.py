"""hermitAI ingestion endpoints: upload, URL (with the SSRF guard) and text."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ragline.api.app import create_app
from ragline.facade import Ragline
from ragline.testing.server import serve_handler, static_page
from tests.api.helpers import local_client
from tests.ingestion_support import (
    BOOK,
    SENSING,
    fake_settings,
)

pytestmark = pytest.mark.usefixtures("few_payload_indexes")

PAGE = b"""<html><head><title>Grippers</title></head><body><article>
<h1>Robot Grippers</h1><p>Parallel grippers close two fingers on an object with force.</p>
<h2>Suction</h2><p>Suction cups hold flat objects with a vacuum pump and a seal.</p>
</article></body></html>"""


@pytest.fixture
def page_url() -> Iterator[str]:
    with serve_handler(static_page(PAGE)) as url:
        yield f"{url}/grippers.html"


def make_client(tmp_path: Path, **overrides: Any) -> TestClient:
    settings = fake_settings(tmp_path, default_collection="knowledge", max_upload_bytes=4096,
                             ingest_sync_max_bytes=2048, **overrides)
    return local_client(create_app(settings))


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with make_client(tmp_path) as c:
        yield c


def upload(client: TestClient, name: str, data: bytes, field: str = "documentFile") -> Any:
    return client.post("/api/rag/ingest/upload", files={field: (name, data, "text/plain")})


def test_upload_markdown_is_201_with_the_spec_summary(client: TestClient) -> None:
    data = (BOOK / SENSING).read_bytes()[:1800]
    r = upload(client, "sensing.md", data)
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["message"] == "Document processed successfully."
    assert body["sourceId"] == "upload/sensing.md" and body["chunksCreated"] >= 1
    listed = client.get("/collections/knowledge").json()  # the default collection
    assert listed["count"] == body["chunksCreated"]
    again = upload(client, "sensing.md", data)
    assert again.status_code == 201 and again.json()["unchanged"] is True


def test_upload_errors(client: TestClient) -> None:
    r = upload(client, "big.txt", b"word " * 1000)
    assert r.status_code == 413 and r.json()["error"] == "payload_too_large"
    assert "limit 4096 bytes" in r.json()["message"]
    r = upload(client, "image.png", b"\x89PNG....")
    assert r.status_code == 400 and "Unsupported file type '.png'" in r.json()["message"]
    r = upload(client, "empty.txt", b"  \n")
    assert r.status_code == 400 and "empty" in r.json()["message"]
    r = upload(client, "notes.txt", b"text", field="file")
    assert r.status_code == 400 and "'documentFile' is required" in r.json()["message"]
    r = client.post("/api/rag/ingest/upload", json={"documentFile": "x"})
    assert r.status_code == 400 and "multipart/form-data" in r.json()["message"]


def test_large_upload_becomes_a_job(client: TestClient) -> None:
    data = b"Robots grip things with fingers and suction.\n\n" * 70  # > 2048, < 4096
    r = upload(client, "long.txt", data)
    assert r.status_code == 202, r.text
    rl: Ragline = client.app.state.ragline  # type: ignore[attr-defined]
    job = rl.ingestion.wait(rl.owner(), r.json()["jobId"], timeout=60)
    assert job.status == "succeeded" and job.kind == "upload"
    status = client.get(f"/ingestion/status/{job.id}").json()
    assert status["result"]["sourceId"] == "upload/long.txt"
    assert status["result"]["chunksCreated"] == client.get("/collections/knowledge").json()[
        "count"]


def test_text_endpoint(client: TestClient) -> None:
    r = client.post("/api/rag/ingest/text", json={"title": "My Notes on X",
                                                  "text": "Servo motors hold a position."})
    assert r.status_code == 201
    assert r.json()["sourceId"].startswith("text-") and r.json()["chunksCreated"] == 1
    assert r.json()["title"] == "My Notes on X"
    for body in ({"title": "t", "text": "   "}, {"title": "t"}):
        r = client.post("/api/rag/ingest/text", json=body)
        assert r.status_code == 400 and r.json()["error"] == "invalid_request"
        assert "'text' is required" in r.json()["message"]


def test_url_is_refused_for_private_addresses(client: TestClient, page_url: str) -> None:
    r = client.post("/api/rag/ingest/url", json={"url": page_url})
    assert r.status_code == 400
    assert "loopback" in r.json()["message"] and "refusing" in r.json()["message"]
    r = client.post("/api/rag/ingest/url", json={"url": "http://169.254.169.254/latest/"})
    assert r.status_code == 400 and "metadata" in r.json()["message"]
    r = client.post("/api/rag/ingest/url", json={"url": "ftp://example.com/x"})
    assert r.status_code == 400


def test_url_is_fetched_when_private_addresses_are_allowed(tmp_path: Path,
                                                           page_url: str) -> None:
    with make_client(tmp_path, allow_private_urls=True) as c:
        r = c.post("/api/rag/ingest/url", json={"url": page_url})
        assert r.status_code == 201, r.text
        assert r.json()["sourceId"] == page_url and r.json()["chunksCreated"] >= 1
        docs = c.get("/collections/knowledge/documents").json()["documents"]
        assert all(d["metadata"]["source_url"] == page_url for d in docs)
        assert any("Suction cups" in d["text"] for d in docs)
