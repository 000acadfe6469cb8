"""Vector search over HTTP: cosine order, filters, limits, embeddings on request."""

import numpy as np
import pytest
from fastapi.testclient import TestClient

from tests.api.helpers import add, make_collection


def seed(client: TestClient, n: int = 60, dim: int = 16) -> np.ndarray:
    make_collection(client)
    rng = np.random.default_rng(7)
    mat = rng.normal(size=(n, dim))
    add(client, "docs", [
        {"id": f"d{i}", "text": f"t{i}", "metadata": {"g": i % 3, "even": i % 2 == 0},
         "embedding": mat[i].tolist()} for i in range(n)])
    return mat


def cos_order(mat: np.ndarray, q: np.ndarray, mask: np.ndarray | None = None) -> list[str]:
    sims = mat @ q / (np.linalg.norm(mat, axis=1) * np.linalg.norm(q))
    idx = [i for i in np.argsort(-sims) if mask is None or mask[i]]
    return [f"d{i}" for i in idx]


def test_results_in_cosine_order_with_scores(client: TestClient) -> None:
    mat = seed(client)
    q = np.random.default_rng(1).normal(size=16)
    r = client.post("/collections/docs/search", json={"embedding": q.tolist()})
    results = r.json()["results"]
    assert len(results) == 10  # default limit
    assert [x["id"] for x in results] == cos_order(mat, q)[:10]
    i0 = int(results[0]["id"][1:])
    expect = float(mat[i0] @ q / (np.linalg.norm(mat[i0]) * np.linalg.norm(q)))
    assert abs(results[0]["score"] - expect) < 1e-4
    # the one relevance scale: 0.5 + cosine/2 (issue 12)
    assert results[0]["relevance"] == pytest.approx(0.5 + expect / 2, abs=1e-4)
    assert set(results[0]) == {"id", "text", "metadata", "score", "relevance"}


def test_where_filter_and_limit(client: TestClient) -> None:
    mat = seed(client)
    q = np.random.default_rng(2).normal(size=16)
    mask = np.array([i % 3 == 1 and i % 2 == 0 for i in range(60)])
    r = client.post("/collections/docs/search", json={
        "embedding": q.tolist(), "limit": 4, "where": {"g": 1, "even": True}})
    assert [x["id"] for x in r.json()["results"]] == cos_order(mat, q, mask)[:4]
    r = client.post("/collections/docs/search", json={
        "embedding": q.tolist(), "where": {"$or": [{"g": 0}, {"g": {"$gt": 1}}]}, "limit": 100})
    assert {int(x["id"][1:]) % 3 for x in r.json()["results"]} == {0, 2}
    assert len(r.json()["results"]) == 40


def test_include_embeddings_returns_the_stored_vectors(client: TestClient) -> None:
    mat = seed(client)
    r = client.post("/collections/docs/search",
                    json={"embedding": mat[5].tolist(), "limit": 1, "include_embeddings": True})
    hit = r.json()["results"][0]
    assert hit["id"] == "d5"
    np.testing.assert_allclose(hit["embedding"], mat[5], rtol=1e-4, atol=1e-5)


def test_search_errors(client: TestClient) -> None:
    seed(client)
    r = client.post("/collections/docs/search", json={"embedding": [1, 2, 3]})
    assert r.status_code == 400
    assert "collection 'docs' expects 16 dimensions, got 3" in r.json()["detail"]
    r = client.post("/collections/docs/search", json={"embedding": [1.0] * 16, "limit": 0})
    assert r.status_code == 400 and "'limit'" in r.json()["detail"]
    r = client.post("/collections/docs/search",
                    json={"embedding": [1.0] * 16, "where": {"g": {"$bad": 1}}})
    assert r.status_code == 400 and "unknown operator '$bad'" in r.json()["detail"]
    r = client.post("/collections/nope/search", json={"embedding": [1.0] * 16})
    assert r.status_code == 404


def test_search_on_collection_without_documents_is_empty(client: TestClient) -> None:
    make_collection(client, "empty")
    r = client.post("/collections/empty/search", json={"embedding": [1.0, 0.0]})
    assert r.status_code == 200 and r.json()["results"] == []
