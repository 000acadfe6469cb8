"""``/collections/{c}/sources`` over HTTP (issue 12): tenant-scoped listing, reading and
deleting of ingested sources, and the documents delete keeping their state."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ragline.api.app import create_app
from ragline.facade import Ragline
from tests.ingestion_support import (
    BOOK,
    SENSING,
    fake_settings,
)

pytestmark = pytest.mark.usefixtures("few_payload_indexes")

LESSON = (BOOK / SENSING).read_bytes()


class World:
    def __init__(self, c: TestClient, keys: dict[str, str]) -> None:
        self.c, self.keys = c, keys

    def h(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[who]}"}

    def get(self, who: str, url: str, **kw: Any) -> Any:
        return self.c.get(url, headers=self.h(who), **kw)

    def delete(self, who: str, url: str, body: Any = None) -> Any:
        return self.c.request("DELETE", url, json=body, headers=self.h(who))

    def upload(self, who: str, name: str, data: bytes) -> Any:
        r = self.c.post("/api/rag/ingest/upload?collection=kb", headers=self.h(who),
                        files={"documentFile": (name, data, "text/markdown")})
        assert r.status_code == 201, r.text
        return r.json()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    settings = fake_settings(tmp_path, auth="on", default_collection="kb")
    with TestClient(create_app(settings), base_url="http://localhost") as c:
        rl: Ragline = c.app.state.ragline  # type: ignore[attr-defined]
        me = rl.owner()
        keys = {"admin": rl.keys.create(me, "admin", "default", "ops")[1],
                "alice": rl.keys.create(me, "user", "alice")[1],
                "bob": rl.keys.create(me, "user", "bob")[1]}
        w = World(c, keys)
        r = c.post("/collections", json={"name": "kb", "embed": {"provider": "fake"}},
                   headers=w.h("admin"))
        assert r.status_code == 201, r.text
        yield w


def test_list_get_and_delete_a_source(world: World) -> None:
    up = world.upload("alice", "sensing.md", LESSON)
    world.upload("alice", "notes.txt", b"Short notes about motors and gears.\n")
    r = world.get("alice", "/collections/kb/sources")
    assert r.status_code == 200
    body = r.json()
    assert body["count"] == body["total"] == 2
    first = {s["source_id"]: s for s in body["sources"]}["upload/sensing.md"]
    import hashlib
    assert first == first | {"origin": "upload", "source_path": "sensing.md",
                             "state": "ingested", "chunk_count": up["chunksCreated"],
                             "source_hash": hashlib.sha256(LESSON).hexdigest(), "root": None}
    assert first["created_at"] and first["updated_at"]
    one = world.get("alice", "/collections/kb/sources/upload/sensing.md").json()
    assert one["chunks_in_store"] == len(one["chunk_ids"]) == up["chunksCreated"]
    assert one["title"] == "Lesson 1.1: How Robots Sense"
    page = world.get("alice", "/collections/kb/sources", params={"limit": 1, "offset": 1})
    assert [s["source_id"] for s in page.json()["sources"]] == ["upload/sensing.md"]
    r = world.delete("alice", "/collections/kb/sources/upload/sensing.md")
    assert r.status_code == 200
    assert r.json() == {"status": "deleted", "collection": "kb",
                        "source_id": "upload/sensing.md", "count_deleted": up["chunksCreated"]}
    docs = world.get("alice", "/collections/kb/documents").json()
    assert all(d["metadata"]["source_id"] != "upload/sensing.md" for d in docs["documents"])
    assert world.get("alice", "/collections/kb/sources").json()["total"] == 1
    again = world.upload("alice", "sensing.md", LESSON)
    assert again["unchanged"] is False and again["chunksCreated"] == up["chunksCreated"]


def test_another_tenants_source_is_a_404(world: World) -> None:
    world.upload("alice", "sensing.md", LESSON)
    assert world.get("bob", "/collections/kb/sources").json() == {"sources": [], "count": 0,
                                                                   "total": 0}
    for r in (world.get("bob", "/collections/kb/sources/upload/sensing.md"),
              world.delete("bob", "/collections/kb/sources/upload/sensing.md")):
        assert r.status_code == 404
        assert r.json()["error"] == "source_not_found"
        assert r.json()["message"] == "Source 'upload/sensing.md' not found in collection 'kb'"
    one = world.get("alice", "/collections/kb/sources/upload/sensing.md").json()
    assert one["chunks_in_store"] > 0  # untouched
    r = world.get("alice", "/collections/nope/sources")
    assert r.status_code == 404 and r.json()["error"] == "collection_not_found"


def test_documents_delete_keeps_the_ingestion_state(world: World) -> None:
    """The issue: deleting an upload's chunks through DELETE /documents, then re-sending
    it, answered 'unchanged' while the store held nothing."""
    up = world.upload("alice", "sensing.md", LESSON)
    r = world.delete("alice", "/collections/kb/documents",
                     {"where": {"source_id": "upload/sensing.md"}})
    assert r.status_code == 200 and r.json()["count_deleted"] == up["chunksCreated"]
    assert world.get("alice", "/collections/kb/sources").json()["total"] == 0
    again = world.upload("alice", "sensing.md", LESSON)
    assert again["unchanged"] is False
    assert world.get("alice", "/collections/kb").json()["count"] == up["chunksCreated"]
    ids = world.get("alice", "/collections/kb/sources/upload/sensing.md").json()["chunk_ids"]
    world.delete("alice", "/collections/kb/documents", {"ids": ids[:1]})
    one = world.get("alice", "/collections/kb/sources/upload/sensing.md").json()
    assert one["state"] == "modified" and one["chunk_ids"] == ids[1:]
    assert world.upload("alice", "sensing.md", LESSON)["unchanged"] is False


def test_source_routes_are_in_the_openapi_document(world: World) -> None:
    paths = world.c.get("/openapi.json").json()["paths"]
    assert set(paths["/collections/{name}/sources"]) == {"get"}
    assert set(paths["/collections/{name}/sources/{source_id}"]) == {"get", "delete"}
