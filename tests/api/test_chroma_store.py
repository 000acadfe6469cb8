"""A ragline whose store is Chroma (in-process and a real server): what differs from the
default store is said clearly — health, the registry's capabilities, and 400s for the
text modes Chroma cannot run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

pytest.importorskip("chromadb")

from ragline.api.app import create_app
from ragline.providers.registry import registry
from ragline.settings import Settings
from ragline.testing.fake_embedder import FakeEmbedder
from tests.api.helpers import add, doc, make_collection
from tests.conftest import store_settings


@pytest.fixture(params=["chroma", "chroma-server"])
def chroma_client(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TestClient]:
    registry.register("embedders", "fake", FakeEmbedder)
    settings = Settings(data_dir=tmp_path / "data", _env_file=None,  # type: ignore[call-arg]
                        **store_settings(request.param, request))
    with TestClient(create_app(settings),
                    base_url="http://localhost") as c:
        yield c


def test_health_reports_chroma_heartbeat_version_and_collections(
    chroma_client: TestClient,
) -> None:
    make_collection(chroma_client, "a")
    add(chroma_client, "a", [doc(i) for i in range(5)])
    body = chroma_client.get("/health").json()
    assert body["status"] == "healthy"
    store = body["store"]
    assert store["status"] == "ok" and store["details"]["engine"] == "chroma"
    assert store["details"]["heartbeat_ns"] > 0 and store["details"]["version"]
    assert store["details"]["collection_count"] == 1
    info = chroma_client.get("/info").json()
    assert info["collections"][0]["count"] == 5 and info["collections"][0]["size_bytes"] > 0


def test_registry_lists_chroma_without_hybrid(chroma_client: TestClient) -> None:
    stores = {p["name"]: p for p in chroma_client.get("/api/providers").json()["stores"]}
    assert "hybrid" not in stores["chroma"]["capabilities"]
    assert "hybrid" in stores["qdrant-edge"]["capabilities"]
    assert {"host", "port", "path", "headers"} <= set(stores["chroma"]["schema"]["properties"])


def test_text_queries_are_dense_and_bm25_modes_are_400(chroma_client: TestClient) -> None:
    make_collection(chroma_client, "book", embed={"provider": "fake"})
    add(chroma_client, "book", [
        {"id": "ros", "text": "ROS 2 topics carry messages between nodes", "metadata": {"m": 1}},
        {"id": "cats", "text": "Cats sleep on warm mats", "metadata": {"m": 2}},
    ])
    r = chroma_client.post("/collections/book/search", json={"query": "ROS 2 topics carry"})
    assert r.status_code == 200, r.text
    assert r.json()["mode"] == "dense" and r.json()["results"][0]["id"] == "ros"
    for mode in ("sparse", "hybrid"):
        r = chroma_client.post("/collections/book/search",
                               json={"query": "ROS topics", "mode": mode})
        assert r.status_code == 400
        assert r.json()["detail"] == (
            f"Mode '{mode}' needs BM25 (capability 'hybrid'), which the 'chroma' store of "
            "collection 'book' does not have; use mode 'dense'")
