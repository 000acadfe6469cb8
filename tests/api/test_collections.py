"""Collections over HTTP (spec 000: create with metadata, read, list, update, delete)."""

from fastapi.testclient import TestClient

from tests.api.helpers import add, doc, make_collection


def test_create_with_top_level_embedding_fields_kept_as_metadata(client: TestClient) -> None:
    body = make_collection(client, "docs", metadata={"description": "Test"},
                           embedding_provider="openai", embedding_model="text-embedding-3-small")
    assert body["name"] == "docs"
    assert body["metadata"] == {"description": "Test", "embedding_provider": "openai",
                                "embedding_model": "text-embedding-3-small"}
    got = client.get("/collections/docs").json()
    assert got["metadata"]["embedding_model"] == "text-embedding-3-small"
    assert got["count"] == 0 and got["dimension"] is None


def test_duplicate_name_is_409_and_keeps_the_original(client: TestClient) -> None:
    make_collection(client, "docs", metadata={"v": 1})
    r = client.post("/collections", json={"name": "docs", "metadata": {"v": 2}})
    assert r.status_code == 409
    assert r.json()["detail"] == "Collection 'docs' already exists"
    assert client.get("/collections/docs").json()["metadata"] == {"v": 1}


def test_invalid_names_are_400(client: TestClient) -> None:
    for bad in ["", "-x", "a b", "x" * 64, "a..b", "../etc"]:
        r = client.post("/collections", json={"name": bad})
        assert r.status_code == 400, bad
        assert "Invalid collection name" in r.json()["detail"]
    r = client.post("/collections", json={"metadata": {}})
    assert r.status_code == 400
    assert r.json()["detail"] == "Invalid request: 'name' is required"


def test_list_returns_all_with_metadata(client: TestClient) -> None:
    make_collection(client, "b", metadata={"k": "b"})
    make_collection(client, "a", metadata={"k": "a"})
    body = client.get("/collections").json()
    assert [(c["name"], c["metadata"]) for c in body["collections"]] == [
        ("a", {"k": "a"}), ("b", {"k": "b"})]
    assert body["count"] == 2


def test_metadata_replace_is_default_and_merge_preserves(client: TestClient) -> None:
    start = {"description": "Test", "match_threshold": 0.5, "custom_field": "value"}
    make_collection(client, "m", metadata=start)
    r = client.put("/collections/m/metadata?merge=true", json={"metadata": {"new_field": "new"}})
    assert r.status_code == 200
    assert r.json()["metadata"] == {**start, "new_field": "new"}
    r = client.put("/collections/m/metadata", json={"metadata": {"new_field": "new"}})
    assert r.json()["metadata"] == {"new_field": "new"}
    client.put("/collections/m/metadata?merge=true", json={"metadata": start})
    r = client.put("/collections/m/metadata?merge=false", json={"metadata": {"only": 1}})
    assert client.get("/collections/m").json()["metadata"] == {"only": 1}
    r = client.put("/collections/nope/metadata", json={"metadata": {}})
    assert r.status_code == 404 and r.json()["detail"] == "Collection 'nope' not found"


def test_delete_collection_removes_it_and_its_documents(client: TestClient) -> None:
    make_collection(client, "gone")
    add(client, "gone", [doc(1), doc(2)])
    r = client.delete("/collections/gone")
    assert r.json() == {"status": "deleted", "collection": "gone"}
    assert client.get("/collections/gone").status_code == 404
    make_collection(client, "gone")  # the name is free again, and empty
    assert client.get("/collections/gone").json()["count"] == 0
    assert client.delete("/collections/never").status_code == 404
