"""Documents over HTTP: the spec 000/002 scenarios, bodies and messages included."""

from typing import Any

from fastapi.testclient import TestClient

from tests.api.helpers import add, doc, make_collection


def post_docs(client: TestClient, docs: Any, name: str = "docs") -> Any:
    return client.post(f"/collections/{name}/documents", json={"documents": docs})


def count(client: TestClient, name: str = "docs") -> int:
    return int(client.get(f"/collections/{name}").json()["count"])


def test_add_with_embeddings_returns_count_and_upserts_by_id(client: TestClient) -> None:
    make_collection(client)
    body = add(client, "docs", [doc(1, section_id="intro"), doc(2)])
    assert body["count"] == 2 and body["ids"] == ["d1", "d2"]
    changed = doc(1, section_id="changed")
    changed["text"] = "new text"
    add(client, "docs", [changed])
    assert count(client) == 2
    got = client.get("/collections/docs/documents/d1").json()
    assert got == {"id": "d1", "text": "new text", "metadata": {"section_id": "changed"}}


def test_generated_ids_when_missing(client: TestClient) -> None:
    make_collection(client)
    d = doc(1)
    del d["id"]
    ids = add(client, "docs", [d])["ids"]
    assert len(ids) == 1 and client.get(f"/collections/docs/documents/{ids[0]}").status_code == 200


def test_missing_embeddings_is_400_with_spec_message_and_nothing_written(
    client: TestClient,
) -> None:
    make_collection(client)
    d = doc(2)
    del d["embedding"]
    r = post_docs(client, [doc(1), d])
    assert r.status_code == 400
    assert r.json()["detail"] == "All documents must include pre-computed embeddings"
    assert count(client) == 0


def test_invalid_embedding_formats_are_400_and_nothing_written(client: TestClient) -> None:
    make_collection(client)
    cases = [
        ("not a list", "must be a non-empty array"),
        ([1, "x", 3, 4], "must be an array of numbers"),
        ([1, None, 3, 4], "must be an array of numbers"),
        ([1, True, 3, 4], "must be an array of numbers"),
        ([], "must be a non-empty array"),
        ([0, 0, 0, 0], "all zeros"),
    ]
    for emb, msg in cases:
        bad = doc(9)
        bad["embedding"] = emb
        r = post_docs(client, [doc(1), bad])
        assert r.status_code == 400, emb
        assert "Invalid embedding format for document at index 1" in r.json()["detail"]
        assert msg in r.json()["detail"], (emb, r.json())
    # NaN/inf cannot travel in strict JSON; send them as the non-standard literals
    raw = '{"documents":[{"id":"x","text":"t","embedding":[1,NaN,0,0]}]}'
    r = client.post("/collections/docs/documents", content=raw,
                    headers={"content-type": "application/json"})
    assert r.status_code == 400
    assert count(client) == 0


def test_dimension_mismatch_in_request_and_with_collection(client: TestClient) -> None:
    make_collection(client)
    r = post_docs(client, [doc(1, dim=4), doc(2, dim=5)])
    assert r.status_code == 400
    assert r.json()["detail"] == ("Embedding dimension mismatch: document at index 1 has 5 "
                                  "dimensions, but document at index 0 has 4")
    add(client, "docs", [doc(1, dim=4)])
    r = post_docs(client, [doc(3, dim=3)])
    assert r.status_code == 400
    assert "collection 'docs' expects 4 dimensions, got 3" in r.json()["detail"]
    assert count(client) == 1


def test_empty_or_missing_documents_array(client: TestClient) -> None:
    make_collection(client)
    bodies: tuple[dict[str, Any], ...] = ({"documents": []}, {})
    for body in bodies:
        r = client.post("/collections/docs/documents", json=body)
        assert r.status_code == 400
        assert r.json()["detail"] == "Documents array is required"


def test_bad_metadata_and_duplicate_ids_are_400(client: TestClient) -> None:
    make_collection(client)
    r = post_docs(client, [doc(1, nested={"a": 1})])
    assert r.status_code == 400 and "field 'nested'" in r.json()["detail"]
    r = post_docs(client, [doc(1), doc(1)])
    assert r.status_code == 400 and "Duplicate document id 'd1'" in r.json()["detail"]
    assert count(client) == 0


def test_add_to_missing_collection_is_404(client: TestClient) -> None:
    r = post_docs(client, [doc(1)], name="nope")
    assert r.status_code == 404 and r.json()["detail"] == "Collection 'nope' not found"


def seed_chapters(client: TestClient) -> None:
    make_collection(client)
    types = ["heading", "paragraph", "code", "list"]
    add(client, "docs", [
        doc(i, chapter_id=str(i % 3 + 1), doc_type=types[i % 4],
            section_id="intro" if i < 5 else "retention-config", chapter=str(i % 4))
        for i in range(24)
    ])


def ids_for(client: TestClient, where: str, **params: Any) -> list[str]:
    r = client.get("/collections/docs/documents", params={"where": where, **params})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["count"] == len(body["documents"])
    return [d["id"] for d in body["documents"]]


def test_where_equality_and_implicit_and(client: TestClient) -> None:
    seed_chapters(client)
    r = client.get("/collections/docs/documents", params={"where": '{"section_id":"intro"}'})
    body = r.json()
    assert body["total"] == body["count"] == 5
    assert sorted(d["id"] for d in body["documents"]) == [f"d{i}" for i in range(5)]
    assert set(body["documents"][0]) == {"id", "text", "metadata"}
    got = ids_for(client, '{"chapter_id":"1","doc_type":"paragraph"}')
    assert sorted(got) == sorted(f"d{i}" for i in range(24) if i % 3 == 0 and i % 4 == 1)


def test_where_in_and_or(client: TestClient) -> None:
    seed_chapters(client)
    got = ids_for(client, '{"doc_type":{"$in":["heading","paragraph"]}}')
    assert sorted(got) == sorted(f"d{i}" for i in range(24) if i % 4 in (0, 1))
    got = ids_for(client, '{"$or":[{"chapter":"1"},{"chapter":"3"}]}')
    assert sorted(got) == sorted(f"d{i}" for i in range(24) if i % 4 in (1, 3))


def test_default_limit_is_100_and_pagination(client: TestClient) -> None:
    make_collection(client)
    for start in range(0, 500, 250):
        add(client, "docs", [doc(i) for i in range(start, start + 250)])
    body = client.get("/collections/docs/documents").json()
    assert body["count"] == 100 and body["total"] == 500
    all_ids = [d["id"] for d in client.get("/collections/docs/documents",
                                           params={"limit": 1000}).json()["documents"]]
    assert len(all_ids) == len(set(all_ids)) == 500
    page = client.get("/collections/docs/documents", params={"limit": 50, "offset": 100}).json()
    assert page["count"] == 50
    assert [d["id"] for d in page["documents"]] == all_ids[100:150]


def test_limit_is_clamped_to_1000(client: TestClient) -> None:
    make_collection(client)
    add(client, "docs", [doc(i) for i in range(1200)])
    body = client.get("/collections/docs/documents", params={"limit": 5000}).json()
    assert body["count"] == 1000 and body["total"] == 1200


def test_empty_results_are_200(client: TestClient) -> None:
    seed_chapters(client)
    r = client.get("/collections/docs/documents", params={"where": '{"section_id":"none"}'})
    assert r.status_code == 200
    assert r.json() == {"documents": [], "count": 0, "total": 0}


def test_missing_collection_and_invalid_json(client: TestClient) -> None:
    r = client.get("/collections/nonexistent/documents")
    assert r.status_code == 404
    assert r.json()["detail"] == "Collection 'nonexistent' not found"
    make_collection(client)
    r = client.get("/collections/docs/documents", params={"where": "invalid-json-string"})
    assert r.status_code == 400
    assert r.json()["detail"] == "Invalid 'where' filter: must be valid JSON"


def test_malformed_filters_name_the_problem(client: TestClient) -> None:
    make_collection(client)
    cases = {
        '{"a":{"$regex":"x"}}': "unknown operator '$regex' on field 'a'",
        '{"$or":[]}': "'$or' needs a non-empty list",
        '{"a":{"$gt":"x"}}': "'$gt' on field 'a' needs a number",
        '{"a":{"$in":"x"}}': "'$in' on field 'a' needs a non-empty list",
        '[1,2]': "expected an object",
        '{"$foo":1}': "unknown operator '$foo'",
        '{"a":null}': "needs a string, number or boolean, got null",
        '{"a":{"$in":[{"b":1}]}}': "got an object",
    }
    for where, msg in cases.items():
        r = client.get("/collections/docs/documents", params={"where": where})
        assert r.status_code == 400, where
        assert msg in r.json()["detail"], (where, r.json())
    deep = '{"a":1}'
    for _ in range(12):
        deep = '{"$not":' + deep + "}"
    r = client.get("/collections/docs/documents", params={"where": deep})
    assert r.status_code == 400 and "nested deeper than" in r.json()["detail"]


def test_sibling_gathering_returns_the_whole_section(client: TestClient) -> None:
    seed_chapters(client)
    hits = client.post("/collections/docs/search",
                       json={"embedding": [1, 0.5, 0, 0], "limit": 1}).json()["results"]
    section = hits[0]["metadata"]["section_id"]
    got = ids_for(client, f'{{"section_id":"{section}"}}', limit=1000)
    expected = [f"d{i}" for i in range(24) if (i < 5) == (section == "intro")]
    assert sorted(got) == sorted(expected)


def test_get_single_document_and_404(client: TestClient) -> None:
    make_collection(client)
    add(client, "docs", [doc(1, a="x")])
    assert client.get("/collections/docs/documents/d1").json()["metadata"] == {"a": "x"}
    r = client.get("/collections/docs/documents/zz")
    assert r.status_code == 404
    assert r.json()["detail"] == "Document 'zz' not found in collection 'docs'"


def test_delete_by_ids_and_by_where(client: TestClient) -> None:
    seed_chapters(client)
    r = client.request("DELETE", "/collections/docs/documents", json={"ids": ["d1", "d2", "zz"]})
    assert r.json() == {"status": "deleted", "collection": "docs", "count_deleted": 2}
    r = client.request("DELETE", "/collections/docs/documents",
                       json={"where": {"doc_type": "code"}})
    assert r.json()["count_deleted"] == 5  # i % 4 == 2 among 0..23 minus d2
    assert count(client) == 17
    assert ids_for(client, '{"doc_type":"code"}') == []
    r = client.request("DELETE", "/collections/docs/documents", json={})
    assert r.status_code == 400 and "'ids' or a non-empty 'where'" in r.json()["detail"]


def test_metadata_values_deduplicated_sorted_and_lists(client: TestClient) -> None:
    make_collection(client)
    regions = ["British Classics", "Asian & Middle Eastern Sweets", "British Classics",
               "French Pastries"]
    add(client, "docs", [doc(i, region=r, tags=["b", "a"] if i % 2 else ["c"])
                         for i, r in enumerate(regions)])
    r = client.get("/collections/docs/metadata-values", params={"field": "region"})
    assert r.json() == {"field": "region", "values": [
        "Asian & Middle Eastern Sweets", "British Classics", "French Pastries"], "count": 3}
    assert r.json() == client.get("/collections/docs/metadata-values",
                                  params={"field": "region"}).json()
    r = client.get("/collections/docs/metadata-values", params={"field": "tags"})
    assert r.json()["values"] == ["a", "b", "c"]
    r = client.get("/collections/docs/metadata-values", params={"field": "nonexistent"})
    assert r.status_code == 200
    assert r.json() == {"field": "nonexistent", "values": [], "count": 0}


def test_metadata_values_errors(client: TestClient) -> None:
    r = client.get("/collections/nonexistent/metadata-values", params={"field": "region"})
    assert r.status_code == 404
    assert r.json()["detail"] == "Collection 'nonexistent' does not exist."
    make_collection(client)
    r = client.get("/collections/docs/metadata-values")
    assert r.status_code == 400
    assert r.json()["detail"] == "Query parameter 'field' is required"


def test_empty_collection_keeps_metadata_and_accepts_new_documents(client: TestClient) -> None:
    meta = {"display_name": "Test", "description": "Docs", "query_profile": {"k": 5}}
    make_collection(client, "test-collection", metadata=meta)
    add(client, "test-collection", [doc(i) for i in range(100)])
    r = client.delete("/collections/test-collection/documents/all")
    assert r.status_code == 200
    assert r.json() == {"status": "emptied", "collection": "test-collection",
                        "count_deleted": 100}
    got = client.get("/collections/test-collection").json()
    assert got["metadata"] == meta and got["count"] == 0
    r = client.delete("/collections/test-collection/documents/all")
    assert r.json() == {"status": "emptied", "collection": "test-collection",
                        "count_deleted": 0}
    add(client, "test-collection", [doc(1)])
    assert count(client, "test-collection") == 1
    r = client.delete("/collections/missing-collection/documents/all")
    assert r.status_code == 404
    assert r.json()["detail"] == "Collection 'missing-collection' not found"


def test_empty_never_newly_written_collection(client: TestClient) -> None:
    make_collection(client, "fresh")
    r = client.delete("/collections/fresh/documents/all")
    assert r.json()["count_deleted"] == 0
