"""``/context/{chunk_id}``, ``/lesson/{parent_doc_id}`` and search ``expand`` over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ragline.api.app import create_app
from ragline.facade import Ragline
from tests.api.helpers import local_client
from tests.ingestion_support import (
    SENSING,
    by_parent,
    edit_section,
    fake_settings,
    sid,
    stored,
)

pytestmark = pytest.mark.usefixtures("few_payload_indexes")


@pytest.fixture
def client(tmp_path: Path, book: Path) -> Iterator[TestClient]:
    with local_client(create_app(fake_settings(tmp_path))) as c:
        rl_of(c).services.ingest.run_directory("book", "default", book)
        yield c


def rl_of(client: TestClient) -> Ragline:
    rl: Ragline = client.app.state.ragline  # type: ignore[attr-defined]
    return rl


def chunk_ids(client: TestClient) -> list[str]:
    return [r.id for r in by_parent(stored(rl_of(client)))[sid(SENSING)]]


def test_context_nulls_at_the_ends_and_windows(client: TestClient) -> None:
    ids = chunk_ids(client)
    first = client.get(f"/context/{ids[0]}").json()
    assert first["chunk"]["id"] == ids[0] and first["chunk"]["chunk_index"] == 0
    assert first["prev"] is None and first["prev_chunk_id"] is None
    assert first["next"]["id"] == ids[1] and first["next_chunk_id"] == ids[1]
    last = client.get(f"/context/{ids[-1]}", params={"collection": "book"}).json()
    assert last["next"] is None and last["next_chunk_id"] is None
    assert last["prev"]["id"] == ids[-2]
    window = client.get(f"/context/{ids[2]}", params={"window": 3}).json()
    assert [c["id"] for c in window["prev"]] == ids[:2]
    assert [c["id"] for c in window["next"]] == ids[3:6]
    r = client.get("/context/00000000-0000-0000-0000-000000000000")
    assert r.status_code == 404 and r.json()["error"] == "document_not_found"
    r = client.get(f"/context/{ids[0]}", params={"window": 0})
    assert r.status_code == 400
    r = client.get(f"/context/{ids[0]}", params={"collection": "nope"})
    assert r.status_code == 404


def test_lesson_returns_every_chunk_in_order(client: TestClient, book: Path) -> None:
    ids = chunk_ids(client)
    body = client.get(f"/lesson/{sid(SENSING)}").json()
    assert body["total_chunks"] == len(ids) == len(body["chunks"])
    assert [c["id"] for c in body["chunks"]] == ids
    assert [c["chunk_index"] for c in body["chunks"]] == list(range(len(ids)))
    assert body["title"] == "Lesson 1.1: How Robots Sense"
    assert "Robots act on what they perceive" in body["text"]
    r = client.get("/lesson/module-9/chapter-9/99-missing")
    assert r.status_code == 404 and "not found" in r.json()["message"]
    # after an edit, the lesson is the new version, whole and in order
    edit_section(book / SENSING, "Cameras", "A new camera section for the lesson test.")
    rl_of(client).services.ingest.run_directory("book", "default", book)
    body = client.get(f"/lesson/{sid(SENSING)}").json()
    assert "A new camera section" in body["text"]
    assert [c["chunk_index"] for c in body["chunks"]] == list(range(body["total_chunks"]))


def search(client: TestClient, **body: Any) -> list[dict[str, Any]]:
    r = client.post("/search", json={"query": "lidar point clouds", "limit": 2, **body})
    assert r.status_code == 200, r.text
    return r.json()["results"]  # type: ignore[no-any-return]


def test_search_expand(client: TestClient) -> None:
    plain = search(client)
    assert "context" not in plain[0]
    nb = search(client, expand="neighbors")
    meta = nb[0]["metadata"]
    expected = [i for i in (meta["prev_chunk_id"], nb[0]["id"], meta["next_chunk_id"]) if i]
    assert nb[0]["context_ids"] == expected and nb[0]["expand"] == "neighbors"
    # the context joins chunk bodies: the hit's contextual header is not repeated there
    header = meta.get("chunk_header")
    body = nb[0]["text"].removeprefix(f"{header}\n\n") if header else nb[0]["text"]
    assert body in nb[0]["context"]
    doc = search(client, expand="document")
    lesson = client.get(f"/lesson/{doc[0]['metadata']['parent_doc_id']}").json()
    assert doc[0]["context_ids"] == [c["id"] for c in lesson["chunks"]]
    assert doc[0]["context"] == lesson["text"]
    r = client.post("/search", json={"query": "x", "expand": "everything"})
    assert r.status_code == 400
