"""Tenant scoping through ``/mcp``: the key on the request decides what a caller sees.

A real ``ragline serve`` with auth on; the first admin key creates two user keys
in two tenants through ``POST /api/keys``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from tests.live_server import LiveServer

mcp = pytest.importorskip("mcp", reason="the MCP tests need the 'mcp' package (ragline[mcp])")
httpx2 = pytest.importorskip("httpx2")

from mcp import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

SECRET = "The vault combination of tenant A is seven left, three right."


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    data = tmp_path_factory.mktemp("mcp-tenancy") / "data"
    srv = LiveServer(data, env={"RAGLINE_AUTH": "on"})
    try:
        srv.wait_ready()
        admin = (data / "admin-key.txt").read_text().strip()
        keys = {"admin": admin}
        for name, tenant in (("a", "tenant-a"), ("b", "tenant-b")):
            r = httpx.post(f"{srv.url}/api/keys", headers={"authorization": f"Bearer {admin}"},
                           json={"role": "user", "tenant": tenant, "name": name})
            assert r.status_code == 201, r.text
            keys[name] = r.json()["key"]
        yield srv.url, keys
    finally:
        srv.stop()


@pytest.fixture
def url(keyed: tuple[str, dict[str, str]]) -> str:
    return keyed[0]


@asynccontextmanager
async def client(url: str, **headers: str) -> AsyncIterator[Client]:
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http, \
            Client(streamable_http_client(url + "/mcp", http_client=http)) as c:
        yield c


def text(part: Any) -> str:
    """The text of a content or resource part (typed as a union of many kinds)."""
    return str(part.text)


def ok(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    out: dict[str, Any] = result.structured_content
    return out


async def test_a_key_sees_only_its_tenants_data(keyed: tuple[str, dict[str, str]]) -> None:
    url, keys = keyed
    async with client(url, authorization=f"Bearer {keys['a']}") as a:
        ok(await a.call_tool("ingest_text", {"text": SECRET, "title": "Vault"}))
        hits = ok(await a.call_tool("search", {"query": "vault combination"}))["results"]
        assert hits and "seven left" in hits[0]["text"]
        chunk_id, source_id = hits[0]["id"], hits[0]["metadata"]["parent_doc_id"]
        cols = ok(await a.call_tool("list_collections", {}))["collections"]
        assert [(c["name"], c["count"]) for c in cols] == [("knowledge", 1)]

    # the other header form, another tenant
    async with client(url, **{"x-api-key": keys["b"]}) as b:
        cols = ok(await b.call_tool("list_collections", {}))["collections"]
        assert [(c["name"], c["count"]) for c in cols] == [("knowledge", 0)]
        assert ok(await b.call_tool("search", {"query": "vault combination"}))["results"] == []
        by_id = await b.call_tool("get_context", {"chunk_id": chunk_id})
        assert by_id.is_error and "not found" in text(by_id.content[0]).lower()
        by_source = await b.call_tool("get_source", {"source_id": source_id})
        assert by_source.is_error
        listed = await b.read_resource("ragline://collections")
        assert '"count": 0' in text(listed.contents[0])
        # b's own text stays b's
        ok(await b.call_tool("ingest_text", {"text": "Tenant B keeps bees on the roof."}))
        assert ok(await b.call_tool("search", {"query": "bees"}))["results"]

    async with client(url, authorization=f"Bearer {keys['a']}") as a:
        texts = [h["text"] for h in ok(await a.call_tool("search", {"query": "bees roof"}))
                 ["results"]]
        assert all("bees" not in t for t in texts)


def test_a_refused_key_is_401_before_any_mcp_message(url: str) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"accept": "application/json, text/event-stream"}
    for extra in ({}, {"authorization": "Bearer nope"}, {"x-api-key": "nope"}):
        r = httpx.post(url + "/mcp", json=body, headers={**headers, **extra})
        assert r.status_code == 401, r.text
        assert r.json()["error"] == "unauthorized"
        assert r.headers["www-authenticate"] == "Bearer"


async def test_the_shared_corpus_reaches_every_key(keyed: tuple[str, dict[str, str]]) -> None:
    """An admin publishing with ``X-Ragline-Tenant: *``: both users find it through the MCP
    tools, each with its own records, never the other's (issue 33)."""
    url, keys = keyed
    async with client(url, authorization=f"Bearer {keys['admin']}",
                      **{"x-ragline-tenant": "*"}) as admin:
        ok(await admin.call_tool("ingest_text", {
            "text": "The shared handbook: lidar pulses measure the distance to walls.",
            "title": "Handbook"}))
    async with client(url, authorization=f"Bearer {keys['a']}") as a:
        ok(await a.call_tool("ingest_text", {"text": "Tenant A handbook margin note: quokka.",
                                             "title": "A note"}))
    for name, own, other in (("a", "quokka", "bees"), ("b", "bees", "quokka")):
        async with client(url, authorization=f"Bearer {keys[name]}") as c:
            hits = ok(await c.call_tool("search", {"query": "handbook lidar distance walls",
                                                   "limit": 20}))["results"]
            texts = " ".join(h["text"] for h in hits)
            assert "lidar pulses" in texts and other not in texts, (name, texts)
            shared = next(h for h in hits if "lidar pulses" in h["text"])
            source = ok(await c.call_tool("get_source", {
                "source_id": shared["metadata"]["parent_doc_id"]}))
            assert "lidar pulses" in str(source), source
            ctx = ok(await c.call_tool("get_context", {"chunk_id": shared["id"]}))
            assert "lidar pulses" in str(ctx)
            mine = ok(await c.call_tool("search", {"query": own, "mode": "sparse"}))["results"]
            assert mine and own in mine[0]["text"], (name, own)
