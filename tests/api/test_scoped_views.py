"""Operational views scoped to the caller (issue 32 item 4) and spec 004's per-collection
health status (issue 37 item 5): an admin, two user keys and a collection whose
``tenants`` list names only one of them, against the real app."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ragline.api.app import create_app
from ragline.facade import Ragline
from tests.ingestion_support import fake_settings


class Keys:
    def __init__(self, client: TestClient, keys: dict[str, str]) -> None:
        self.c = client
        self.keys = keys

    def get(self, who: str | None, url: str) -> Any:
        headers = {"Authorization": f"Bearer {self.keys[who]}"} if who else {}
        r = self.c.get(url, headers=headers)
        assert r.status_code == 200, r.text
        return r.json()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[Keys]:
    settings = fake_settings(tmp_path, auth="on")
    with TestClient(create_app(settings), base_url="http://localhost") as c:
        rl: Ragline = c.app.state.ragline  # type: ignore[attr-defined]
        me = rl.owner()
        keys = {"admin": rl.keys.create(me, "admin", "default", "ops")[1],
                "alice": rl.keys.create(me, "user", "alice")[1],
                "bob": rl.keys.create(me, "user", "bob")[1]}
        admin = {"Authorization": f"Bearer {keys['admin']}"}
        for name, meta in (("shared", {}), ("alice-only", {"tenants": ["alice"]})):
            r = c.post("/collections", headers=admin, json={
                "name": name, "embed": {"provider": "fake"}, "metadata": meta})
            assert r.status_code == 201, r.text
        r = c.post("/collections", headers=admin, json={"name": "unused"})
        assert r.status_code == 201
        for who, coll in (("alice", "alice-only"), ("alice", "shared"), ("bob", "shared")):
            r = c.post(f"/collections/{coll}/documents",
                       headers={"Authorization": f"Bearer {keys[who]}"},
                       json={"documents": [{"id": f"{who}-1", "text": f"{who} private words"}]})
            assert r.status_code == 200, r.text
        # alice searches: warms the embedding cache with her query
        r = c.post("/collections/alice-only/search",
                   headers={"Authorization": f"Bearer {keys['alice']}"},
                   json={"query": "merger plans of acme", "limit": 1})
        assert r.status_code == 200, r.text
        yield Keys(c, keys)


def test_info_for_a_user_key_shows_only_its_tenants_view(world: Keys) -> None:
    bob = world.get("bob", "/info")
    assert [c["name"] for c in bob["collections"]] == ["shared", "unused"]
    assert "alice-only" not in json.dumps(bob)
    assert bob["scope"] == "tenant" and bob["total_documents"] == 1
    for secret in ("storage_bytes", "embedding_cache", "embedding_cache_totals",
                   "search_batching", "indexing", "catalog"):
        assert secret not in bob, secret
    assert all("size_bytes" not in c for c in bob["collections"])
    alice = world.get("alice", "/info")
    assert sorted(c["name"] for c in alice["collections"]) == ["alice-only", "shared", "unused"]
    assert alice["total_documents"] == 2 and "embedding_cache" not in alice


def test_info_for_an_admin_keeps_every_figure(world: Keys) -> None:
    admin = world.get("admin", "/info")
    assert admin["scope"] == "server"
    assert {c["name"] for c in admin["collections"]} == {"alice-only", "shared", "unused"}
    assert admin["storage_bytes"] > 0
    assert admin["embedding_cache_totals"]["misses"] >= 1
    assert all(c["size_bytes"] >= 0 for c in admin["collections"])


def test_health_anonymous_is_minimal(world: Keys) -> None:
    body = world.get(None, "/health")
    assert set(body) <= {"status", "timestamp", "version", "cross_encoder", "chat"}
    assert body["status"] == "healthy"
    text = json.dumps(body)
    assert "shared" not in text and "alice" not in text


def test_health_with_a_user_key_lists_only_readable_collections(world: Keys) -> None:
    bob = world.get("bob", "/health")
    assert bob["collections"] == 2
    assert {c["name"]: c["status"] for c in bob["collection_status"]} == {
        "shared": "ok", "unused": "empty"}
    assert "alice-only" not in json.dumps(bob)
    assert "storage_bytes" not in bob
    assert bob["store"]["details"] == {"engine": "qdrant-edge"}  # the engine only
    assert bob["disk"] == {"writes_allowed": True}
    alice = world.get("alice", "/health")
    assert {c["name"]: c["status"] for c in alice["collection_status"]} == {
        "alice-only": "ok", "shared": "ok", "unused": "empty"}


def test_health_with_an_admin_key_is_complete(world: Keys) -> None:
    admin = world.get("admin", "/health")
    assert admin["collections"] == 3 and admin["storage_bytes"] > 0
    assert admin["store"]["details"]["engine"] == "qdrant-edge"
    assert admin["disk"]["free_bytes"] > 0
    assert {c["name"] for c in admin["collection_status"]} == {"alice-only", "shared", "unused"}


def test_health_with_a_refused_key_is_the_anonymous_answer(world: Keys) -> None:
    r = world.c.get("/health", headers={"Authorization": "Bearer rl_000000000000_nope"})
    assert r.status_code == 200
    assert set(r.json()) <= {"status", "timestamp", "version", "cross_encoder", "chat"}


def test_connection_health_hides_the_address_from_user_keys(world: Keys) -> None:
    user = world.get("bob", "/api/connections/local/health")
    assert user["status"] == "ok" and user["details"] == {}
    admin = world.get("admin", "/api/connections/local/health")
    assert admin["details"]["engine"] == "qdrant-edge"
