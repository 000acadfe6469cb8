"""Search with `rerank: true` (cross-encoder) and metadata boosts (spec 003)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ragline.api.app import create_app
from ragline.providers.registry import registry
from ragline.providers.rerankers.cross_encoder import CrossEncoderReranker, ModelSource
from ragline.settings import Settings
from ragline.testing.cross_encoder import tiny_cross_encoder_dir
from ragline.testing.fake_embedder import FakeEmbedder
from tests.api.helpers import local_client

RUNBOOKS = [
    ("cpu", "High CPU usage on compute instance: check top processes", ["cpu", "linux"],
     ["VM.*"]),
    ("mem", "High memory usage on compute instance: check swap", ["memory", "linux"],
     ["VM.*"]),
    ("cpu-bm", "CPU throttling on bare metal instance usage", ["cpu"], ["BM.*"]),
    ("disk", "Disk usage alert on block volume instance", ["disk"], ["VM.Standard.*"]),
]


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    registry.register("embedders", "fake", FakeEmbedder)
    with local_client(create_app(settings)) as c:
        c.post("/collections", json={"name": "rb", "embed": {"provider": "fake"}})
        c.post("/collections/rb/documents", json={"documents": [
            {"id": i, "text": t, "metadata": {"tags": tags, "applicable_shapes": shapes}}
            for i, t, tags, shapes in RUNBOOKS]})
        yield c


def search(client: TestClient, **body: Any) -> dict[str, Any]:
    r = client.post("/collections/rb/search", json={"query": "instance usage", **body})
    assert r.status_code == 200, r.text
    return r.json()


def test_rerank_reorders_candidates_by_cross_encoder_score(client: TestClient) -> None:
    ce = CrossEncoderReranker.from_source(
        ModelSource(str(tiny_cross_encoder_dir()), "--cross-encoder-path"))
    client.app.state.ragline.services.reranker.current = ce  # type: ignore[attr-defined]
    body = search(client, mode="dense", rerank=True, rerank_candidates=4, limit=3)
    assert body["stages"] == ["dense", "rerank"]
    texts = {i: t for i, t, _, _ in RUNBOOKS}
    direct = ce.rerank("instance usage", [{"id": i, "text": t} for i, t in texts.items()])
    assert [r["id"] for r in body["results"]] == [d["id"] for d in direct][:3]
    assert body["results"][0]["score"] == pytest.approx(direct[0]["score"], rel=1e-5)


def test_rerank_without_model_degrades_with_a_warning(client: TestClient) -> None:
    plain = search(client, mode="dense")
    body = search(client, mode="dense", rerank=True)
    assert body["stages"] == ["dense"]
    assert "no cross-encoder loaded" in body["warnings"][0]
    assert [r["id"] for r in body["results"]] == [r["id"] for r in plain["results"]]


def test_tag_boost_ranks_more_matching_tags_higher(client: TestClient) -> None:
    body = search(client, mode="sparse", limit=4,
                  boost={"query_tags": ["cpu", "linux"], "tag_weight": 10})
    assert body["stages"] == ["sparse", "boost"]
    ids = [r["id"] for r in body["results"]]
    assert ids[:2] == ["cpu", "cpu-bm"] or ids[0] == "cpu"
    assert ids.index("cpu") < ids.index("cpu-bm") < ids.index("disk")


def test_glob_boost_from_collection_metadata_with_request_values(client: TestClient) -> None:
    client.put("/collections/rb/metadata", json={"metadata": {"boost": {
        "glob_fields": {"applicable_shapes": "shape"}, "glob_weight": 10}}})
    body = search(client, mode="sparse", limit=4,
                  boost={"query_values": {"shape": "BM.Standard3.64"}})
    assert body["results"][0]["id"] == "cpu-bm"
    body = search(client, mode="sparse", limit=4,
                  boost={"query_values": {"shape": "VM.Standard.E4.Flex"}})
    assert body["results"][-1]["id"] == "cpu-bm"  # the only one not matching VM.*
    r = client.post("/collections/rb/search",
                    json={"query": "x", "boost": {"tag_wieght": 1}})
    assert r.status_code == 400 and "Invalid boost config" in r.json()["detail"]


def test_reranked_hits_keep_their_relevance_and_explain_the_rerank(client: TestClient) -> None:
    """The one relevance scale (issue 12) does not move when a cross-encoder reorders."""
    ce = CrossEncoderReranker.from_source(
        ModelSource(str(tiny_cross_encoder_dir()), "--cross-encoder-path"))
    client.app.state.ragline.services.reranker.current = ce  # type: ignore[attr-defined]
    plain = {r["id"]: r for r in search(client, mode="dense")["results"]}
    body = search(client, mode="dense", rerank=True, rerank_candidates=4, explain=True)
    assert body["stages"] == ["dense", "rerank"]
    for r in body["results"]:
        assert r["relevance"] == pytest.approx(plain[r["id"]]["relevance"], abs=1e-6)
        assert r["scores"]["rerank"] == pytest.approx(r["score"])
        assert r["scores"]["dense"] == pytest.approx(plain[r["id"]]["score"], abs=1e-5)
        assert 0.0 <= r["score"] <= 1.0  # the cross-encoder's probability
