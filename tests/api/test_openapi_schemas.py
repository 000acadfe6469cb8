"""The OpenAPI document types every success body, shows an example of every request and
response, lists the hardening statuses, and real responses match what it declares.

``test_openapi_contract.py`` lets schemathesis generate requests; this module walks the
document itself and drives every operation once through a scripted scenario (a real app,
store and catalog, a scripted chat model), validating each response body against the
schema the document declares for its status and content type.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from jsonschema import Draft202012Validator

from ragline.api.app import create_app
from ragline.facade import Ragline
from ragline.testing.cross_encoder import tiny_cross_encoder_dir
from ragline.testing.scripted_llm import ScriptedChatModel
from ragline.testing.server import serve_handler, static_page
from tests.ingestion_support import copy_book, fake_settings

SECRET = "s3cret"
JSON = "application/json"


def operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            yield path, method, op


def resolve(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def validator(doc: dict[str, Any], schema: dict[str, Any]) -> Draft202012Validator:
    """Validates against ``schema`` with the document's components reachable by ``$ref``."""
    return Draft202012Validator({**schema, "components": doc["components"]})


def errors_of(doc: dict[str, Any], schema: dict[str, Any], value: Any) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator(doc, schema).iter_errors(value)]


@pytest.fixture(scope="module")
def doc(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("doc")
    app = create_app(fake_settings(tmp, auth="on"))
    return app.openapi()


# -- the document ----------------------------------------------------------------------------
def test_every_success_body_is_typed(doc: dict[str, Any]) -> None:
    untyped = []
    for path, method, op in operations(doc):
        ok = {s: r for s, r in op["responses"].items() if s.startswith("2")}
        assert ok, f"{method} {path} declares no 2xx"
        for status, response in ok.items():
            if status == "204":
                assert "content" not in response, f"{method} {path}: 204 with a body"
                continue
            for media_type, media in response["content"].items():
                schema = media.get("schema", {})
                if media_type == JSON:
                    target = resolve(doc, schema)
                    typed = ("$ref" in schema and (target.get("properties") or isinstance(
                        target.get("additionalProperties"), dict)))
                elif media_type == "text/event-stream":  # the schema of one event: its
                    # data, and its name where the stream names events (/v1's frames don't)
                    typed = (schema.get("type") == "object"
                             and "data" in schema.get("properties", {}))
                else:  # archives, Prometheus text
                    typed = schema.get("type") == "string"
                if not typed:
                    untyped.append(f"{method.upper()} {path} {status} {media_type}: {schema}")
    assert not untyped, "\n".join(untyped)


def test_every_operation_shows_a_valid_example(doc: dict[str, Any]) -> None:
    """A response example on every 2xx media type and a request example for every body and
    path parameter; each JSON example validates against its own schema (nulls included)."""
    problems = []
    for path, method, op in operations(doc):
        where = f"{method.upper()} {path}"
        bodies = [("request", op["requestBody"])] if "requestBody" in op else []
        bodies += [(s, r) for s, r in op["responses"].items() if s.startswith("2")]
        for label, body in bodies:
            for media_type, media in body.get("content", {}).items():
                if "example" not in media:
                    problems.append(f"{where} {label} {media_type}: no example")
                elif media_type == JSON:
                    problems += [f"{where} {label}: example {e}"
                                 for e in errors_of(doc, media["schema"], media["example"])]
        for param in op.get("parameters", []):
            if param["in"] == "path" and "example" not in param:
                problems.append(f"{where}: path parameter {param['name']} has no example")
    assert not problems, "\n".join(problems)


def test_every_operation_is_described(doc: dict[str, Any]) -> None:
    missing = [f"{m.upper()} {p}" for p, m, op in operations(doc)
               if len(op.get("description", "")) < 20]
    assert not missing, missing


def test_hardening_statuses_are_documented(doc: dict[str, Any]) -> None:
    for path, method, op in operations(doc):
        responses = op["responses"]
        where = f"{method.upper()} {path}"
        assert "421" in responses, f"{where}: the Host guard answers 421 on every route"
        assert "422" not in responses
        if "requestBody" in op or method in ("post", "put", "delete"):
            assert "413" in responses, f"{where} takes a body: 413"
        if "429" in responses:
            assert responses["429"]["headers"]["Retry-After"]["required"] is True
        for status, response in responses.items():
            if status[0] in "45":
                # /v1 answers OpenAI's error shape, the request guard's answers included
                body = "OpenAIErrorBody" if path.startswith("/v1/") else "ErrorBody"
                assert response["content"][JSON]["schema"] == {
                    "$ref": f"#/components/schemas/{body}"}, f"{where} {status}"
    statuses = {(m, p): set(op["responses"]) for p, m, op in operations(doc)}
    for key in [("post", "/ingestion/trigger"), ("post", "/api/rag/ingest/upload"),
                ("post", "/api/rag/ingest/url"), ("post", "/api/rag/ingest/text"),
                ("post", "/ingestion/jobs/{job_id}/rerun"), ("post", "/ingestion/webhook/github")]:
        assert {"429", "507"} <= statuses[key], key
    for key in [("post", "/collections"), ("post", "/collections/{name}/documents"),
                ("delete", "/collections/{name}/documents/all")]:
        assert "507" in statuses[key], key
    assert "507" not in statuses[("get", "/collections")]
    assert "429" not in statuses[("post", "/collections/{name}/search")]
    assert {"401", "403"} <= statuses[("get", "/metrics")]  # admin only
    assert "401" not in statuses[("get", "/health")]


# -- real responses --------------------------------------------------------------------------
TOPICS = (b"<html><head><title>Topics</title></head><body><p>Nodes talk over "
          b"topics.</p></body></html>")


@pytest.fixture
def page_url() -> Iterator[str]:
    with serve_handler(static_page(TOPICS, "text/html")) as url:
        yield f"{url}/topics.html"


def _signed(body: bytes, event: str, delivery: str) -> dict[str, str]:
    digest = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    return {"x-hub-signature-256": f"sha256={digest}", "x-github-event": event,
            "x-github-delivery": delivery, "content-type": JSON}


class Recorder:
    """Sends requests and checks each answer against the document, keyed by the route's
    path template, so the test can also tell which operations were covered."""

    def __init__(self, client: TestClient, doc: dict[str, Any]) -> None:
        self.client = client
        self.doc = doc
        self.covered: set[tuple[str, str]] = set()
        self.problems: list[str] = []

    def template(self, method: str, path: str) -> str:
        """The documented path template ``path`` matches (the most literal one wins, as
        ``/documents/all`` over ``/documents/{doc_id}``)."""
        found = []
        for template, ops in self.doc["paths"].items():
            if method.lower() not in ops:
                continue
            pattern = re.sub(r"\{(doc_id|parent_doc_id|source_id)\}", ".+", template)
            pattern = re.sub(r"\{[a-z_]+\}", "[^/]+", pattern)
            if re.fullmatch(pattern, path.split("?")[0]):
                found.append((len(re.sub(r"\{[a-z_]+\}", "", template)), template))
        assert found, f"no documented operation for {method} {path}"
        return max(found)[1]

    def __call__(self, method: str, path: str, expect: int, **kwargs: Any) -> Any:
        r = self.client.request(method.upper(), path, **kwargs)
        assert r.status_code == expect, (method, path, r.status_code, r.text[:500])
        key = (method.lower(), self.template(method, path))
        where = f"{method.upper()} {key[1]} {r.status_code}"
        op = self.doc["paths"][key[1]][key[0]]
        response = op["responses"].get(str(r.status_code))
        if response is None:
            self.problems.append(f"{where}: status not documented")
            return r
        media_type = r.headers.get("content-type", "").split(";")[0]
        if r.status_code == 204:
            assert not r.content
        elif media_type not in response.get("content", {}):
            self.problems.append(f"{where}: content type {media_type} not documented")
        elif media_type == JSON:
            self.problems += [f"{where}: {e}" for e in errors_of(
                self.doc, response["content"][JSON]["schema"], r.json())]
        if 200 <= r.status_code < 300:
            self.covered.add(key)
        return r


@pytest.fixture
def scenario(tmp_path: Path, page_url: str
             ) -> Iterator[tuple[Recorder, Ragline, ScriptedChatModel]]:
    book = copy_book(tmp_path)
    settings = fake_settings(tmp_path, auth="on", default_collection="kb",
                             cross_encoder_path=tiny_cross_encoder_dir(),
                             github_webhook_secret=SECRET, github_repo_path=tmp_path / "clone",
                             allow_private_urls=True, ingest_sync_max_bytes=2000)
    llm = ScriptedChatModel()
    rl = Ragline(settings, llm=llm).start()
    key = rl.keys.create(rl.owner(), "admin", "default")[1]
    app = create_app(ragline=rl)
    with TestClient(app, base_url="http://localhost",
                    headers={"Authorization": f"Bearer {key}"}) as client:
        rec = Recorder(client, app.openapi())
        rec.book = book  # type: ignore[attr-defined]
        yield rec, rl, llm
    rl.close()


def test_real_responses_match_their_declared_schemas(
        scenario: tuple[Recorder, Ragline, ScriptedChatModel], page_url: str) -> None:
    rec, rl, llm = scenario
    call = rec
    call("get", "/health", 200)
    call("get", "/version", 200)
    call("post", "/collections", 201, json={"name": "kb", "embed": {"provider": "fake"},
                                             "metadata": {"book": "robolearn"}})
    call("post", "/collections", 409, json={"name": "kb"})
    call("get", "/collections", 200)
    call("get", "/collections/kb", 200)
    call("get", "/collections/nope", 404)
    call("put", "/collections/kb/metadata?merge=true", 200, json={"metadata": {"x": 1}})
    call("post", "/collections/kb/documents", 200, json={"documents": [
        {"id": "a", "text": "ROS 2 topics carry messages between nodes",
         "metadata": {"chapter": 3, "tags": ["ros2"]}},
        {"id": "b", "text": "URDF describes joints", "metadata": {"chapter": 4}}]})
    call("post", "/collections/kb/documents", 400, json={"documents": [{"text": 1}]})
    call("get", "/collections/kb/documents", 200, params={"where": '{"chapter": 3}'})
    call("get", "/collections/kb/documents/a", 200)
    call("get", "/collections/kb/metadata-values", 200, params={"field": "chapter"})
    call("post", "/collections/kb/search", 200, json={
        "query": "how do nodes talk?", "include_embeddings": True, "expand": "neighbors"})
    call("post", "/collections/kb/search", 200, json={"query": "nodes", "rerank": True,
                                                       "mode": "dense", "limit": 1})
    call("post", "/search", 200, json={"query": "joints", "chapter_max": 4})
    call("post", "/rerank", 200, json={"query": "q", "documents": [{"id": 1, "text": "a"},
                                                                   {"id": "b", "text": "c"}]})
    # ingestion: a directory job, its status, the list, a re-run
    job = call("post", "/ingestion/trigger", 202,
               json={"collection": "kb", "path": str(rec.book)}).json()  # type: ignore[attr-defined]
    rl.ingestion.wait(rl.owner(), job["job_id"], 120)
    call("get", f"/ingestion/status/{job['job_id']}", 200)
    call("get", "/ingestion/status", 200, params={"limit": 5})
    rerun = call("post", f"/ingestion/jobs/{job['job_id']}/rerun", 202).json()
    rl.ingestion.wait(rl.owner(), rerun["job_id"], 120)
    chunk = next(d for d in call("get", "/collections/kb/documents", 200,
                                 params={"limit": 200}).json()["documents"]
                 if d["metadata"].get("prev_chunk_id") and d["metadata"].get("next_chunk_id"))
    call("get", f"/context/{chunk['id']}", 200)
    call("get", f"/context/{chunk['id']}", 200, params={"window": 2})
    call("get", f"/lesson/{chunk['metadata']['parent_doc_id']}", 200)
    # sources: what the directory job wrote, one of them read and deleted
    listed = call("get", "/collections/kb/sources", 200, params={"limit": 50}).json()
    assert listed["sources"], listed
    source_id = listed["sources"][-1]["source_id"]
    call("get", f"/collections/kb/sources/{source_id}", 200)
    call("delete", f"/collections/kb/sources/{source_id}", 200)
    # per-user ingestion: processed (201) and, above ingest_sync_max_bytes, a job (202)
    call("post", "/api/rag/ingest/text", 201, json={"text": "Topics carry messages.",
                                                     "title": "Topics"})
    queued = call("post", "/api/rag/ingest/text", 202, json={"text": "word " * 1000}).json()
    rl.ingestion.wait(rl.owner(), queued["job_id"], 120)
    call("post", "/api/rag/ingest/upload", 201,
         files={"documentFile": ("notes.md", b"# Notes\n\nNodes talk over topics.")})
    call("post", "/api/rag/ingest/url", 201, json={"url": page_url})
    # the webhook: a ping, its replay, a push to another branch
    ping = b'{"zen": "Keep it logically awesome."}'
    call("post", "/ingestion/webhook/github", 200, content=ping,
         headers=_signed(ping, "ping", "d-1"))
    call("post", "/ingestion/webhook/github", 200, content=ping,
         headers=_signed(ping, "ping", "d-1"))
    push = b'{"ref": "refs/heads/elsewhere"}'
    call("post", "/ingestion/webhook/github", 202, content=push,
         headers=_signed(push, "push", "d-2"))
    call("post", "/ingestion/webhook/github", 401, content=push,
         headers={**_signed(push, "push", "d-3"), "x-hub-signature-256": "sha256=00"})
    # answers, with the scripted model
    llm.replies += ['{"tool_name": "none"}', "Over topics."]
    answer = call("post", "/api/chat", 200, json={"message": "how do nodes talk?",
                                                  "collection": "kb", "stream": False}).json()
    llm.replies += ['{"tool_name": "none"}', "Over topics."]
    call("post", "/api/chat", 200, json={"message": "and then?", "stream": True,
                                         "conversation_id": answer["conversation_id"]})
    call("get", f"/api/conversations/{answer['conversation_id']}", 200)
    llm.replies.append(json.dumps({"title": "High CPU", "steps": [
        {"order": 1, "priority": "high", "action": "Find the busiest process"}]}))
    call("post", "/api/checklists", 200, json={"title": "High CPU", "labels": {"c": "cpu"},
                                               "collection": "kb"})
    call("delete", f"/api/conversations/{answer['conversation_id']}", 204)
    # the OpenAI-compatible API: its models, a completion (JSON and stream), its errors
    call("get", "/v1/models", 200)
    llm.replies += ['{"tool_name": "none"}', "Over topics."]
    call("post", "/v1/chat/completions", 200, json={
        "model": "ragline/kb", "messages": [{"role": "user", "content": "nodes?"}]})
    llm.replies += ['{"tool_name": "none"}', "Over topics."]
    call("post", "/v1/chat/completions", 200, json={
        "model": "ragline", "stream": True, "messages": [{"role": "user", "content": "hi"}]})
    call("post", "/v1/chat/completions", 400, json={"model": "ragline/kb", "messages": []})
    call("post", "/v1/chat/completions", 404, json={
        "model": "ragline/nope", "messages": [{"role": "user", "content": "hi"}]})
    # operations and keys
    call("get", "/info", 200)
    call("get", "/api/providers", 200)
    call("get", "/api/providers/openai/schema", 200, params={"kind": "llms"})
    call("get", "/api/providers/nope/schema", 404)
    # named connections (a ragline server nobody runs: health says down, nothing fails)
    gone = {"provider": "ragline-remote",
            "options": {"base_url": "http://127.0.0.1:9", "api_key": "k", "timeout": 1}}
    call("post", "/api/connections/test", 200, json=gone)
    call("post", "/api/connections/test", 400, json={"provider": "ragline-remote",
                                                      "options": {}})
    call("post", "/api/connections", 201, json={"id": "staging", **gone})
    call("get", "/api/connections", 200)
    call("get", "/api/connections/staging/health", 200)
    call("get", "/api/connections/nope/health", 404)
    call("get", "/collections", 502, params={"service": "staging"})
    call("get", "/collections", 404, params={"service": "nope"})
    call("delete", "/api/connections/staging", 200)
    call("get", "/metrics", 200)
    call("post", "/admin/backup", 200)
    made = call("post", "/api/keys", 201, json={"role": "user", "tenant": "alice"}).json()
    call("get", "/api/keys", 200)
    call("delete", f"/api/keys/{made['id']}", 200)
    # deletes last
    call("delete", "/collections/kb/documents", 200, json={"ids": ["a", "b"]})
    call("delete", "/collections/kb/documents/all", 200)
    call("delete", "/collections/kb", 200)

    assert not rec.problems, "\n".join(rec.problems)
    documented = {(m, p) for p, m, _ in operations(rec.doc)}
    assert documented - rec.covered == set(), "operations without a checked 2xx sample"


def test_the_schema_check_itself_rejects_a_wrong_body(doc: dict[str, Any]) -> None:
    """The validation above is real: a body missing fields or of the wrong types fails."""
    schema = {"$ref": "#/components/schemas/CollectionList"}
    found = errors_of(doc, schema, {"collections": [{"name": 1}], "count": "x"})
    assert "count: 'x' is not of type 'integer'" in found
    assert "collections/0: 'dimension' is a required property" in found
    assert errors_of(doc, schema, {"collections": [], "count": 0}) == []
