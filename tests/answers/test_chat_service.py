"""The chat turn with a scripted model and a scripted retriever: every synthesis path,
threshold edges, bad tool JSON, event order, topics and strategies, tenant scoping."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from ragline.catalog.conversations import ConversationTable
from ragline.catalog.sqlite import Catalog
from ragline.errors import LLMNotConfigured, NotFound, ProviderError
from ragline.services.answers.chat import ChatConfig, ChatRequest, ChatService
from ragline.services.answers.topics import FIRST, FOLLOW_UP
from ragline.services.tools.base import Tool
from ragline.services.tools.builtin import FetchUrl, SearchKnowledgeBase
from ragline.testing.scripted_llm import ScriptedChatModel

from .support import ScriptedRetriever, hit

TOOLS: dict[str, Tool] = {"search_knowledge_base": SearchKnowledgeBase(),
                          "fetch_url": FetchUrl()}


@pytest.fixture
def conversations(tmp_path: Path) -> ConversationTable:
    return ConversationTable(Catalog(tmp_path / "catalog.sqlite3"))


def service(llm: ScriptedChatModel | None, retriever: ScriptedRetriever,
            conversations: ConversationTable, **config: Any) -> ChatService:
    def get_llm() -> ScriptedChatModel:
        if llm is None:
            raise LLMNotConfigured("no model")
        return llm

    return ChatService(get_llm, retriever, conversations, lambda: TOOLS,
                       lambda name: {}, ChatConfig(default_collection="kb", **config))


async def turn(svc: ChatService, message: str, tenant: str = "t1",
               conversation_id: str | None = None) -> dict[str, Any]:
    prepared = await svc.prepare(ChatRequest(tenant, message, conversation_id))
    return await prepared.run()


async def test_rag_path_uses_strict_prompt_with_context(conversations: ConversationTable
                                                        ) -> None:
    r = ScriptedRetriever({("t1", "kb"): [hit(1, 0.9, "Paris is the capital of France."),
                                          hit(2, 0.6)]})
    llm = ScriptedChatModel(['{"tool_name": "none"}', "Paris."])
    out = await turn(service(llm, r, conversations), "Capital of France?")
    assert out["path"] == "rag" and out["answer"] == "Paris." and out["tool"] is None
    decision, synthesis = llm.calls
    assert decision.json_mode and "ADDITIONAL CONTEXT FROM KNOWLEDGE BASE" in decision.prompt
    assert "Paris is the capital of France." in decision.prompt
    assert synthesis.stream and synthesis.prompt.startswith(
        "SYSTEM INSTRUCTION: You are in STRICT CONTEXT-ONLY MODE")
    # spec 001's context format, documents separated by ---
    assert ("Document (Source: md, Title: Doc 1, File: docs/doc1.md, Score: 0.9000):\n"
            "Paris is the capital of France.\n\n---\n\nDocument (Source: md, Title: Doc 2"
            in synthesis.prompt)
    assert [s["id"] for s in out["sources"]] == ["h1", "h2"]
    assert out["sources"][0]["source_path"] == "docs/doc1.md"
    assert r.calls[0]["limit"] == 3 and r.calls[0]["candidates"] == 100


@pytest.mark.parametrize(("top", "path"), [(0.75, "rag"), (0.7499, "general"), (None, "general")])
async def test_threshold_edges(conversations: ConversationTable, top: float | None,
                               path: str) -> None:
    r = ScriptedRetriever({("t1", "kb"): [hit(1, top)]})
    llm = ScriptedChatModel(['{"tool_name": "none"}', "answer"])
    out = await turn(service(llm, r, conversations, relevance_threshold=0.75), "q")
    assert out["path"] == path
    decision = llm.calls[0].prompt
    assert ("content 1" in decision) == (path == "rag")  # below threshold: no KB block
    if path == "general":
        assert llm.calls[1].prompt.startswith("SYSTEM INSTRUCTION: You are ragline.")
        assert out["sources"] == []


async def test_general_path_without_documents(conversations: ConversationTable) -> None:
    llm = ScriptedChatModel(['{"tool_name": "none"}', "42"])
    out = await turn(service(llm, ScriptedRetriever(), conversations), "meaning of life?")
    assert out["path"] == "general" and out["answer"] == "42"
    assert "(Consider this before deciding on a tool)" not in llm.calls[0].prompt


@pytest.mark.parametrize("raw", [
    "not json at all",
    '{"tool_name": "search_engine", "arguments": {"query": "x"}}',
    '```json\n{"tool_name": "fetch_url", "arguments": {}}\n```',
])
async def test_malformed_or_unknown_tool_json_falls_back(
        conversations: ConversationTable, raw: str, caplog: pytest.LogCaptureFixture) -> None:
    r = ScriptedRetriever({("t1", "kb"): [hit(1, 0.95)]})
    llm = ScriptedChatModel([raw, "from context"])
    with caplog.at_level(logging.WARNING):
        out = await turn(service(llm, r, conversations), "q")
    assert out["path"] == "rag" and out["answer"] == "from context"
    assert out["tool"]["name"] is None and out["tool"]["rejected"]
    assert "tool decision ignored" in caplog.text


async def test_tool_path_search_knowledge_base_same_tenant(conversations: ConversationTable
                                                           ) -> None:
    r = ScriptedRetriever({("t1", "kb"): [hit(1, 0.2)],
                           ("t1", "other"): [hit(7, 0.9, "the other collection says 7")],
                           ("t2", "other"): [hit(8, 0.9, "SECRET of tenant t2")]})
    decision = json.dumps({"tool_name": "search_knowledge_base",
                           "arguments": {"query": "seven", "collection": "other"}})
    llm = ScriptedChatModel([decision, "It is 7."])
    out = await turn(service(llm, r, conversations), "what does other say?", tenant="t1")
    assert out["path"] == "tool" and out["tool"]["name"] == "search_knowledge_base"
    post = llm.calls[1].prompt
    assert post.startswith('User query: "what does other say?"\n'
                           "I used the 'search_knowledge_base' tool")
    assert "the other collection says 7" in post and "SECRET" not in post
    assert {c["tenant"] for c in r.calls} == {"t1"}
    assert [s["id"] for s in out["sources"]] == ["h7"]


async def test_tool_path_fetch_url_refuses_private_addresses(conversations: ConversationTable
                                                             ) -> None:
    decision = '{"tool_name": "fetch_url", "arguments": {"url": "http://127.0.0.1:1/admin"}}'
    llm = ScriptedChatModel([decision, "That address is not allowed."])
    out = await turn(service(llm, ScriptedRetriever(), conversations), "read my router page")
    assert out["path"] == "tool" and out["tool"]["error"]
    assert "error" in llm.calls[1].prompt and "127.0.0.1" in llm.calls[1].prompt


async def test_tool_exception_is_reported_to_the_model(conversations: ConversationTable
                                                       ) -> None:
    class Broken:
        name = "broken"
        description = "always fails"
        arguments: dict[str, Any] = {"type": "object", "properties": {}}

        async def run(self, args: dict[str, Any], ctx: Any) -> Any:
            raise RuntimeError("boom")

    svc = service(ScriptedChatModel(['{"tool_name": "broken"}', "sorry"]),
                  ScriptedRetriever(), conversations)
    svc.tools = lambda: {"broken": Broken()}  # type: ignore[dict-item,assignment,return-value]
    out = await turn(svc, "q")
    assert out["path"] == "tool" and "failed" in out["tool"]["error"]


async def test_streaming_event_order_and_timings(conversations: ConversationTable) -> None:
    llm = ScriptedChatModel(['{"tool_name": "none"}', "one two three"])
    prepared = await service(llm, ScriptedRetriever(), conversations).prepare(
        ChatRequest("t1", "count"))
    events = [e async for e in prepared.events()]
    assert [e.kind for e in events] == ["token", "token", "token", "done"]
    assert "".join(e.data["text"] for e in events[:-1]) == "one two three"
    done = events[-1].data
    assert done["path"] == "general" and done["strategy"] == FIRST
    t = done["timings"]
    assert t["first_token_ms"] <= t["total_ms"] and t["overhead_ms"] >= 0
    assert {"retrieval_ms", "decision_ms", "llm_ms"} <= set(t)


async def test_topic_accumulation_and_both_strategies(
        conversations: ConversationTable, caplog: pytest.LogCaptureFixture) -> None:
    r = ScriptedRetriever()
    llm = ScriptedChatModel(rules={"running topic": "InstructLab and OpenShift AI integration"},
                            default='{"tool_name": "none"}')
    svc = service(llm, r, conversations)
    with caplog.at_level(logging.INFO):
        first = await turn(svc, "What is InstructLab?")
        second = await turn(svc, "Does it integrate with OpenShift AI?",
                            conversation_id=first["conversation_id"])
    assert first["strategy"] == FIRST and r.calls[0]["query"] == "What is InstructLab?"
    assert second["strategy"] == FOLLOW_UP
    assert r.calls[1]["query"] == "InstructLab and OpenShift AI integration"
    topic_call = next(c for c in llm.calls if "running topic" in c.prompt)
    assert 'Current topic: "What is InstructLab?"' in topic_call.prompt
    assert "RAG query strategy: first message (raw query)" in caplog.text
    assert "RAG query strategy: follow-up (contextualized topic)" in caplog.text
    conv = conversations.get("t1", first["conversation_id"])
    assert conv.topic == "InstructLab and OpenShift AI integration"
    assert [m.role for m in conv.messages] == ["user", "assistant", "user", "assistant"]
    assert conv.messages[3].meta["strategy"] == FOLLOW_UP


async def test_topic_fallback_when_the_topic_call_fails(conversations: ConversationTable
                                                        ) -> None:
    r = ScriptedRetriever()
    llm = ScriptedChatModel(rules={"running topic": ProviderError("down")},
                            default='{"tool_name": "none"}')
    svc = service(llm, r, conversations)
    first = await turn(svc, "What is InstructLab?")
    second = await turn(svc, "Does it integrate with OpenShift AI?",
                        conversation_id=first["conversation_id"])
    assert second["strategy"] == FOLLOW_UP
    assert r.calls[1]["query"] == "InstructLab integrate OpenShift AI"
    # a whitespace-only topic counts as no topic (first-message strategy)
    conversations.append("t1", first["conversation_id"], [], topic="   ")
    third = await turn(svc, "Fresh question", conversation_id=first["conversation_id"])
    assert third["strategy"] == FIRST and r.calls[2]["query"] == "Fresh question"


async def test_conversations_are_per_tenant(conversations: ConversationTable) -> None:
    svc = service(ScriptedChatModel(), ScriptedRetriever(), conversations)
    mine = await turn(svc, "hello", tenant="t1")
    with pytest.raises(NotFound):
        await turn(svc, "hijack", tenant="t2", conversation_id=mine["conversation_id"])
    with pytest.raises(NotFound):
        conversations.get("t2", mine["conversation_id"])
    with pytest.raises(NotFound):
        conversations.delete("t2", mine["conversation_id"])
    conversations.delete("t1", mine["conversation_id"])
    with pytest.raises(NotFound):
        conversations.get("t1", mine["conversation_id"])


async def test_no_model_is_a_503_before_any_work(conversations: ConversationTable) -> None:
    r = ScriptedRetriever()
    with pytest.raises(LLMNotConfigured) as err:
        await turn(service(None, r, conversations), "q")
    assert err.value.status == 503 and r.calls == []
