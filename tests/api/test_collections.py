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


def test_spec_000_embedding_fields_never_embed_server_side(client: TestClient) -> None:
    """Even a provider ragline runs, given at the top level, is metadata only: documents
    without embeddings are refused with the spec's message, nothing is written, and no
    model is called."""
    body = make_collection(client, "s0", embedding_provider="local", embedding_model="x/y")
    assert body["embed"] is None and body["embedding_provider"] == "local"
    r = client.post("/collections/s0/documents", json={"documents": [{"id": "a", "text": "t"}]})
    assert r.status_code == 400
    assert r.json()["detail"] == "All documents must include pre-computed embeddings"
    assert client.get("/collections/s0").json()["count"] == 0


def test_embed_opts_in_and_is_validated(client: TestClient) -> None:
    r = client.post("/collections", json={"name": "e1", "embed": {"provider": "nope"}})
    assert r.status_code == 400
    assert "Unknown embedding provider 'nope'" in r.json()["detail"]
    assert "fake" in r.json()["detail"] and "local" in r.json()["detail"]
    for model in ("/etc", "../models/x", "./m", "a/b/c"):
        r = client.post("/collections", json={"name": "e2",
                                              "embed": {"provider": "local", "model": model}})
        assert r.status_code == 400 and "not a path" in r.json()["detail"], model
    assert client.get("/collections/e2").status_code == 404  # nothing was created
    body = make_collection(client, "e3", embed={"provider": "fake"})
    assert body["embed"]["provider"] == "fake" and body["embedding_provider"] is None
    add(client, "e3", [{"id": "a", "text": "server-side embedded"}])
    assert client.get("/collections/e3").json()["dimension"] == 16


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
