"""The MCP ``ask`` tool through the SDK's own client, with the scripted chat model.

``ask`` exists only when a chat model is configured, and the only model a test can
run without a network or a llama.cpp build is the scripted one from
``ragline.testing``, which no setting can select. So the servers here are built
around a facade that was handed the model:

* streamable HTTP: the real app (``create_app(ragline=...)``, auth on) under a
  real uvicorn on a local port, ``/mcp`` reached over TCP with API keys;
* stdio: ``tests/mcp_server/scripted_stdio.py``, the same server ``ragline mcp``
  runs, started by the SDK's stdio client as a subprocess.

The scripted model answers ``Answer from: <titles>`` with the titles of the
documents the chat service put into its prompt, so an answer shows which
retrieved context reached the model; the cited sources come back beside it.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

mcp = pytest.importorskip("mcp", reason="the MCP tests need the 'mcp' package (ragline[mcp])")
httpx2 = pytest.importorskip("httpx2")

from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from ragline.api.app import create_app  # noqa: E402
from ragline.facade import Ragline  # noqa: E402
from ragline.settings import Settings  # noqa: E402
from ragline.testing.scripted_llm import ScriptedChatModel, citing_model  # noqa: E402
from ragline.testing.server import serve_in_thread  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
ROVER = ("The rover's wheels are made of aluminium and each wheel has its own motor, "
         "so the rover keeps driving when one motor fails.")
VAULT = "The vault combination of tenant B is seven left, three right, nine left."


def data(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    out: dict[str, Any] = result.structured_content
    return out


def error_text(result: Any) -> str:
    assert result.is_error
    return " ".join(c.text for c in result.content)


@pytest.fixture(scope="module")
def llm() -> ScriptedChatModel:
    return citing_model()


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory,
                llm: ScriptedChatModel) -> Iterator[tuple[str, dict[str, str]]]:
    """A real uvicorn serving the app with auth on; keys for two tenants."""
    settings = Settings(data_dir=tmp_path_factory.mktemp("mcp-ask") / "data",  # type: ignore[call-arg]
                        auth="on", _env_file=None)
    with Ragline(settings, llm=llm) as rl:
        admin = rl.keys.ensure_first_admin()
        assert admin
        keys = {"admin": admin}
        for name, tenant in (("a", "tenant-a"), ("b", "tenant-b")):
            keys[name] = rl.keys.create(rl.owner(), "user", tenant, name)[1]
        with serve_in_thread(create_app(ragline=rl)) as url:
            yield url, keys


@asynccontextmanager
async def http_client(url: str, key: str) -> AsyncIterator[Client]:
    async with httpx2.AsyncClient(headers={"authorization": f"Bearer {key}"}, timeout=60) as h, \
            Client(streamable_http_client(url + "/mcp", http_client=h)) as client:
        yield client


async def test_http_ask_answers_with_cited_sources_in_the_callers_tenant(
        http_server: tuple[str, dict[str, str]], llm: ScriptedChatModel) -> None:
    url, keys = http_server
    async with http_client(url, keys["b"]) as b:
        assert data(await b.call_tool("ingest_text", {"text": VAULT, "title": "Vault"}))
    async with http_client(url, keys["a"]) as a:
        tools = {t.name: t for t in (await a.list_tools()).tools}
        assert "ask" in tools  # offered because a chat model is configured
        assert tools["ask"].input_schema["required"] == ["question"]
        assert data(await a.call_tool("ingest_text", {"text": ROVER, "title": "Rover wheels"}))

        before = len(llm.calls)
        got = data(await a.call_tool("ask", {"question": "What are the rover's wheels made of "
                                                         "and what happens when a motor fails?"}))
    assert got["path"] == "rag"
    assert got["answer"] == "Answer from: Rover wheels"
    assert [s["title"] for s in got["sources"]] == ["Rover wheels"]
    assert got["sources"][0]["relevance"] > 0
    assert got["conversation_id"]
    # the model saw tenant A's document and nothing of tenant B's
    prompts = "\n".join(c.prompt for c in llm.calls[before:])
    assert "made of aluminium" in prompts
    assert "vault" not in prompts.lower()


async def test_http_ask_follow_up_and_bad_arguments(
        http_server: tuple[str, dict[str, str]]) -> None:
    url, keys = http_server
    async with http_client(url, keys["b"]) as b:
        got = data(await b.call_tool("ask", {"question": "What is the vault combination?"}))
        assert got["answer"] == "Answer from: Vault" and got["sources"][0]["title"] == "Vault"
        follow = data(await b.call_tool("ask", {"question": "and who owns it?",
                                                "conversation_id": got["conversation_id"]}))
        assert follow["conversation_id"] == got["conversation_id"]
        assert follow["strategy"].startswith("follow-up")

        empty = await b.call_tool("ask", {"question": ""})
        assert "question" in error_text(empty)
        missing = await b.call_tool("ask", {"question": "x", "collection": "nope"})
        assert "nope" in error_text(missing) and "not found" in error_text(missing).lower()
        other = await b.call_tool("ask", {"question": "x", "conversation_id": "no-such-one"})
        assert "not found" in error_text(other).lower()


async def test_stdio_ask(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tests.mcp_server.scripted_stdio", "--data-dir", str(tmp_path / "data")],
        cwd=str(ROOT), env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    async with Client(params, read_timeout_seconds=120) as c:
        assert "ask" in {t.name for t in (await c.list_tools()).tools}
        assert data(await c.call_tool("ingest_text", {"text": ROVER, "title": "Rover wheels"}))
        got = data(await c.call_tool("ask", {"question": "What are the rover wheels made of?"}))
        assert got["path"] == "rag" and got["answer"] == "Answer from: Rover wheels"
        cited = got["sources"][0]
        assert cited["title"] == "Rover wheels" and cited["collection"] == "knowledge"
        # a cited source is a chunk id the other tools take
        ctx = data(await c.call_tool("get_context", {"chunk_id": cited["id"],
                                                     "collection": cited["collection"]}))
        assert ROVER[:40] in ctx["chunk"]["text"]
