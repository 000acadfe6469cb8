"""ragline against a real OpenAI-compatible server and a real (tiny) model.

SmolLM2-135M's wording is not tested, only the protocol: what ragline sends (model,
messages, JSON mode, streaming, the retrieved context inside the prompt), that it reads
real answers and streams, and that tool JSON survives the round trip.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ragline.api.app import create_app
from ragline.facade import DocumentInput, Ragline
from ragline.prompts import Prompts
from ragline.providers.llms.openai_compat import OpenAIChatModel
from ragline.services.answers.tool_choice import (
    describe_tools,
    extract_json_object,
    parse_tool_decision,
)
from ragline.services.tools.base import Tool
from ragline.services.tools.builtin import FetchUrl, SearchKnowledgeBase
from ragline.settings import Settings
from ragline.testing.llama_server import MODEL_ALIAS, RecordingProxy

FACT = "The capital of France is Paris."


async def test_complete_and_stream_against_llama_cpp(proxy: RecordingProxy) -> None:
    llm = OpenAIChatModel(base_url=proxy.url, model=MODEL_ALIAS, max_tokens=16)
    messages = [{"role": "user", "content": "Say hello."}]
    text = await llm.complete(messages)
    assert isinstance(text, str) and text.strip()
    parts = [p async for p in llm.stream(messages)]
    assert parts and "".join(parts).strip()
    sent = proxy.bodies()
    assert [b.get("stream", False) for b in sent] == [False, True]
    assert all(b["model"] == MODEL_ALIAS and b["messages"] == messages for b in sent)
    assert all(b["max_tokens"] == 16 and b["temperature"] == 0.0 for b in sent)


async def test_tool_decision_json_round_trip(proxy: RecordingProxy) -> None:
    """JSON mode makes the server constrain its output to JSON; ragline parses it and
    validates it against the real tools (a decision naming an unknown tool degrades to
    'none' with a reason, which is also a valid outcome)."""
    tools: dict[str, Tool] = {"fetch_url": FetchUrl(),
                              "search_knowledge_base": SearchKnowledgeBase()}
    llm = OpenAIChatModel(base_url=proxy.url, model=MODEL_ALIAS, max_tokens=64)
    prompt = Prompts("ragline").tool_decision(describe_tools(tools), None,
                                              "Read https://example.com for me")
    raw = await llm.complete([{"role": "user", "content": prompt}], json_mode=True)
    assert proxy.bodies()[0]["response_format"] == {"type": "json_object"}
    obj = extract_json_object(raw)
    assert isinstance(obj, dict), raw
    decision = parse_tool_decision(raw, tools)
    assert decision.tool_name in {"none", *tools}
    if decision.tool_name != "none":
        assert decision.problem is None
        json.dumps(decision.arguments)  # arguments are plain JSON


@pytest.fixture
def client(tmp_path: Path, proxy: RecordingProxy) -> Iterator[TestClient]:
    settings = Settings(data_dir=tmp_path / "data", llm_base_url=proxy.url,  # type: ignore[call-arg]
                        llm_model=MODEL_ALIAS, llm_max_tokens=32, _env_file=None)
    rl = Ragline(settings).start()
    rl.collections.create(rl.owner(), "kb", embed={"provider": "local"})
    rl.documents.add(rl.owner(), "kb", [DocumentInput(FACT, {"title": "France",
                                                             "source_path": "geo/france.md"},
                                                      None, "fr")])
    with TestClient(create_app(ragline=rl), base_url="http://localhost",
                    headers={"X-API-Key": "test"}) as c:
        yield c
    rl.close()


def sse(text: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        out.append((fields["event"], json.loads(fields["data"])))
    return out


def test_chat_turn_streams_and_sends_the_retrieved_context(
        client: TestClient, proxy: RecordingProxy) -> None:
    with client.stream("POST", "/api/chat", json={"message": "What is the capital of France?",
                                                  "collection": "kb"}) as r:
        assert r.status_code == 200
        events = sse(r.read().decode())
    kinds = [k for k, _ in events]
    assert kinds[-1] == "done" and set(kinds[:-1]) <= {"token"}
    done = events[-1][1]
    assert done["path"] in {"rag", "tool", "general"}
    assert done["timings"]["llm_ms"] > 0 and done["timings"]["overhead_ms"] >= 0
    sent = proxy.bodies()
    decision, final = sent[0], sent[-1]
    assert decision["response_format"] == {"type": "json_object"}
    assert FACT in decision["messages"][0]["content"]  # relevance passed the threshold
    assert "ADDITIONAL CONTEXT FROM KNOWLEDGE BASE" in decision["messages"][0]["content"]
    assert final["stream"] is True
    if done["path"] == "rag":
        assert FACT in final["messages"][0]["content"]
        assert final["messages"][0]["content"].startswith(
            "SYSTEM INSTRUCTION: You are in STRICT CONTEXT-ONLY MODE")
        assert done["sources"][0]["id"] == "fr"
    text = "".join(d["text"] for k, d in events if k == "token")
    conv = client.get(f"/api/conversations/{done['conversation_id']}").json()
    assert conv["messages"][-1]["content"] == text


def test_checklist_against_the_real_model(client: TestClient, proxy: RecordingProxy) -> None:
    """Whatever the 135M model writes, the answer is a valid checklist (parsed or the
    fallback), and the request carried the alert and asked for JSON."""
    r = client.post("/api/checklists", json={"title": "High CPU usage", "collection": "kb",
                                             "labels": {"component": "cpu"}, "top_k": 1})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["steps"] and all(s["order"] >= 1 for s in out["steps"])
    body = proxy.bodies()[-1]
    assert body["response_format"] == {"type": "json_object"}
    assert "High CPU usage" in body["messages"][0]["content"]
