"""Text queries: server-side embedding, dense/sparse/hybrid modes, thresholds, /search."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ragline.api.app import create_app
from ragline.providers.registry import registry
from ragline.settings import Settings
from ragline.testing.fake_embedder import FakeEmbedder
from tests.api.helpers import local_client

HT = "hardware_tier"
DOCS = [
    ("robots", "Robots perceive the world with lidar and cameras", {HT: 1, "module": "m1"}),
    ("ros", "ROS 2 topics carry messages between nodes", {HT: 2, "module": "m1"}),
    ("cats", "Cats sleep on warm mats all afternoon", {HT: 1, "module": "m2"}),
    ("urdf", "URDF joint limits describe how far a robot joint moves", {HT: 3,
                                                                       "module": "m2"}),
    ("gazebo", "Gazebo simulates robots with physics and sensors", {HT: 4, "module": "m3"}),
]


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    registry.register("embedders", "fake", FakeEmbedder)
    settings.default_collection = "book"
    with local_client(create_app(settings)) as c:
        r = c.post("/collections", json={"name": "book", "embed": {"provider": "fake"}})
        assert r.status_code == 201, r.text
        assert r.json()["dimension"] == 16
        docs = [{"id": i, "text": t, "metadata": m} for i, t, m in DOCS]
        r = c.post("/collections/book/documents", json={"documents": docs})
        assert r.status_code == 200, r.text
        yield c


def search(client: TestClient, **body: Any) -> dict[str, Any]:
    r = client.post("/collections/book/search", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def fake_inner(client: TestClient) -> FakeEmbedder:
    emb = client.app.state.ragline.services.embedders.get("fake")  # type: ignore[attr-defined]
    inner: FakeEmbedder = emb.inner
    return inner


def test_documents_without_embeddings_are_embedded_server_side(client: TestClient) -> None:
    body = search(client, query="lidar cameras perceive", mode="dense", limit=1)
    assert body["results"][0]["id"] == "robots"
    assert body["mode"] == "dense" and body["took_ms"] >= 0


def test_default_mode_is_hybrid_when_text_index_exists(client: TestClient) -> None:
    body = search(client, query="robot joint limits")
    assert body["mode"] == "hybrid"
    assert body["results"][0]["id"] == "urdf"


def test_sparse_ranks_by_bm25_with_stemming(client: TestClient) -> None:
    body = search(client, query="simulating robot", mode="sparse")
    ids = [r["id"] for r in body["results"]]
    # "robot" matches robots/urdf/gazebo through stemming; "simulating" -> "simul" only gazebo
    assert ids[0] == "gazebo"
    assert set(ids) == {"robots", "urdf", "gazebo"}


def test_hybrid_fuses_both_lists_by_reciprocal_rank(client: TestClient) -> None:
    q = "messages between nodes"
    dense = [r["id"] for r in search(client, query=q, mode="dense", limit=5)["results"]]
    sparse = [r["id"] for r in search(client, query=q, mode="sparse", limit=5)["results"]]
    hybrid = search(client, query=q, mode="hybrid", limit=5, rrf_k=60,
                    fusion="rrf")["results"]

    def rrf(doc: str) -> float:
        # Qdrant RRF: 1 / (k + rank) with rank counted from 0
        return sum(1 / (60 + lst.index(doc)) for lst in (dense, sparse) if doc in lst)

    expected = sorted(set(dense) | set(sparse), key=lambda d: -rrf(d))
    assert [r["id"] for r in hybrid] == expected[:5]
    assert hybrid[0]["score"] == pytest.approx(rrf(expected[0]), rel=1e-4)


def test_default_hybrid_is_dbsf_over_both_lists(client: TestClient) -> None:
    q = "robots sensors physics"
    dense = {r["id"] for r in search(client, query=q, mode="dense", limit=5)["results"]}
    sparse = {r["id"] for r in search(client, query=q, mode="sparse", limit=5)["results"]}
    body = search(client, query=q, limit=5)
    assert body["stages"] == ["hybrid:dbsf"]
    got = [r["id"] for r in body["results"]]
    assert set(got) <= dense | sparse
    assert got[0] == "gazebo"  # the only document matching all three words


def test_filters_apply_to_every_mode(client: TestClient) -> None:
    for mode in ("dense", "sparse", "hybrid"):
        body = search(client, query="robots robot", mode=mode, where={HT: {"$lte": 2}})
        assert body["results"], mode
        assert all(r["metadata"][HT] <= 2 for r in body["results"]), mode


def test_score_threshold_drops_weak_hits(client: TestClient) -> None:
    all_hits = search(client, query="lidar cameras", mode="dense", limit=5)["results"]
    cut = (all_hits[0]["score"] + all_hits[1]["score"]) / 2
    kept = search(client, query="lidar cameras", mode="dense", limit=5,
                  score_threshold=cut)["results"]
    assert [r["id"] for r in kept] == [all_hits[0]["id"]]


def test_repeated_query_hits_the_cache(client: TestClient) -> None:
    inner = fake_inner(client)
    search(client, query="a brand new question", mode="dense")
    calls = inner.calls
    search(client, query="a brand new question", mode="dense")
    assert inner.calls == calls
    cache = client.get("/info").json()["embedding_cache"]["fake:fake-bow"]
    assert cache["hits"] >= 1 and cache["size"] >= 1



def test_info_counts_micro_batched_queries(client: TestClient) -> None:
    def batched() -> int:
        return int(client.get("/info").json()["embedding_cache"]["fake:fake-bow"]
                   ["batching"]["texts"])

    search(client, query="warm the model up", mode="dense")
    before = batched()
    search(client, query="a question never asked before", mode="dense")
    assert batched() == before + 1
    searches = client.get("/info").json()["search_batching"]["items"]
    search(client, query="a question never asked before", mode="dense")
    assert batched() == before + 1  # a cache hit never reaches the batcher
    assert client.get("/info").json()["search_batching"]["items"] == searches + 1


def test_text_query_errors(client: TestClient) -> None:
    r = client.post("/collections/book/search", json={"mode": "sparse"})
    assert r.status_code == 400 and "Give 'query'" in r.json()["detail"]
    r = client.post("/collections/book/search", json={"query": "x", "mode": "bogus"})
    assert r.status_code == 400 and "mode" in r.json()["detail"]
    r = client.post("/collections/book/search", json={"embedding": [1.0, 0.0], "mode": "dense"})
    assert r.status_code == 400 and "expects 16 dimensions, got 2" in r.json()["detail"]
    client.post("/collections", json={"name": "plain"})
    client.post("/collections/plain/documents", json={"documents": [
        {"id": "a", "text": "alpha beta", "embedding": [1.0, 0.0, 0.0]}]})
    r = client.post("/collections/plain/search", json={"query": "alpha", "mode": "dense"})
    assert r.status_code == 400 and "has no embedding provider" in r.json()["detail"]
    body = client.post("/collections/plain/search", json={"query": "alpha"}).json()
    assert body["mode"] == "sparse" and body["results"][0]["id"] == "a"
    r = client.post("/collections/plain/documents", json={"documents": [{"text": "no vec"}]})
    assert r.status_code == 400
    assert r.json()["detail"] == "All documents must include pre-computed embeddings"


def test_precomputed_vectors_of_the_wrong_size_are_refused(client: TestClient) -> None:
    r = client.post("/collections/book/documents", json={"documents": [
        {"id": "x", "text": "t", "embedding": [0.5] * 8}]})
    assert r.status_code == 400
    assert "collection 'book' expects 16 dimensions, got 8" in r.json()["detail"]


def test_default_collection_search_with_book_filters(client: TestClient) -> None:
    r = client.post("/search", json={"query": "robots", "hardware_tier": 1, "limit": 10})
    body = r.json()
    assert body["collection"] == "book"
    assert body["results"] and all(x["metadata"][HT] <= 1 for x in body["results"])
    r = client.post("/search", json={"query": "robots", "module": "m2", "mode": "sparse"})
    assert {x["id"] for x in r.json()["results"]} == {"urdf"}


def test_default_collection_rule(settings: Settings) -> None:
    """One rule: the collection given, else the configured default; a default that does not
    exist yet says it is the default; no default configured is a 400 saying how to set one."""
    with local_client(create_app(settings)) as c:
        for r in (c.post("/search", json={"query": "x"}), c.get("/context/abc"),
                  c.get("/lesson/some/lesson")):
            assert r.status_code == 404
            assert "'knowledge'" in r.json()["detail"]
            assert "default collection (RAGLINE_DEFAULT_COLLECTION)" in r.json()["detail"]
    settings.default_collection = None
    with local_client(create_app(settings)) as c:
        for r in (c.post("/search", json={"query": "x"}), c.get("/context/abc"),
                  c.post("/api/rag/ingest/text", json={"text": "hello"})):
            assert r.status_code == 400, r.text
            assert "RAGLINE_DEFAULT_COLLECTION" in r.json()["detail"]
