"""Operational views scoped to the caller (issue 32 item 4) and spec 004's per-collection
health status (issue 37 item 5): an admin, two user keys and a collection whose
``tenants`` list names only one of them, against the real app."""

from __future__ import annotations

import json

import pytest

from tests.api.helpers import Keyed


@pytest.fixture
def world(keyed: Keyed) -> Keyed:
    for name, meta in (("shared", {}), ("alice-only", {"tenants": ["alice"]})):
        r = keyed.post("admin", "/collections", {
            "name": name, "embed": {"provider": "fake"}, "metadata": meta})
        assert r.status_code == 201, r.text
    assert keyed.post("admin", "/collections", {"name": "unused"}).status_code == 201
    for who, coll in (("alice", "alice-only"), ("alice", "shared"), ("bob", "shared")):
        r = keyed.post(who, f"/collections/{coll}/documents", {
            "documents": [{"id": f"{who}-1", "text": f"{who} private words"}]})
        assert r.status_code == 200, r.text
    # alice searches: warms the embedding cache with her query
    r = keyed.post("alice", "/collections/alice-only/search",
                   {"query": "merger plans of acme", "limit": 1})
    assert r.status_code == 200, r.text
    return keyed


def test_info_for_a_user_key_shows_only_its_tenants_view(world: Keyed) -> None:
    bob = world.json("bob", "/info")
    assert [c["name"] for c in bob["collections"]] == ["shared", "unused"]
    assert "alice-only" not in json.dumps(bob)
    assert bob["scope"] == "tenant" and bob["total_documents"] == 1
    for secret in ("storage_bytes", "embedding_cache", "embedding_cache_totals",
                   "search_batching", "indexing", "catalog"):
        assert secret not in bob, secret
    assert all("size_bytes" not in c for c in bob["collections"])
    alice = world.json("alice", "/info")
    assert sorted(c["name"] for c in alice["collections"]) == ["alice-only", "shared", "unused"]
    assert alice["total_documents"] == 2 and "embedding_cache" not in alice


def test_info_for_an_admin_keeps_every_figure(world: Keyed) -> None:
    admin = world.json("admin", "/info")
    assert admin["scope"] == "server"
    assert {c["name"] for c in admin["collections"]} == {"alice-only", "shared", "unused"}
    assert admin["storage_bytes"] > 0
    assert admin["embedding_cache_totals"]["misses"] >= 1
    assert all(c["size_bytes"] >= 0 for c in admin["collections"])


def test_health_anonymous_is_minimal(world: Keyed) -> None:
    body = world.json(None, "/health")
    assert set(body) <= {"status", "timestamp", "version", "cross_encoder", "chat"}
    assert body["status"] == "healthy"
    text = json.dumps(body)
    assert "shared" not in text and "alice" not in text


def test_health_with_a_user_key_lists_only_readable_collections(world: Keyed) -> None:
    bob = world.json("bob", "/health")
    assert bob["collections"] == 2
    assert {c["name"]: c["status"] for c in bob["collection_status"]} == {
        "shared": "ok", "unused": "empty"}
    assert "alice-only" not in json.dumps(bob)
    assert "storage_bytes" not in bob
    assert bob["store"]["details"] == {"engine": "qdrant-edge"}  # the engine only
    assert bob["disk"] == {"writes_allowed": True}
    alice = world.json("alice", "/health")
    assert {c["name"]: c["status"] for c in alice["collection_status"]} == {
        "alice-only": "ok", "shared": "ok", "unused": "empty"}


def test_health_with_an_admin_key_is_complete(world: Keyed) -> None:
    admin = world.json("admin", "/health")
    assert admin["collections"] == 3 and admin["storage_bytes"] > 0
    assert admin["store"]["details"]["engine"] == "qdrant-edge"
    assert admin["disk"]["free_bytes"] > 0
    assert {c["name"] for c in admin["collection_status"]} == {"alice-only", "shared", "unused"}


def test_health_with_a_refused_key_is_the_anonymous_answer(world: Keyed) -> None:
    r = world.c.get("/health", headers={"Authorization": "Bearer rl_000000000000_nope"})
    assert r.status_code == 200
    assert set(r.json()) <= {"status", "timestamp", "version", "cross_encoder", "chat"}


def test_connection_health_hides_the_address_from_user_keys(world: Keyed) -> None:
    user = world.json("bob", "/api/connections/local/health")
    assert user["status"] == "ok" and user["details"] == {}
    admin = world.json("admin", "/api/connections/local/health")
    assert admin["details"]["engine"] == "qdrant-edge"
