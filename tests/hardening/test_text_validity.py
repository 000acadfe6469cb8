"""Text is valid or refused (issue 32): a lone surrogate or NUL in any string of any
request is a 400 naming the field before anything is written; JSON nesting and numeric
query parameters are bounded; a listing survives records that already hold such text."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ragline.api.app import create_app
from ragline.facade import IngestSource, Principal, Ragline
from tests.api.helpers import add, doc, local_client, make_collection
from tests.hardening.hostile_inputs import BAD_STRINGS, poisoned_body
from tests.ingestion_support import copy_book, fake_settings

pytestmark = pytest.mark.usefixtures("few_payload_indexes")


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with local_client(create_app(fake_settings(tmp_path))) as c:
        yield c


def rl_of(client: TestClient) -> Ragline:
    rl: Ragline = client.app.state.ragline  # type: ignore[attr-defined]
    return rl


def post(client: TestClient, path: str, body: bytes, method: str = "POST") -> Any:
    return client.request(method, path, content=body,
                          headers={"content-type": "application/json"})


def count(client: TestClient, name: str = "docs") -> int:
    return int(client.get(f"/collections/{name}").json()["count"])


CASES: list[tuple[str, str, dict[str, Any], str]] = [
    # (method, path, body, a field the 400 must name)
    ("POST", "/collections/docs/documents",
     {"documents": [{"id": "x", "text": "t", "embedding": [1, 0, 0, 0]}]}, "documents.0"),
    ("DELETE", "/collections/docs/documents", {"ids": ["d1"]}, "ids.0"),
    ("POST", "/collections/docs/search", {"query": "text", "limit": 3}, "query"),
    ("POST", "/collections/docs/search", {"embedding": [1, 0, 0, 0],
                                          "where": {"kind": "a"}}, "where.kind"),
    ("POST", "/collections", {"name": "other"}, "name"),
    ("POST", "/api/rag/ingest/text", {"text": "Some text to ingest.", "title": "T"}, "t"),
    ("POST", "/ingestion/trigger", {"collection": "docs", "paths": ["a.md"]}, ""),
    ("POST", "/api/chat", {"message": "hello"}, "message"),
]


@pytest.mark.parametrize("bad", sorted(BAD_STRINGS))
@pytest.mark.parametrize("method,path,body,field", CASES, ids=[f"{c[0]} {c[1]}" for c in CASES])
def test_unstorable_text_anywhere_is_400_naming_the_field_and_nothing_is_written(
    client: TestClient, bad: str, method: str, path: str, body: dict[str, Any], field: str
) -> None:
    make_collection(client, "docs")
    add(client, "docs", [doc(1, kind="a")])
    r = post(client, path, poisoned_body(body, BAD_STRINGS[bad]), method)
    assert r.status_code == 400, r.text
    message = r.json()["message"]
    assert f"'{field}" in message and "cannot be stored" in message
    assert ("NUL" in message) if bad == "NUL" else ("lone surrogate (U+D" in message)
    assert r.headers.get("connection") != "close"  # a 4xx keeps the keep-alive connection
    assert count(client) == 1  # nothing written, nothing deleted
    assert [c["name"] for c in client.get("/collections").json()["collections"]] == ["docs"]
    assert client.get("/ingestion/status").json()["count"] == 0


def test_a_metadata_key_and_a_raw_surrogate_byte_are_refused_too(client: TestClient) -> None:
    make_collection(client, "docs")
    body = (b'{"documents": [{"id": "x", "text": "t", "embedding": [1, 0, 0, 0], '
            b'"metadata": {"ti\\u0000tle": "a"}}]}')
    r = post(client, "/collections/docs/documents", body)
    message = r.json()["message"]
    assert r.status_code == 400, r.text
    assert "the key 'ti\\x00tle' in 'documents.0.metadata' holds a NUL" in message
    assert "\x00" not in message  # the bad character is never echoed
    cesu = b'{"query": "a \xed\xa0\x80 b"}'  # U+D800 as raw bytes: Python's parser takes it
    r = post(client, "/collections/docs/search", cesu)
    assert r.status_code == 400 and "'query' holds a lone surrogate" in r.json()["message"]
    # a valid pair (an emoji written as two escapes) is text like any other
    r = post(client, "/collections/docs/documents",
             b'{"documents": [{"id": "e", "text": "ok \\ud83d\\ude00", '
             b'"embedding": [1, 0, 0, 0]}]}')
    assert r.status_code == 200, r.text
    assert client.get("/collections/docs/documents/e").json()["text"] == "ok \U0001f600"


@pytest.mark.parametrize("ctype", [None, "application/json; charset=utf-8",
                                   "application/merge-patch+json"])
def test_every_content_type_fastapi_reads_as_json_is_checked(client: TestClient,
                                                             ctype: str | None) -> None:
    """FastAPI parses a body without a content type (or ``*+json``) as JSON too."""
    make_collection(client, "docs")
    body = poisoned_body({"documents": [{"id": "x", "text": "t",
                                         "embedding": [1, 0, 0, 0]}]}, BAD_STRINGS["NUL"])
    headers = {} if ctype is None else {"content-type": ctype}
    r = client.post("/collections/docs/documents", content=body, headers=headers)
    assert r.status_code == 400 and "'documents.0." in r.json()["message"]
    assert "holds a NUL" in r.json()["message"]
    assert count(client) == 0


def test_nul_in_a_query_parameter_or_the_path_is_400(client: TestClient) -> None:
    make_collection(client, "docs")
    r = client.get("/collections/docs/documents", params={"where": '{"a": "\x00"}'})
    assert r.status_code == 400 and "'where' holds a NUL" in r.json()["message"]
    r = client.get("/collections/do%00cs")
    assert r.status_code == 400 and "the path holds a NUL" in r.json()["message"]


@pytest.mark.parametrize("path", ["/collections/docs/sources", "/collections/docs/documents"])
@pytest.mark.parametrize("param", ["offset", "limit"])
def test_numeric_query_parameters_are_bounded(client: TestClient, path: str,
                                              param: str) -> None:
    make_collection(client, "docs")
    r = client.get(path, params={param: str(10**30)})
    assert r.status_code == 400, r.text
    assert f"'{param}'" in r.json()["message"] and "less than or equal" in r.json()["message"]
    assert client.get(path, params={param: "1000000000"}).status_code == 200


def test_json_nesting_is_bounded_by_max_json_depth(client: TestClient) -> None:
    make_collection(client, "docs")
    add(client, "docs", [doc(1, kind="a")])
    where: dict[str, Any] = {"kind": "a"}
    for _ in range(70):
        where = {"$and": [where]}
    r = client.post("/collections/docs/search", json={"embedding": [1, 0, 0, 0],
                                                      "where": where})
    assert r.status_code == 400, r.text
    assert "nested deeper than 64 levels (setting max_json_depth)" in r.json()["message"]
    assert r.json()["message"].startswith("Invalid request: 'where.$and.0.$and.0")
    deep = b"[" * 100_000 + b"]" * 100_000  # beyond every parser's own limit
    r = post(client, "/collections/docs/search", deep)
    assert r.status_code == 400 and "max_json_depth" in r.json()["message"]
    for _ in range(70 - 4):  # 4 levels of $and are fine
        where = where["$and"][0]
    r = client.post("/collections/docs/search", json={"embedding": [1, 0, 0, 0],
                                                      "where": where})
    assert r.status_code == 200, r.text


def test_listings_survive_records_stored_before_the_check(client: TestClient,
                                                          tmp_path: Path) -> None:
    """A job stored with a lone surrogate in its paths (what an admin trigger did before
    this check) no longer makes the tenant's job list a 500."""
    book = copy_book(tmp_path)
    rl = rl_of(client)
    job = rl.ingestion.submit(Principal.owner("default"), IngestSource("directory", "book",
                                                                       path=str(book),
                                                    paths=["\ud800.md"])).job
    assert job is not None
    rl.ingestion.wait(rl.owner(), job.id, timeout=60)
    listing = client.get("/ingestion/status")
    assert listing.status_code == 200, listing.text
    assert listing.json()["jobs"][0]["job_id"] == job.id
    one = client.get(f"/ingestion/status/{job.id}")
    assert one.status_code == 200 and "\ufffd" in one.text
    # `ragline verify` reports the row, and --repair rewrites it
    found = [f for f in rl.admin.verify(rl.owner()).findings if f.kind == "unstorable_text"]
    assert [(f.source_id, f.repaired) for f in found] == [(None, False)]
    assert f"jobs row '{job.id}'" in found[0].message
    assert "lone surrogate (U+D800)" in found[0].message
    fixed = rl.admin.verify(rl.owner(), repair=True)
    assert [f.repaired for f in fixed.findings if f.kind == "unstorable_text"] == [True]
    assert rl.admin.verify(rl.owner()).findings == []
    assert rl.ingestion.job(rl.owner(), job.id).restricted_paths == ["\ufffd.md"]


def _example(op: dict[str, Any]) -> Any:
    content = (op.get("requestBody") or {}).get("content", {}).get("application/json")
    if content is None:
        return None
    if "example" in content:
        return content["example"]
    schema = content.get("schema", {})
    ref = schema.get("$ref", "")
    return {"examples": ref}  # any object: the guard reads every string of any body


def _message(r: Any) -> str:
    """A 400's message: ragline's shape, or OpenAI's under /v1 (issue 40)."""
    body = r.json()
    return str(body["error"]["message"] if "error" in body and isinstance(body["error"], dict)
               else body["message"])


@pytest.mark.parametrize("bad", sorted(BAD_STRINGS))
def test_a_sweep_over_every_operation_answers_400_and_never_5xx(client: TestClient,
                                                                bad: str) -> None:
    """Every operation of the OpenAPI document, its JSON body poisoned in every string and
    each query parameter holding NUL: a 400 naming the field, never a 5xx, nothing written."""
    make_collection(client, "docs")
    add(client, "docs", [doc(1, kind="a")])
    paths = client.get("/openapi.json").json()["paths"]
    swept = 0
    for path, ops in paths.items():
        url = path.replace("{name}", "docs")
        for param in ("doc_id", "job_id", "key_id", "source_id", "chunk_id", "parent_doc_id",
                      "cid", "conversation_id", "id"):
            url = url.replace(f"{{{param}}}", "x").replace(f"{{{param}:path}}", "x")
        for method, op in ops.items():
            example = _example(op)
            if example is not None:
                r = client.request(method.upper(), url, content=poisoned_body(
                    example, BAD_STRINGS[bad]), headers={"content-type": "application/json"})
                assert r.status_code == 400, (method, path, r.text)
                assert "cannot be stored" in _message(r), (method, path)
                swept += 1
            for param in op.get("parameters", []):
                if param.get("in") != "query":
                    continue
                r = client.request(method.upper(), url, params={param["name"]: "a\x00"})
                assert r.status_code == 400, (method, path, param["name"], r.text)
                assert f"'{param['name']}' holds a NUL" in _message(r)
    assert swept >= 15
    assert count(client) == 1
    assert [c["name"] for c in client.get("/collections").json()["collections"]] == ["docs"]
