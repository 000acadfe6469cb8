"""Spec 001's ``search_engine`` tool (issue 37 item 1): configured by an admin as a
connection, its key write-only, answered by a local server that speaks SearxNG's JSON
API, results bounded and passed through the SSRF guard; without it, the tool-decision
prompt names only tools that exist."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi.testclient import TestClient

from ragline.api.app import create_app
from ragline.facade import DocumentInput, Ragline
from ragline.prompts import TOOL_DECISION
from ragline.providers.registry import registry
from ragline.services.tools.web_search import SNIPPET_CHARS, SearxngConfig, SearxngSearch
from ragline.testing.fake_embedder import FakeEmbedder
from ragline.testing.scripted_llm import ScriptedChatModel
from tests.api.helpers import local_client
from tests.ingestion_support import fake_settings

RESULTS = [
    {"title": "Bitcoin  rallies", "url": "https://news.example.com/btc",
     "content": "Bitcoin rose 5% today. " * 60},
    {"title": "Router admin", "url": "http://127.0.0.1:8080/admin", "content": "internal"},
    {"title": "Metadata", "url": "http://169.254.169.254/latest/meta-data", "content": "x"},
    {"title": "Local file", "url": "file:///etc/passwd", "content": "root"},
    {"title": "Intranet", "url": "http://10.1.2.3/wiki", "content": "private"},
    {"title": "Localhost", "url": "http://localhost/secret", "content": "private"},
    {"title": "Ether", "url": "https://news.example.org/eth", "content": "Ether fell."},
]


class Searx:
    """A tiny SearxNG: GET /search?q=...&format=json answers RESULTS; records requests."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.body: bytes | None = None
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                outer.seen.append({"path": parts.path, "query": parse_qs(parts.query),
                                   "auth": self.headers.get("Authorization")})
                if parts.path != "/search" or parse_qs(parts.query).get("format") != ["json"]:
                    self.send_response(403)
                    self.end_headers()
                    return
                body = outer.body or json.dumps({"query": parse_qs(parts.query)["q"][0],
                                                 "results": RESULTS}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def searx() -> Iterator[Searx]:
    s = Searx()
    yield s
    s.close()


@pytest.fixture(autouse=True)
def _searxng_registered() -> Iterator[None]:
    """The entry point (pyproject.toml) is read from the installed metadata; a checkout
    whose install predates it registers the same class here."""
    added = not registry.has("tools", "searxng")
    if added:
        registry.register("tools", "searxng", SearxngSearch)
    yield
    if added:
        registry.unregister("tools", "searxng")


@pytest.fixture
def llm() -> ScriptedChatModel:
    return ScriptedChatModel()


@pytest.fixture
def client(tmp_path: Path, llm: ScriptedChatModel) -> Iterator[TestClient]:
    registry.register("embedders", "fake", FakeEmbedder)
    rl = Ragline(fake_settings(tmp_path, auth="on"), llm=llm).start()
    owner = rl.owner()
    rl.collections.create(owner, "kb", embed={"provider": "fake"})
    rl.documents.add(owner, "kb", [DocumentInput("Paris is the capital of France", {},
                                                 None, "paris")])
    c = local_client(create_app(ragline=rl))
    with c:
        admin, user = (rl.keys.create(owner, role, tenant)[1]
                       for role, tenant in (("admin", "default"), ("user", "alice")))
        c.admin = {"Authorization": f"Bearer {admin}"}  # type: ignore[attr-defined]
        c.user = {"Authorization": f"Bearer {user}"}  # type: ignore[attr-defined]
        yield c
    rl.close()


def add_web(client: TestClient, searx: Searx, **options: Any) -> Any:
    return client.post("/api/connections", headers=client.admin, json={  # type: ignore[attr-defined]
        "id": "web", "kind": "tools", "provider": "searxng",
        "options": {"base_url": searx.url, "api_key": "searx-secret-123",
                    "allow_private": True, **options}})


def chat(client: TestClient, message: str) -> Any:
    r = client.post("/api/chat", headers=client.user,  # type: ignore[attr-defined]
                    json={"message": message, "collection": "kb", "stream": False})
    assert r.status_code == 200, r.text
    return r.json()


def test_configured_search_engine_answers_through_the_tool(
        client: TestClient, llm: ScriptedChatModel, searx: Searx) -> None:
    r = add_web(client, searx)
    assert r.status_code == 201, r.text
    assert "searx-secret-123" not in r.text and r.json()["secrets_set"] == ["api_key"]
    listed = client.get("/api/connections", headers=client.admin)  # type: ignore[attr-defined]
    assert "searx-secret-123" not in listed.text
    schema = client.get("/api/providers/searxng/schema", headers=client.admin).text  # type: ignore[attr-defined]
    assert "searx-secret-123" not in schema
    # a user key cannot configure it
    assert client.post("/api/connections", headers=client.user, json={  # type: ignore[attr-defined]
        "id": "w2", "kind": "tools", "provider": "searxng",
        "options": {"base_url": searx.url}}).status_code == 403

    llm.replies += ['{"tool_name": "search_engine", "arguments": {"query": '
                    '"latest Bitcoin news"}}', "Bitcoin rose 5% today."]
    body = chat(client, "what is the bitcoin price today?")
    assert body["path"] == "tool" and body["tool"]["name"] == "search_engine"
    assert body["answer"] == "Bitcoin rose 5% today."
    decision = llm.calls[-2].prompt
    # with the tool configured, the prompt is spec 001's word for word
    assert "Use tools like 'search_engine' for time-sensitive" in decision
    assert ('Example for tool use: {"tool_name": "search_engine", "arguments": '
            '{"query": "latest Bitcoin news"}}.') in decision
    assert "- search_engine: Search the web" in decision
    assert searx.seen[-1]["query"]["q"] == ["latest Bitcoin news"]
    assert searx.seen[-1]["auth"] == "Bearer searx-secret-123"
    post = llm.calls[-1].prompt
    assert "I used the 'search_engine' tool" in post
    output = json.loads(post.split("information:\n", 1)[1].split("\nBased on", 1)[0])
    assert [x["url"] for x in output["results"]] == ["https://news.example.com/btc",
                                                     "https://news.example.org/eth"]
    assert output["dropped"] == 5  # loopback, link-local, file:, private, localhost
    assert output["results"][0]["title"] == "Bitcoin rallies"
    assert len(output["results"][0]["snippet"]) == SNIPPET_CHARS
    assert "searx-secret-123" not in json.dumps(body)


def test_without_web_search_the_prompt_names_only_registered_tools(
        client: TestClient, llm: ScriptedChatModel) -> None:
    llm.replies += ['{"tool_name": "none"}', "No idea."]
    chat(client, "what is the bitcoin price today?")
    decision = llm.calls[-2].prompt
    assert "search_engine" not in decision
    assert "Use tools like 'search_knowledge_base' for time-sensitive" in decision
    assert ('Example for tool use: {"tool_name": "search_knowledge_base", "arguments": '
            '{"query": "latest Bitcoin news"}}.') in decision
    # a model that still asks for the spec's tool is told nothing new: rejected, general
    llm.replies += ['{"tool_name": "search_engine", "arguments": {"query": "x"}}', "Hm."]
    body = chat(client, "bitcoin?")
    assert body["tool"] == {"name": None, "rejected": "unknown tool 'search_engine'"}


def test_deleting_the_connection_removes_the_tool(
        client: TestClient, llm: ScriptedChatModel, searx: Searx) -> None:
    assert add_web(client, searx).status_code == 201
    assert client.delete("/api/connections/web",
                         headers=client.admin).status_code == 200  # type: ignore[attr-defined]
    llm.replies += ['{"tool_name": "none"}', "ok"]
    chat(client, "news?")
    assert "search_engine" not in llm.calls[-2].prompt


def test_bounded_and_guarded_backend(searx: Searx) -> None:
    tool = SearxngSearch(SearxngConfig(base_url=searx.url, allow_private=True, max_results=1))
    out = tool.search("ether", limit=5)
    assert [r["url"] for r in out["results"]] == ["https://news.example.com/btc"]
    # the backend's own address goes through the SSRF guard unless allowed
    refused = SearxngSearch(SearxngConfig(base_url=searx.url)).search("x")
    assert "error" in refused and "loopback" in refused["error"]
    assert all(s["query"]["q"] != ["x"] for s in searx.seen)  # never sent
    searx.body = b"{" + b" " * 5000 + b"}"
    big = SearxngSearch(SearxngConfig(base_url=searx.url, allow_private=True,
                                      max_bytes=1024)).search("y")
    assert big == {"error": "web search failed: the answer exceeds 1024 bytes"}
    searx.body = b"<html>not json</html>"
    assert "not JSON" in tool.search("z")["error"]
    with pytest.raises(ValueError, match="http"):
        SearxngConfig(base_url="ftp://example.com")


def test_spec_prompt_is_verbatim_when_the_tool_exists() -> None:
    from ragline.prompts import Prompts

    text = Prompts("ragline").tool_decision("- search_engine: x", None, "q",
                                            {"search_engine": SearxngSearch.arguments})
    assert "'search_engine'" in text and "${" not in text and "latest Bitcoin news" in text
    assert "${example_tool}" in TOOL_DECISION


def test_the_documented_connection_configures_it(
        client: TestClient, llm: ScriptedChatModel, searx: Searx) -> None:
    """docs/answers.md's example, its body sent as written bar the SearxNG address."""
    from tests.test_docs_examples import runs

    (block,) = runs("docs/answers.md", "test_the_documented_connection_configures_it")
    body = json.loads(block.code.split("-d '", 1)[1].rsplit("'", 1)[0]
                      .replace("http://searxng:8080", searx.url))
    assert "/api/connections" in block.code
    r = client.post("/api/connections", headers=client.admin, json=body)  # type: ignore[attr-defined]
    assert r.status_code == 201, r.text
    llm.replies += ['{"tool_name": "search_engine", "arguments": {"query": "ether"}}', "ok"]
    assert chat(client, "ether news?")["tool"]["name"] == "search_engine"
    assert searx.seen[-1]["query"]["q"] == ["ether"]
