"""A lone surrogate or a NUL in any string of any operation is a 4xx, never a 5xx, and
writes nothing (issue 32, item 3).

DEPENDS ON h32a (issue 32 inputs: text validity, 400 naming the field); on a branch
without it this test lists the operations that answer 500.

Before: a JSON ``"\\ud800"`` anywhere in a string answered 500 on 17+ endpoints (document
writes and deletes, every search mode, ingest text, chat), and one admin
``ingestion/trigger`` with ``"paths": ["\\ud800"]`` was stored, after which the tenant's
job list answered 500 every time. Here every operation of the server's own OpenAPI
document gets, one location at a time (path parameter, query parameter, each string of
a JSON body, an uploaded file's text), a string holding a lone surrogate and then a
NUL; no answer may be a 5xx, and the server's state (collections and their counts,
keys, jobs, connections) must be what it was.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from ragline.testing.cross_encoder import tiny_cross_encoder_dir
from ragline.testing.openai_server import scripted_openai_server
from ragline.testing.scripted_llm import citing_model
from tests.hostile.conftest import Server, start_server

BAD = ("\ud800", "\x00")
MAX_VARIANTS_PER_OPERATION = 16
Location = tuple[str, Any]  # ("path"|"query", name) or ("body", json path tuple)


@pytest.fixture(scope="module")
def sweep_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """Every optional feature configured (a chat model, a cross-encoder), so a 503 for a
    missing one cannot hide a failure."""
    with scripted_openai_server(citing_model()) as llm_url:
        srv = start_server(tmp_path_factory.mktemp("sweep"), "--cross-encoder-path",
                           str(tiny_cross_encoder_dir()),
                           env={"RAGLINE_LLM_BASE_URL": llm_url,
                                "RAGLINE_LLM_MODEL": "scripted"})
        try:
            yield srv
        finally:
            srv.live.stop()


def _resolve(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        schema = spec["components"]["schemas"][name]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [s for s in schema[key] if s.get("type") != "null"]
            return _resolve(spec, options[0] if options else {})
    if "allOf" in schema:
        return _resolve(spec, schema["allOf"][0])
    return schema


def example(spec: dict[str, Any], schema: dict[str, Any], depth: int = 0) -> Any:
    """A small value of ``schema`` with every string property filled (to be swapped)."""
    schema = _resolve(spec, schema)
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        if depth > 4:
            return {}
        return {name: example(spec, sub, depth + 1)
                for name, sub in schema.get("properties", {}).items()}
    if kind == "array":
        return [example(spec, schema.get("items", {}), depth + 1)]
    if kind == "integer":
        return max(1, int(schema.get("minimum", 1)))
    if kind == "number":
        return 0.5
    if kind == "boolean":
        return False
    return "x"


def _string_leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(value, str):
        yield path
    elif isinstance(value, dict):
        for key, sub in value.items():
            yield from _string_leaves(sub, (*path, key))
    elif isinstance(value, list):
        for i, sub in enumerate(value):
            yield from _string_leaves(sub, (*path, i))


def _set(doc: Any, path: tuple[Any, ...], value: str) -> Any:
    doc = copy.deepcopy(doc)
    target = doc
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return doc


def _encode(text: str) -> str:
    return quote(text.encode("utf-8", "surrogatepass"), safe="")


def _snapshot(server: Server) -> dict[str, Any]:
    def get(path: str) -> Any:
        r = httpx.get(server.url + path, headers=server.admin, timeout=60)
        assert r.status_code == 200, (path, r.status_code, r.text[:300])
        return r.json()

    collections = get("/collections")["collections"]
    return {
        "collections": sorted((c["name"], c.get("count")) for c in collections),
        "keys": len(get("/api/keys")["keys"]),
        "jobs": get("/ingestion/status?limit=200")["count"],
        "connections": sorted(c["id"] for c in get("/api/connections")["connections"]),
    }


def _requests(spec: dict[str, Any], names: dict[str, str],
              ) -> Iterator[tuple[str, str, str, dict[str, Any]]]:
    """(operation, method, url, httpx keyword arguments) for every variant."""
    for path, item in spec["paths"].items():
        for method, op in item.items():
            if method not in ("get", "post", "put", "patch", "delete"):
                continue
            params = op.get("parameters", [])
            path_values = {p["name"]: names.get(p["name"], "x")
                           for p in params if p["in"] == "path"}
            query = {p["name"]: example(spec, p.get("schema", {}))
                     for p in params if p["in"] == "query" and p.get("required")}
            body_schema = (op.get("requestBody", {}).get("content", {})
                           .get("application/json", {}).get("schema"))
            multipart = "multipart/form-data" in op.get("requestBody", {}).get("content", {})
            body = example(spec, body_schema) if body_schema else None
            locations: list[Location] = [("path", n) for n in path_values]
            locations += [("query", p["name"]) for p in params if p["in"] == "query"
                          and _resolve(spec, p.get("schema", {})).get("type", "string")
                          == "string"]
            locations += [("body", leaf) for leaf in _string_leaves(body)]
            if multipart:
                locations.append(("file", None))
            variants = [(loc, bad) for loc in locations for bad in BAD]
            for (where, which), bad in variants[:MAX_VARIANTS_PER_OPERATION]:
                text = f"a{bad}b"
                values = dict(path_values)
                q = {k: str(v) for k, v in query.items()}
                kwargs: dict[str, Any] = {}
                doc = body
                if where == "path":
                    values[which] = text
                elif where == "query":
                    q[which] = text
                elif where == "body":
                    doc = _set(body, which, text)
                url = path
                for name, value in values.items():
                    url = url.replace("{" + name + "}", _encode(value))
                    url = url.replace("{" + name + ":path}", _encode(value))
                if q:
                    url += "?" + "&".join(f"{_encode(k)}={_encode(v)}" for k, v in q.items())
                if doc is not None:
                    kwargs["content"] = json.dumps(doc).encode()  # "\ud800" as an escape
                    kwargs["headers"] = {"Content-Type": "application/json"}
                if multipart:
                    content = (f"# T\n\n{text}\n" if where == "file" else "# T\n\nok\n")
                    kwargs["files"] = {"documentFile": (
                        "sweep.md", content.encode("utf-8", "surrogatepass"), "text/markdown")}
                yield f"{method.upper()} {path} [{where} {which!r} {bad!r}]", method, url, kwargs


def test_no_string_of_any_operation_answers_5xx_or_writes(sweep_server: Server) -> None:
    server = sweep_server
    h = server.admin
    assert httpx.post(server.url + "/collections", headers=h, json={"name": "sweep"},
                      timeout=30).status_code == 201
    r = httpx.post(server.url + "/collections/sweep/documents", headers=h, timeout=30,
                   json={"documents": [{"id": "d1", "text": "kept", "embedding": [1.0, 0.0]}]})
    assert r.status_code == 200, r.text
    spec = httpx.get(server.url + "/openapi.json", timeout=30).json()
    before = _snapshot(server)
    names = {"name": "sweep", "collection": "sweep", "doc_id": "d1", "source_id": "x",
             "job_id": "x", "key_id": "x", "connection_id": "x"}
    failures: list[str] = []
    sent = 0
    with httpx.Client(base_url=server.url, headers=h, timeout=60) as client:
        for label, method, url, kwargs in _requests(spec, names):
            extra = kwargs.pop("headers", {})
            r = None
            status = 599  # no answer at all counts as a failure
            for _ in range(2):  # once more if a 500 before dropped the kept-alive connection
                try:
                    r = client.request(method.upper(), url, headers=extra, **kwargs)
                    status = r.status_code
                    break
                except httpx.TransportError:
                    continue
            sent += 1
            if status >= 500:
                failures.append(f"{label}: {status} {r.text[:120] if r else ''}")
    assert sent > 100
    assert not failures, f"{len(failures)} of {sent} answered 5xx:\n" + "\n".join(failures)
    assert _snapshot(server) == before
