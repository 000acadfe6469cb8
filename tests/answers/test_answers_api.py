"""The HTTP surface over a real app, store and catalog (fake embedder, scripted model):
POST /api/chat streaming and not, conversations, checklists, 503 without a model,
tenant scoping of chat retrieval in the real store."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ragline.api.app import create_app
from ragline.core.principal import Principal
from ragline.facade import DocumentInput, Ragline
from ragline.providers.registry import registry
from ragline.settings import Settings
from ragline.testing.fake_embedder import FakeEmbedder
from ragline.testing.scripted_llm import ScriptedChatModel
from tests.api.helpers import local_client
from tests.ingestion_support import fake_settings

DOCS = [
    {"id": "paris", "text": "Paris is the capital of France",
     "metadata": {"title": "France", "source_path": "geo/france.md", "source_type": "md"}},
    {"id": "bread", "text": "Sourdough bread needs a starter",
     "metadata": {"title": "Bread", "source_url": "https://example.com/bread"}},
]
RUNBOOKS = [
    ("cpu", "High CPU usage: check top processes and throttling", ["cpu", "linux"], ["VM.*"],
     "runbooks/cpu.md"),
    ("cpu2", "CPU steal time on shared hosts: move the instance", ["cpu"], ["VM.*"],
     "runbooks/cpu.md"),
    ("disk", "Disk usage high: clean logs", ["disk"], ["BM.*"], "runbooks/disk.md"),
]


@pytest.fixture
def llm() -> ScriptedChatModel:
    return ScriptedChatModel()


@pytest.fixture
def rl(settings: Settings, llm: ScriptedChatModel) -> Iterator[Ragline]:
    registry.register("embedders", "fake", FakeEmbedder)
    r = Ragline(settings, llm=llm).start()
    owner = r.owner()
    r.collections.create(owner, "kb", embed={"provider": "fake"})
    r.documents.add(owner, "kb", [DocumentInput(d["text"], d["metadata"], None, d["id"])  # type: ignore[arg-type]
                                  for d in DOCS])
    r.documents.add(Principal("other-tenant"), "kb",
                    [DocumentInput("Paris secret of another tenant", {}, None, "theirs")])
    r.collections.create(owner, "rb", embed={"provider": "fake"})
    r.documents.add(owner, "rb", [DocumentInput(t, {"tags": tags, "applicable_shapes": shapes,
                                                    "source_path": path}, None, i)
                                  for i, t, tags, shapes, path in RUNBOOKS])
    yield r
    r.close()


@pytest.fixture
def client(rl: Ragline) -> Iterator[TestClient]:
    with local_client(create_app(ragline=rl)) as c:
        yield c


def sse_events(text: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        out.append((lines["event"], json.loads(lines["data"])))
    return out


def test_chat_json_rag_path_cites_sources_and_stays_in_tenant(
        client: TestClient, llm: ScriptedChatModel) -> None:
    llm.replies += ['{"tool_name": "none"}', "Paris."]
    r = client.post("/api/chat", json={"message": "capital of France Paris",
                                       "collection": "kb", "stream": False})
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) >= {"answer", "conversation_id", "strategy", "path", "tool", "sources"}
    assert body["answer"] == "Paris." and body["path"] == "rag"
    assert body["strategy"] == "first message (raw query)"
    assert body["sources"][0]["id"] == "paris"
    assert body["sources"][0]["source_path"] == "geo/france.md"
    assert body["sources"][0]["relevance"] >= 0.75
    strict = llm.calls[-1].prompt
    assert "Paris is the capital of France" in strict
    assert "Title: France, File: geo/france.md, Score: " in strict
    assert "another tenant" not in strict and "theirs" not in json.dumps(body)


def test_chat_below_threshold_is_general(client: TestClient, llm: ScriptedChatModel) -> None:
    llm.replies += ['{"tool_name": "none"}', "No idea."]
    body = client.post("/api/chat", json={"message": "quantum chromodynamics gluons",
                                          "collection": "kb", "stream": False}).json()
    assert body["path"] == "general" and body["sources"] == []
    assert llm.calls[-1].prompt.startswith("SYSTEM INSTRUCTION: You are ragline.")


def test_chat_stream_events_then_conversation_roundtrip(
        client: TestClient, llm: ScriptedChatModel) -> None:
    llm.replies += ['{"tool_name": "none"}', "The capital is Paris"]
    with client.stream("POST", "/api/chat", json={"message": "capital of France Paris",
                                                  "collection": "kb"}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        events = sse_events(r.read().decode())
    kinds = [k for k, _ in events]
    assert kinds == ["token"] * 4 + ["done"]
    assert "".join(d["text"] for _, d in events[:-1]) == "The capital is Paris"
    done = events[-1][1]
    assert done["path"] == "rag" and done["sources"][0]["id"] == "paris"
    assert {"first_token_ms", "total_ms", "llm_ms", "overhead_ms"} <= set(done["timings"])
    cid = done["conversation_id"]

    conv = client.get(f"/api/conversations/{cid}").json()
    assert conv["topic"] == "capital of France Paris"
    assert [(m["role"], m["content"]) for m in conv["messages"]] == [
        ("user", "capital of France Paris"), ("assistant", "The capital is Paris")]
    assert conv["messages"][1]["sources"][0]["id"] == "paris"

    llm.replies += ["France capital city facts", '{"tool_name": "none"}', "Still Paris"]
    follow = client.post("/api/chat", json={"message": "and its population?",
                                            "conversation_id": cid, "stream": False}).json()
    assert follow["strategy"] == "follow-up (contextualized topic)"
    assert follow["conversation_id"] == cid and follow["query"] == "France capital city facts"

    assert client.delete(f"/api/conversations/{cid}").status_code == 204
    missing = client.get(f"/api/conversations/{cid}")
    assert missing.status_code == 404 and missing.json()["error"] == "not_found"


def test_chat_tool_path_over_http(client: TestClient, llm: ScriptedChatModel) -> None:
    llm.replies += [
        '```json\n{"tool_name": "search_knowledge_base", "arguments": '
        '{"query": "sourdough starter", "collection": "kb"}}\n```', "Use a starter."]
    body = client.post("/api/chat", json={"message": "how do I bake?", "collection": "rb",
                                          "stream": False}).json()
    assert body["path"] == "tool" and body["tool"]["name"] == "search_knowledge_base"
    assert body["sources"][0]["id"] == "bread"
    assert body["sources"][0]["source_url"] == "https://example.com/bread"
    assert "Sourdough bread needs a starter" in llm.calls[-1].prompt


def test_no_llm_configured_is_503_naming_the_settings(settings: Settings) -> None:
    with local_client(create_app(settings)) as c:
        for path, payload in (("/api/chat", {"message": "hi"}),
                              ("/api/checklists", {"title": "High CPU"})):
            r = c.post(path, json=payload)
            assert r.status_code == 503
            assert r.json()["error"] == "llm_not_configured"
            assert "RAGLINE_LLM_BASE_URL" in r.json()["message"]
            assert "RAGLINE_LLM_MODEL" in r.json()["message"]
        assert c.get("/health").status_code == 200  # everything else keeps working


def test_checklist_endpoint_boosts_validates_and_lists_runbooks(
        client: TestClient, llm: ScriptedChatModel) -> None:
    llm.replies.append('Here you go:\n{"title": "CPU triage", "steps": ['
                       '{"order": 2, "priority": "Medium", "action": "Check steal time", '
                       '"rationale": "shared host", "source": "runbooks/cpu.md"}, '
                       '{"order": 1, "priority": "high", "action": "Run top", '
                       '"rationale": "find the process", "source": "runbooks/cpu.md"}]}')
    r = client.post("/api/checklists", json={
        "title": "High CPU usage", "resource_type": "instance",
        "resource_shape": "VM.Standard.E4.Flex", "labels": {"component": "cpu"},
        "metrics": {"cpu_percent": 97}, "logs": ["kernel: soft lockup"],
        "collection": "rb", "top_k": 2})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["title"] == "CPU triage" and out["fallback"] is False
    assert [(s["order"], s["priority"]) for s in out["steps"]] == [(1, "high"), (2, "medium")]
    assert out["source_runbooks"] == ["runbooks/cpu.md"]  # both cpu chunks, one path
    prompt = llm.calls[-1].prompt
    assert llm.calls[-1].json_mode
    for part in ("High CPU usage", "VM.Standard.E4.Flex", "cpu_percent: 97",
                 "kernel: soft lockup", "check top processes"):
        assert part in prompt


def test_checklist_fallback_on_malformed_output(
        client: TestClient, llm: ScriptedChatModel, caplog: pytest.LogCaptureFixture) -> None:
    llm.replies.append('{"title": "x", "steps": [{"order": 0}]}')
    with caplog.at_level(logging.WARNING):
        out = client.post("/api/checklists", json={"title": "Disk full", "collection": "rb",
                                                   "labels": ["disk"]}).json()
    assert out["fallback"] is True and len(out["steps"]) == 1
    assert out["steps"][0]["priority"] == "high" and "could not" in out["steps"][0]["action"]
    assert "runbooks/disk.md" in out["source_runbooks"]
    assert "checklist: invalid JSON" in caplog.text


def test_turn_embeds_the_query_once_per_connection_and_model(
        client: TestClient, llm: ScriptedChatModel, caplog: pytest.LogCaptureFixture) -> None:
    message = "capital of France Paris"
    llm.replies += [json.dumps({"tool_name": "search_knowledge_base",
                                "arguments": {"query": message, "collection": "rb"}}), "ok"]
    with caplog.at_level(logging.INFO):
        body = client.post("/api/chat", json={"message": message, "collection": "kb",
                                              "stream": False}).json()
    assert body["path"] == "tool"
    assert "query embedding cache hit (fake:" in caplog.text  # kb and rb share the embedder


def test_with_auth_on_a_user_key_chats_over_its_own_tenant_only(tmp_path: Path) -> None:
    """Real keys (auth on): alice's chat context holds alice's documents, never bob's; a
    collection reserved to bob's tenant is a 404 to her, named directly or by a tool."""
    llm = ScriptedChatModel()
    rl = Ragline(fake_settings(tmp_path, auth="on", default_collection="kb"), llm=llm).start()
    me = rl.owner()
    keys = {who: rl.keys.create(me, "user", who)[1] for who in ("alice", "bob")}
    with TestClient(create_app(ragline=rl), base_url="http://localhost") as c:
        def post(who: str, url: str, body: Any) -> Any:
            return c.post(url, json=body, headers={"Authorization": f"Bearer {keys[who]}"})

        rl.collections.create(me, "kb", embed={"provider": "fake"})
        rl.collections.create(me, "bobs", metadata={"tenants": ["bob"]},
                             embed={"provider": "fake"})
        for who, text in (("alice", "Paris is the capital of France, says alice"),
                          ("bob", "Paris is the capital of France, says bob")):
            r = post(who, "/collections/kb/documents",
                     {"documents": [{"id": f"{who}-doc", "text": text}]})
            assert r.status_code == 200, r.text
        assert post("bob", "/collections/bobs/documents",
                    {"documents": [{"id": "bob-private", "text": "bob private notes"}]}
                    ).status_code == 200
        assert c.post("/api/chat", json={"message": "hi"}).status_code == 401

        llm.replies += ['{"tool_name": "none"}', "Paris."]
        r = post("alice", "/api/chat", {"message": "Paris is the capital of France",
                                        "collection": "kb", "stream": False})
        assert r.status_code == 200, r.text
        assert [s["id"] for s in r.json()["sources"]] == ["alice-doc"]
        assert "says alice" in llm.calls[-1].prompt and "says bob" not in llm.calls[-1].prompt
        cid = r.json()["conversation_id"]
        assert c.get(f"/api/conversations/{cid}",
                     headers={"Authorization": f"Bearer {keys['bob']}"}).status_code == 404

        denied = post("alice", "/api/chat", {"message": "notes", "collection": "bobs",
                                             "stream": False})
        assert denied.status_code == 404 and denied.json()["error"] == "collection_not_found"

        llm.replies += [json.dumps({"tool_name": "search_knowledge_base",
                                    "arguments": {"query": "private notes",
                                                  "collection": "bobs"}}), "Nothing."]
        r = post("alice", "/api/chat", {"message": "bob's notes?", "collection": "kb",
                                        "stream": False})
        assert r.status_code == 200, r.text
        assert r.json()["path"] == "tool" and r.json()["sources"] == []
        assert "bob private notes" not in llm.calls[-1].prompt
    rl.close()


def test_context_string_names_a_file_only_for_a_file(
        client: TestClient, llm: ScriptedChatModel) -> None:
    """Spec 001's context line (issue 37 item 3): ``File:`` only when the document has an
    original filename, so pasted text shows no ``File: text-…``; an upload shows its name."""
    text = "Gouda cheese ripens in wheels for months"
    r = client.post("/api/rag/ingest/text?collection=kb", json={"text": text, "title": "Gouda"})
    assert r.status_code == 201, r.text
    r = client.post("/api/rag/ingest/upload?collection=kb",
                    files={"documentFile": ("cheddar.md", b"# Cheddar\n\nCheddar cheese ripens in "
                                    b"caves for months\n", "text/markdown")})
    assert r.status_code == 201, r.text
    llm.replies += ['{"tool_name": "none"}', "Months."]
    body = client.post("/api/chat", json={"message": text, "collection": "kb",
                                          "stream": False}).json()
    assert body["path"] == "rag", body
    prompt = llm.calls[-1].prompt
    gouda = next(line for line in prompt.splitlines() if "Title: Gouda" in line)
    assert gouda.startswith("Document (Source: text, Title: Gouda, Score: "), gouda
    assert "File:" not in gouda and "text-" not in prompt
    llm.replies += ['{"tool_name": "none"}', "Caves."]
    client.post("/api/chat", json={"message": "Cheddar cheese ripens in caves for months",
                                   "collection": "kb", "stream": False})
    cheddar = next(line for line in llm.calls[-1].prompt.splitlines() if "Cheddar," in line)
    assert ", File: cheddar.md, Score: " in cheddar
