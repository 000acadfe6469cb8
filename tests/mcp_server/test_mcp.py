"""The MCP server through the SDK's own client: streamable HTTP on a real
``ragline serve`` process, and stdio on a ``ragline mcp`` subprocess."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragline.testing.server import serve_handler, static_page
from tests.live_server import LiveServer

mcp = pytest.importorskip("mcp", reason="the MCP tests need the 'mcp' package (ragline[mcp])")
httpx2 = pytest.importorskip("httpx2")

from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

BOOK = Path(__file__).resolve().parents[1] / "fixtures" / "book"
TOOLS = {"search", "get_context", "get_source", "list_collections", "ingest_text", "ingest_url"}
PAGE = (b"<html><head><title>Rover manual</title></head><body><h1>Rover manual</h1>"
        b"<p>The rover's sun sensor points the solar panels at the sun every ten minutes, "
        b"and the panels fold away during dust storms.</p></body></html>")


KEYS: dict[str, str] = {}  # server URL -> its first admin key


def hdr(url: str) -> dict[str, str]:
    return {"authorization": f"Bearer {KEYS[url]}"}


def wait_job(url: str, job_id: str) -> dict[str, Any]:
    deadline = time.time() + 120
    while time.time() < deadline:
        job: dict[str, Any] = httpx.get(f"{url}/ingestion/status/{job_id}",
                                        headers=hdr(url)).json()
        if job["status"] in ("succeeded", "failed"):
            return job
        time.sleep(0.2)
    raise TimeoutError(job_id)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    data = tmp_path_factory.mktemp("mcp") / "data"
    srv = LiveServer(data, env={"RAGLINE_AUTH": "on", "RAGLINE_ALLOW_PRIVATE_URLS": "true",
                                "RAGLINE_INGEST_ALLOWED_ROOTS": json.dumps([str(BOOK.parent)])})
    try:
        srv.wait_ready()
        KEYS[srv.url] = (data / "admin-key.txt").read_text().strip()
        r = httpx.post(f"{srv.url}/ingestion/trigger", headers=hdr(srv.url),
                       json={"collection": "book", "path": str(BOOK)}, timeout=30)
        assert wait_job(srv.url, r.json()["job_id"])["status"] == "succeeded"
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def web_page() -> Iterator[str]:
    with serve_handler(static_page(PAGE)) as url:
        yield f"{url}/manual.html"


@asynccontextmanager
async def http_client(url: str, key: str | None = None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {key or KEYS[url]}"}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http, \
            Client(streamable_http_client(url + "/mcp", http_client=http)) as client:
        yield client


def data(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    out: dict[str, Any] = result.structured_content
    return out


def text(part: Any) -> str:
    """The text of a content or resource part (typed as a union of many kinds)."""
    return str(part.text)


def error_text(result: Any) -> str:
    assert result.is_error
    return " ".join(c.text for c in result.content)


async def test_http_lists_tools_with_schemas(server: LiveServer) -> None:
    async with http_client(server.url) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
    assert set(tools) == TOOLS  # no LLM configured: no 'ask'
    search = tools["search"].input_schema
    assert search["required"] == ["query"]
    assert {"collection", "mode", "where", "limit", "rerank", "expand"} <= set(search["properties"])
    assert tools["search"].description


async def test_http_search_context_and_source(server: LiveServer) -> None:
    async with http_client(server.url) as c:
        cols = data(await c.call_tool("list_collections", {}))
        book = next(x for x in cols["collections"] if x["name"] == "book")
        rest_count = httpx.get(f"{server.url}/collections/book", headers=hdr(server.url))
        assert book["count"] == rest_count.json()["count"] > 0

        found = data(await c.call_tool("search", {"query": "how do robots sense depth",
                                                  "collection": "book", "limit": 3}))
        assert found["collection"] == "book" and len(found["results"]) == 3
        hit = found["results"][0]
        assert hit["score"] >= found["results"][1]["score"]
        # the same hits as the HTTP API gives
        rest = httpx.post(f"{server.url}/collections/book/search", headers=hdr(server.url),
                          json={"query": "how do robots sense depth", "limit": 3}).json()
        assert [h["id"] for h in found["results"]] == [h["id"] for h in rest["results"]]

        filtered = data(await c.call_tool("search", {
            "query": "robots", "collection": "book", "where": {"chapter": 2}, "limit": 20}))
        assert filtered["results"]
        assert all(h["metadata"]["chapter"] == 2 for h in filtered["results"])

        ctx = data(await c.call_tool("get_context", {"chunk_id": hit["id"], "collection": "book"}))
        assert ctx["chunk"]["id"] == hit["id"]
        assert ctx["parent_doc_id"] == hit["metadata"]["parent_doc_id"]

        src = data(await c.call_tool("get_source", {"source_id": ctx["parent_doc_id"],
                                                    "collection": "book"}))
        assert src["total_chunks"] >= 1
        # the whole source is joined without each chunk's contextual header
        header = hit["metadata"].get("chunk_header")
        body = hit["text"].removeprefix(f"{header}\n\n") if header else hit["text"]
        assert body[:60] in src["text"]


async def test_http_ingest_text_and_url(server: LiveServer, web_page: str) -> None:
    async with http_client(server.url) as c:
        text = "The lander's thermal blanket keeps the battery above minus twenty degrees."
        got = data(await c.call_tool("ingest_text", {"text": text, "title": "Thermal"}))
        assert got["chunks"] == 1 and got["unchanged"] is False
        again = data(await c.call_tool("ingest_text", {"text": text, "title": "Thermal"}))
        assert again["unchanged"] is True

        page = data(await c.call_tool("ingest_url", {"url": web_page}))
        assert page["title"] == "Rover manual" and page["chunks"] >= 1

        found = data(await c.call_tool("search", {"query": "solar panels dust storms",
                                                  "limit": 1}))
        assert found["collection"] == "knowledge"
        assert "sun sensor" in found["results"][0]["text"]


async def test_http_bad_arguments_are_tool_errors(server: LiveServer) -> None:
    async with http_client(server.url) as c:
        bad_where = await c.call_tool("search", {"query": "x", "collection": "book",
                                                 "where": {"chapter": {"$near": 1}}})
        assert "unknown operator '$near'" in error_text(bad_where)
        missing = await c.call_tool("search", {"query": "x", "collection": "nope"})
        assert "not found" in error_text(missing).lower()
        assert "nope" in error_text(missing)
        too_many = await c.call_tool("search", {"query": "x", "limit": 0})
        assert "limit" in error_text(too_many)
        no_query = await c.call_tool("search", {})
        assert "query" in error_text(no_query)
        unknown_chunk = await c.call_tool("get_context", {"chunk_id": "no-such-chunk",
                                                          "collection": "book"})
        assert "not found" in error_text(unknown_chunk).lower()
        empty = await c.call_tool("ingest_text", {"text": "   "})
        assert "empty" in error_text(empty)


async def test_http_resources(server: LiveServer) -> None:
    async with http_client(server.url) as c:
        templates = {t.uri_template for t in (await c.list_resource_templates())
                     .resource_templates}
        assert templates == {"ragline://collections/{name}",
                             "ragline://sources/{collection}/{+source_id}"}
        listed = await c.read_resource("ragline://collections")
        names = [x["name"] for x in json.loads(text(listed.contents[0]))]
        assert "book" in names
        one = json.loads(text((await c.read_resource("ragline://collections/book")).contents[0]))
        assert one["count"] > 0 and one["dimension"] == 384
        lesson = httpx.get(f"{server.url}/lesson/module-1-foundations/chapter-1-sensing/"
                           "01-how-robots-sense", params={"collection": "book"},
                           headers=hdr(server.url)).json()
        src = await c.read_resource(
            "ragline://sources/book/module-1-foundations/chapter-1-sensing/01-how-robots-sense")
        assert text(src.contents[0]) == lesson["text"]


def test_http_endpoint_answers_plain_post_with_mcp_headers(server: LiveServer) -> None:
    """What a non-SDK client sees: JSON-RPC over one POST (stateless, JSON responses)."""
    r = httpx.post(server.url + "/mcp", headers={"accept": "application/json, text/event-stream",
                                                 **hdr(server.url)},
                   json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                       "protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "curl", "version": "0"}}})
    assert r.status_code == 200, r.text
    assert r.json()["result"]["serverInfo"]["name"] == "ragline"


async def test_stdio_tools(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "ragline.cli.main", "mcp", "--data-dir", str(tmp_path / "data")],
        env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    async with Client(params, read_timeout_seconds=120) as c:
        names = {t.name for t in (await c.list_tools()).tools}
        assert names == TOOLS
        assert data(await c.call_tool("list_collections", {}))["count"] == 0
        got = data(await c.call_tool("ingest_text", {
            "text": "Wheel odometry drifts on sand; visual odometry corrects it.",
            "title": "Odometry"}))
        assert got["chunks"] == 1
        found = data(await c.call_tool("search", {"query": "odometry on sand"}))
        assert "Wheel odometry" in found["results"][0]["text"]
        cols = data(await c.call_tool("list_collections", {}))["collections"]
        assert [(x["name"], x["count"]) for x in cols] == [("knowledge", 1)]
        # private addresses are refused by default (SSRF guard), as an error the agent can read
        refused = await c.call_tool("ingest_url", {"url": "http://127.0.0.1:9/x"})
        assert "private" in error_text(refused) or "loopback" in error_text(refused)
