"""Health and info report real state, and degrade when the store breaks."""

import shutil

from fastapi.testclient import TestClient

from ragline.settings import Settings
from tests.api.helpers import add, doc, make_collection


def test_health_reports_store_collections_and_size(client: TestClient) -> None:
    make_collection(client, "a")
    add(client, "a", [doc(i) for i in range(10)])
    body = client.get("/health").json()
    assert body["status"] == "healthy"
    assert body["store"]["status"] == "ok" and body["store"]["details"]["engine"] == "qdrant-edge"
    assert body["collections"] == 1
    assert body["storage_bytes"] > 0
    assert body["version"] and body["timestamp"]
    assert "cross_encoder" not in body


def test_info_lists_counts_dimensions_and_sizes(client: TestClient) -> None:
    make_collection(client, "a")
    make_collection(client, "b")
    add(client, "a", [doc(i, dim=8) for i in range(7)])
    body = client.get("/info").json()
    cols = {c["name"]: c for c in body["collections"]}
    assert cols["a"]["count"] == 7 and cols["a"]["dimension"] == 8
    assert cols["a"]["size_bytes"] > 0
    assert cols["b"]["count"] == 0 and cols["b"]["dimension"] is None
    assert body["total_documents"] == 7
    from ragline.catalog.schema_version import SCHEMA_VERSION

    assert body["catalog"] == {"backend": "sqlite", "schema_version": SCHEMA_VERSION}


def test_health_is_degraded_when_the_store_directory_is_gone(
    client: TestClient, settings: Settings
) -> None:
    shutil.rmtree(settings.shards_dir())
    settings.shards_dir().write_text("not a directory")  # mkdir now fails
    body = client.get("/health").json()
    assert body["status"] == "degraded"
    assert body["store"]["status"] == "down" and body["store"]["error"]


def test_openapi_docs_are_served(client: TestClient) -> None:
    assert client.get("/docs").status_code == 200
    paths = client.get("/openapi.json").json()["paths"]
    assert "/collections/{name}/documents" in paths and "/collections/{name}/search" in paths


def test_info_reports_background_indexing(client: TestClient) -> None:
    make_collection(client, "a")
    add(client, "a", [doc(i, dim=8) for i in range(7)])
    idx = client.get("/info").json()["indexing"]
    assert idx["builds"] == 0 and idx["failures"] == 0
    assert idx["pending"] == 0  # 7 points: far below the build threshold
    assert idx["building"] is False and idx["last_swap_stall_ms"] is None


def test_openapi_declares_both_key_schemes(client: TestClient) -> None:
    """Issue 33: /docs gets an Authorize button, and "Try it out" sends the key, only when
    the document declares how a key is sent: bearer or X-API-Key, either one."""
    doc = client.get("/openapi.json").json()
    schemes = doc["components"]["securitySchemes"]
    assert schemes["bearer"] == {**schemes["bearer"], "type": "http", "scheme": "bearer"}
    assert schemes["apiKey"]["in"] == "header" and schemes["apiKey"]["name"] == "X-API-Key"
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            keyless = path in ("/health", "/ingestion/webhook/github")
            want: list[dict[str, list[str]]] = [] if keyless else [{"bearer": []},
                                                                   {"apiKey": []}]
            assert op["security"] == want, (method, path)
