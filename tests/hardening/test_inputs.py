"""Hostile inputs (issue 10): numbers checked in the type they are stored in, size limits,
NaN/Infinity literals, and the metadata key grammar (a hypothesis property test)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragline.api.app import create_app
from ragline.errors import InvalidInput
from ragline.settings import Settings
from tests.api.helpers import add, doc, make_collection


def post_docs(client: TestClient, docs: Any, name: str = "docs") -> Any:
    return client.post(f"/collections/{name}/documents", json={"documents": docs})


def raw_post(client: TestClient, path: str, body: str) -> Any:
    return client.post(path, content=body.encode(), headers={"content-type": "application/json"})


def count(client: TestClient, name: str = "docs") -> int:
    return int(client.get(f"/collections/{name}").json()["count"])


# -- numbers ------------------------------------------------------------------------------
@pytest.mark.parametrize("embedding,needle", [
    ([1e39, 1.0, 0.0, 0.0], "outside the float32 range"),
    ([-3.5e38, 1.0, 0.0, 0.0], "outside the float32 range"),
    ([1e-50, 1e-50, 1e-50, 1e-50], "round to zero"),
    ([1e-30, 1e-30, 0.0, 0.0], "round to zero"),  # float32 values, but no float32 length
    ([10**400, 1, 0, 0], "outside the float32 range"),
])
def test_embeddings_are_checked_as_float32_and_nothing_is_written(
    client: TestClient, embedding: list[Any], needle: str
) -> None:
    make_collection(client)
    add(client, "docs", [doc(1)])
    r = post_docs(client, [doc(2), {"id": "bad", "text": "t", "embedding": embedding}])
    assert r.status_code == 400 and needle in r.json()["message"]
    assert "document at index 1" in r.json()["message"]
    assert count(client) == 1


def test_huge_integer_in_metadata_is_400_naming_the_field(client: TestClient) -> None:
    make_collection(client)
    r = post_docs(client, [doc(1, big=10**400)])
    assert r.status_code == 400 and "field 'big'" in r.json()["message"]
    assert "64-bit" in r.json()["message"]
    r = post_docs(client, [doc(1, big=[1, -(2**63) - 1])])
    assert r.status_code == 400 and "'big'" in r.json()["message"]
    add(client, "docs", [doc(1, big=2**63 - 1, small=-(2**63))])  # the limits themselves fit
    got = client.get("/collections/docs/documents/d1").json()["metadata"]
    assert got == {"big": 2**63 - 1, "small": -(2**63)}


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_literals_anywhere_are_400_naming_the_field(
    client: TestClient, literal: str
) -> None:
    make_collection(client)
    body = ('{"documents": [{"id": "a", "text": "t", "embedding": [1, 0, 0, 0]}, '
            '{"id": "b", "text": "t", "metadata": {"score": ' + literal + '}, '
            '"embedding": [0, 1, 0, 0]}]}')
    r = raw_post(client, "/collections/docs/documents", body)
    assert r.status_code == 400
    assert "'documents.1.metadata.score'" in r.json()["message"] and literal in r.json()["message"]
    assert count(client) == 0
    add(client, "docs", [doc(1)])
    r = raw_post(client, "/collections/docs/search",
                 '{"embedding": [1, 0, 0, 0], "score_threshold": ' + literal + "}")
    assert r.status_code == 400 and "'score_threshold'" in r.json()["message"]
    # the words inside strings are fine
    add(client, "docs", [{"id": "s", "text": "NaN and Infinity", "embedding": [1, 0, 0, 0],
                          "metadata": {"note": "NaN"}}])


def test_nan_in_filters_and_boosts_are_400s_that_say_so(client: TestClient) -> None:
    make_collection(client)
    add(client, "docs", [doc(1, n=1)])
    r = client.get("/collections/docs/documents", params={"where": '{"n": {"$gt": NaN}}'})
    assert r.status_code == 400
    assert "NaN or an infinite number" in r.json()["message"]
    assert "got a number" not in r.json()["message"]
    r = client.get("/collections/docs/documents",
                   params={"where": json.dumps({"n": {"$gt": 10**400}})})
    assert r.status_code == 400 and "64-bit" in r.json()["message"]
    r = raw_post(client, "/collections/docs/search",
                 '{"embedding": [1, 0, 0, 0], "boost": {"numeric_fields": {"n": 1e400}}}')
    assert r.status_code == 400 and "'boost.numeric_fields.n'" in r.json()["message"]
    # the library path (no HTTP parser in front) refuses NaN weights too
    from ragline.services.search.boosts import merge_boost_config
    with pytest.raises(InvalidInput):
        merge_boost_config({}, {"tag_weight": float("nan"), "query_tags": ["a"]})


def test_embedding_dimension_limit_is_a_setting(tmp_path: Any) -> None:
    s = Settings(data_dir=tmp_path / "d", max_embedding_dimension=8,  # type: ignore[call-arg]
                 _env_file=None)
    with TestClient(create_app(s), base_url="http://localhost") as c:
        make_collection(c)
        r = post_docs(c, [{"id": "a", "text": "t", "embedding": [0.5] * 9}])
        assert r.status_code == 400 and "limit of 8" in r.json()["message"]
        assert "max_embedding_dimension" in r.json()["message"]
        assert c.get("/collections/docs").json()["dimension"] is None  # not locked
        add(c, "docs", [{"id": "a", "text": "t", "embedding": [0.5] * 8}])


def test_default_dimension_limit_is_4096(client: TestClient) -> None:
    make_collection(client)
    r = post_docs(client, [{"id": "a", "text": "t", "embedding": [0.5] * 4097}])
    assert r.status_code == 400 and "limit of 4096" in r.json()["message"]


# -- sizes ---------------------------------------------------------------------------------
def test_size_limits_are_checked_before_work(tmp_path: Any) -> None:
    s = Settings(data_dir=tmp_path / "d", max_request_bytes=200_000,  # type: ignore[call-arg]
                 max_document_chars=1000, max_query_chars=100, max_metadata_bytes=200,
                 _env_file=None)
    with TestClient(create_app(s), base_url="http://localhost") as c:
        make_collection(c)
        big = [{"id": str(i), "text": "x" * 900, "embedding": [1, 0, 0, 0]} for i in range(300)]
        r = post_docs(c, big)
        assert r.status_code == 413 and "max_request_bytes" in r.json()["message"]
        r = post_docs(c, [{"id": "a", "text": "x" * 1001, "embedding": [1, 0, 0, 0]}])
        assert r.status_code == 413 and "max_document_chars" in r.json()["message"]
        r = post_docs(c, [{"id": "a", "text": "x", "embedding": [1, 0, 0, 0],
                           "metadata": {"k": "v" * 300}}])
        assert r.status_code == 413 and "max_metadata_bytes" in r.json()["message"]
        assert c.get("/collections/docs").json()["count"] == 0
        add(c, "docs", [{"id": "a", "text": "x", "embedding": [1, 0, 0, 0]}])
        r = c.post("/collections/docs/search", json={"query": "q" * 101,
                                                     "embedding": [1, 0, 0, 0]})
        assert r.status_code == 413 and "max_query_chars" in r.json()["message"]
        # a chunked body (no Content-Length) is counted while it is read
        def chunks() -> Any:
            for _ in range(30):
                yield b" " * 10_000
        r = c.post("/collections/docs/documents", content=chunks(),
                   headers={"content-type": "application/json"})
        assert r.status_code == 413 and "max_request_bytes" in r.json()["message"]


# -- metadata keys -----------------------------------------------------------------------
ODD_KEYS = ["og:title", "reading time", "a.b", "x@y", "a/b", "#h", "a+b", "it's", "[x]",
            "tab\tkey", "ünï", "🙂", " lead", "a[0]", "9"]


@pytest.mark.parametrize("key", ODD_KEYS)
def test_odd_keys_are_stored_filtered_and_listed(client: TestClient, key: str) -> None:
    make_collection(client)
    docs = [doc(i) for i in (1, 2, 3)]
    for d, v in zip(docs, ("v", 3, True), strict=True):
        d["metadata"] = {key: v}
    add(client, "docs", docs)
    listed = client.get("/collections/docs/documents", params={"where": json.dumps({key: "v"})})
    assert listed.status_code == 200 and [d["id"] for d in listed.json()["documents"]] == ["d1"]
    rng = client.get("/collections/docs/documents",
                     params={"where": json.dumps({key: {"$gte": 3}})}).json()
    assert [d["id"] for d in rng["documents"]] == ["d2"]
    flag = client.get("/collections/docs/documents",
                      params={"where": json.dumps({key: True})}).json()
    assert [d["id"] for d in flag["documents"]] == ["d3"]
    values = client.get("/collections/docs/metadata-values", params={"field": key}).json()
    assert sorted(map(str, values["values"])) == sorted(["v", "3", "True"])


@pytest.mark.parametrize("key", ['a"b', "back\\slash", "$x", ""])
def test_keys_outside_the_grammar_are_400_naming_the_key_and_nothing_written(
    client: TestClient, key: str
) -> None:
    make_collection(client)
    bad = doc(2)
    bad["metadata"] = {key: 1}
    r = post_docs(client, [doc(1), bad])
    assert r.status_code == 400 and repr(key) in r.json()["message"]
    assert count(client) == 0
    if key:
        r = client.get("/collections/docs/documents", params={"where": json.dumps({key: 1})})
        assert r.status_code == 400
        r = client.get("/collections/docs/metadata-values", params={"field": key})
        assert r.status_code == 400 and repr(key) in r.json()["message"]


KEY = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=0, max_size=12)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(key=KEY, value=st.one_of(st.text(max_size=5), st.integers(-5, 5), st.booleans()))
def test_any_key_is_stored_filtered_and_listed_or_refused(
    client: TestClient, key: str, value: Any
) -> None:
    if client.get("/collections/prop").status_code == 404:
        make_collection(client, "prop")
    client.delete("/collections/prop/documents/all")
    r = post_docs(client, [{"id": "p", "text": "t", "embedding": [1, 0, 0, 0],
                            "metadata": {key: value}}], name="prop")
    if r.status_code == 400:
        assert repr(key) in r.json()["message"]
        assert client.get("/collections/prop").json()["count"] == 0
        return
    assert r.status_code == 200, r.text
    got = client.get("/collections/prop/documents/p").json()["metadata"]
    assert got == {key: value}
    found = client.get("/collections/prop/documents",
                       params={"where": json.dumps({key: value})})
    assert found.status_code == 200, found.text
    assert [d["id"] for d in found.json()["documents"]] == ["p"]
    values = client.get("/collections/prop/metadata-values", params={"field": key}).json()
    assert values["values"] == [value]


def test_frontmatter_keys_follow_the_grammar_and_odd_ones_never_fail_a_job(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from ragline.core.filters import parse_where
    from ragline.facade import Ragline
    from tests.ingestion_support import fake_settings

    md = (b'---\ntitle: Grippers\nog:title: Robot grippers\nreading time: 5\n'
          b'"say \\"hi\\"": 1\nhuge: 1' + b"0" * 30 + b"\n---\n# Grippers\n\n"
          b"Parallel grippers close two fingers on an object.\n")
    rl = Ragline(fake_settings(tmp_path)).start()
    try:
        with caplog.at_level("WARNING"):
            res = rl.services.ingest.ingest_bytes("book", "default", md, "grippers.md")
        assert res.chunks >= 1
        assert any("grippers.md" in m and "say" in m for m in caplog.messages)
        hits = rl.services.documents.list_page("book", "default",
                                      parse_where({"og:title": "Robot grippers",
                                                   "reading time": {"$gte": 5}}), 10, 0)
        assert hits.total == res.chunks
        meta = hits.records[0].metadata
        assert 'say "hi"' not in meta and meta["huge"] == "1" + "0" * 30
        # a second run (the incremental path) and a full re-run do not fail either
        again = rl.services.ingest.ingest_bytes("book", "default", md, "grippers.md")
        assert again.unchanged
    finally:
        rl.close()
