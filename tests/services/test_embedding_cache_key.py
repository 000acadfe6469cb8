"""Spec 000, "Embedding Cache Efficiency": collections on the same embedding connection and
model share one cache under the key ``connectionId:model``; hits are logged and counted in
``/info``."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ragline.api.app import create_app
from tests.ingestion_support import fake_of, fake_settings


def test_two_collections_on_one_connection_and_model_share_the_cache(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    settings = fake_settings(tmp_path, auth="off")
    with TestClient(create_app(settings), base_url="http://localhost") as client:
        for name in ("manuals", "faq"):
            r = client.post("/collections", json={"name": name, "embed": {"provider": "fake"}})
            assert r.status_code == 201
            client.post(f"/collections/{name}/documents",
                        json={"documents": [{"id": "x", "text": f"{name} about robots"}]})
        rl = client.app.state.ragline  # type: ignore[attr-defined]
        inner = fake_of(rl, "manuals")
        assert fake_of(rl, "faq") is inner  # one model instance for both
        question = "how do the robots move?"
        client.post("/collections/manuals/search", json={"query": question, "mode": "dense"})
        calls = inner.calls
        with caplog.at_level(logging.DEBUG, logger="ragline.providers.embedders.cache"):
            hits = client.post("/collections/faq/search",
                               json={"query": question, "mode": "dense"}).json()["results"]
        assert [h["id"] for h in hits] == ["x"]
        assert inner.calls == calls  # embedded once, for the first collection only
        assert any("embedding cache fake:fake-bow: 1 hit" in m for m in caplog.messages)
        info = client.get("/info").json()
        entry = info["embedding_cache"]["fake:fake-bow"]
        assert entry["hits"] >= 1
        assert sorted(entry["collections"]) == ["faq", "manuals"]
        totals = info["embedding_cache_totals"]
        assert totals["hits"] == sum(e["hits"] for e in info["embedding_cache"].values())
        assert 0 < totals["hit_rate"] <= 1


def test_another_model_on_the_same_connection_has_its_own_key(tmp_path: Path) -> None:
    settings = fake_settings(tmp_path, auth="off")
    with TestClient(create_app(settings), base_url="http://localhost") as client:
        client.post("/collections", json={"name": "a", "embed": {"provider": "fake"}})
        client.post("/collections", json={"name": "b",
                                          "embed": {"provider": "fake", "model": "other"}})
        for name in ("a", "b"):
            client.post(f"/collections/{name}/documents",
                        json={"documents": [{"id": "1", "text": "robots"}]})
            client.post(f"/collections/{name}/search", json={"query": "robots",
                                                              "mode": "dense"})
        cache = client.get("/info").json()["embedding_cache"]
        assert {"fake:fake-bow", "fake:other"} <= set(cache)
        assert cache["fake:other"]["collections"] == ["b"]


def test_a_named_embedder_connection_is_the_cache_keys_connection_id(tmp_path: Path) -> None:
    """``[connections.ID] kind = "embedders"``: collections name it in ``embed.provider``;
    its id, not the provider's name, is the connection part of the key."""
    from ragline.testing.fake_openai import MODEL, fake_openai_server

    with fake_openai_server() as server:
        settings = fake_settings(tmp_path, auth="off", connections={
            "hosted": {"kind": "embedders", "provider": "openai",
                       "options": {"base_url": server.url, "model": MODEL,
                                   "api_key": "sk-test"}}})
        with TestClient(create_app(settings), base_url="http://localhost") as client:
            for name in ("one", "two"):
                r = client.post("/collections", json={"name": name,
                                                      "embed": {"provider": "hosted"}})
                assert r.status_code == 201, r.text
                assert r.json()["embed"] == {"provider": "hosted", "model": MODEL}
                client.post(f"/collections/{name}/documents", json={"documents": [
                    {"id": "r", "text": "robots move"}, {"id": "b", "text": "bread rises"}]})
            sent = len(server.requests)
            assert sent == 1  # collection two's documents came from the shared cache
            for name in ("one", "two"):
                hits = client.post(f"/collections/{name}/search",
                                   json={"query": "robots move", "mode": "dense",
                                         "limit": 1}).json()["results"]
                assert [h["id"] for h in hits] == ["r"]
            assert len(server.requests) == sent + 1  # one query embedding for both
            cache = client.get("/info").json()["embedding_cache"]
            assert sorted(cache[f"hosted:{MODEL}"]["collections"]) == ["one", "two"]
            conns = client.get("/api/connections").json()["connections"]
            assert {"id": "hosted", "kind": "embedders"}.items() <= conns[1].items()
            health = client.get("/api/connections/hosted/health").json()
            assert health["status"] == "ok" and health["details"]["model"] == MODEL
            unknown = client.post("/collections", json={"name": "x",
                                                        "embed": {"provider": "nope"}})
            assert unknown.status_code == 400 and "available" in unknown.json()["detail"]


def test_the_cache_is_bounded_by_the_bytes_setting(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """``RAGLINE_EMBEDDING_CACHE_BYTES``: the fake model's 16-d vectors count 64 bytes
    plus the entry overhead each, so 3 fit in the budget below; ``/info`` shows the bytes
    held, and the oldest query is embedded again once three newer ones pushed it out."""
    from ragline.providers.embedders.cache import ENTRY_OVERHEAD

    each = 16 * 4 + ENTRY_OVERHEAD
    monkeypatch.setenv("RAGLINE_EMBEDDING_CACHE_BYTES", str(3 * each + 10))
    settings = fake_settings(tmp_path, auth="off")
    assert settings.embedding_cache_bytes == 3 * each + 10
    with TestClient(create_app(settings), base_url="http://localhost") as client:
        client.post("/collections", json={"name": "a", "embed": {"provider": "fake"}})
        client.post("/collections/a/documents",
                    json={"documents": [{"id": "1", "text": "robots move"}]})
        inner = fake_of(client.app.state.ragline, "a")  # type: ignore[attr-defined]

        def search(q: str) -> None:
            r = client.post("/collections/a/search", json={"query": q, "mode": "dense"})
            assert r.json()["results"][0]["id"] == "1"

        for q in ("first query", "second query", "third query", "fourth query"):
            search(q)
        entry = client.get("/info").json()["embedding_cache"]["fake:fake-bow"]
        assert entry["bytes"] <= 3 * each + 10 and entry["size"] == 3
        calls = inner.calls
        search("fourth query")
        assert inner.calls == calls  # recent: still cached
        search("first query")
        assert inner.calls == calls + 1  # the oldest was evicted by the byte bound
