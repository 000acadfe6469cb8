from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient


def make_collection(client: TestClient, name: str = "docs", **body: Any) -> dict[str, Any]:
    r = client.post("/collections", json={"name": name, **body})
    assert r.status_code == 201, r.text
    return r.json()


def add(client: TestClient, name: str, docs: list[dict[str, Any]]) -> dict[str, Any]:
    r = client.post(f"/collections/{name}/documents", json={"documents": docs})
    assert r.status_code == 200, r.text
    return r.json()


def doc(i: int, dim: int = 4, **meta: Any) -> dict[str, Any]:
    emb = [0.0] * dim
    emb[i % dim] = 1.0
    emb[(i + 1) % dim] = 0.1 * (i % 7 + 1)
    return {"id": f"d{i}", "text": f"text {i}", "metadata": meta, "embedding": emb}


def local_client(app: Any, **kwargs: Any) -> TestClient:
    """A TestClient that passes the request guard (issue 10): a Host the server answers to
    (TestClient's default "testserver" is refused) and the key header POSTs need."""
    return TestClient(app, base_url="http://localhost", headers={"X-API-Key": "test"},
                      **kwargs)
