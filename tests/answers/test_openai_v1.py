"""The OpenAI-compatible API (issue 40) over a real app, store and catalog (fake embedder,
scripted model), the way a chat front end arrives: list the models with its key, chat
with one, streamed or not; what reaches the model (system message, history topic,
temperature/max_tokens/stop); sources in the ``ragline`` field and as citations; every
error in OpenAI's shape; tenants. The official SDK against a live server is in
test_openai_v1_live.py."""

from __future__ import annotations

import json
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
from ragline.testing.scripted_llm import NO_TOOL, TOOL_DECISION, ScriptedChatModel
from tests.ingestion_support import fake_settings

FRANCE = DocumentInput("Paris is the capital of France",
                       {"title": "France", "source_path": "geo/france.md"}, None, "paris")
QUESTION = "capital of France Paris"


@pytest.fixture
def llm() -> ScriptedChatModel:
    return ScriptedChatModel(default="The capital is Paris", rules={TOOL_DECISION: NO_TOOL})


def start(tmp_path: Path, llm: ScriptedChatModel | None, **overrides: Any) -> Ragline:
    registry.register("embedders", "fake", FakeEmbedder)
    rl = Ragline(fake_settings(tmp_path, auth="on", default_collection=None, **overrides),
                 llm=llm).start()
    owner = rl.owner()
    rl.collections.create(owner, "kb", embed={"provider": "fake"})
    rl.documents.add(Principal("acme"), "kb", [FRANCE])
    rl.documents.add(Principal("globex"), "kb", [DocumentInput(
        "Paris secret of globex", {"title": "Secret"}, None, "theirs")])
    rl.collections.create(owner, "acme-only", metadata={"tenants": ["acme"]},
                         embed={"provider": "fake"})
    rl.collections.create(owner, "globex-only", metadata={"tenants": ["globex"]},
                         embed={"provider": "fake"})
    return rl


def client_for(rl: Ragline, tenant: str = "acme") -> TestClient:
    key = rl.keys.create(rl.owner(), "user", tenant)[1]
    return TestClient(create_app(ragline=rl), base_url="http://localhost",
                      headers={"Authorization": f"Bearer {key}"})


@pytest.fixture
def rl(tmp_path: Path, llm: ScriptedChatModel) -> Iterator[Ragline]:
    r = start(tmp_path, llm)
    yield r
    r.close()


@pytest.fixture
def client(rl: Ragline) -> Iterator[TestClient]:
    with client_for(rl) as c:
        yield c


def ask(content: str = QUESTION, model: str = "ragline/kb", **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": content}], **extra}


def frames(text: str) -> list[Any]:
    out = []
    for block in text.strip().split("\n\n"):
        assert block.startswith("data: "), block
        data = block.removeprefix("data: ")
        out.append(data if data == "[DONE]" else json.loads(data))
    return out


def test_models_lists_the_tenants_collections_and_the_general_model(
        rl: Ragline, client: TestClient) -> None:
    r = client.get("/v1/models")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "list"
    ids = [m["id"] for m in body["data"]]
    assert ids == ["ragline/acme-only", "ragline/kb", "ragline"]
    assert all(m["object"] == "model" and m["owned_by"] == "ragline"
               and isinstance(m["created"], int) for m in body["data"])
    with client_for(rl, "globex") as theirs:
        assert [m["id"] for m in theirs.get("/v1/models").json()["data"]] == [
            "ragline/globex-only", "ragline/kb", "ragline"]


def test_completion_answers_from_the_tenants_records_with_sources(
        client: TestClient, llm: ScriptedChatModel) -> None:
    r = client.post("/v1/chat/completions", json=ask())
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-")
    assert body["model"] == "ragline/kb"
    (choice,) = body["choices"]
    assert choice["message"] == {"role": "assistant", "content": "The capital is Paris"}
    assert choice["finish_reason"] == "stop"
    ext = body["ragline"]
    assert ext["path"] == "rag" and ext["strategy"] == "first message (raw query)"
    assert [s["id"] for s in ext["sources"]] == ["paris"]
    assert ext["sources"][0]["source_path"] == "geo/france.md"
    assert "conversation_id" not in ext
    assert "Paris is the capital of France" in llm.calls[-1].prompt
    assert "globex" not in json.dumps(body) and "globex" not in llm.calls[-1].prompt


def test_stream_is_chunks_then_done_and_stores_nothing(
        rl: Ragline, client: TestClient) -> None:
    with client.stream("POST", "/v1/chat/completions", json=ask(stream=True)) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        out = frames(r.read().decode())
    assert out[-1] == "[DONE]"
    chunks = out[:-1]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == "The capital is Paris"
    last = chunks[-1]
    assert last["choices"][0]["finish_reason"] == "stop" and last["choices"][0]["delta"] == {}
    assert [s["id"] for s in last["ragline"]["sources"]] == ["paris"]
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])
    # stateless: no conversation was written
    db = rl.services.answers.conversations.catalog  # type: ignore[attr-defined]
    assert db.read().execute("SELECT count(*) FROM conversations").fetchone()[0] == 0


def test_system_message_history_and_options_reach_the_model(
        client: TestClient, llm: ScriptedChatModel) -> None:
    llm.rules["Current topic"] = "France capital population"  # the topic update call
    r = client.post("/v1/chat/completions", json={
        "model": "ragline/kb", "temperature": 0.3, "max_tokens": 40, "stop": "\n\n",
        "top_p": 0.9, "user": "someone", "tools": [], "stream_options": {"x": 1},
        "messages": [
            {"role": "system", "content": "Answer like a pirate."},
            {"role": "user", "content": "Tell me about France"},
            {"role": "assistant", "content": "France is a country."},
            {"role": "user", "content": [{"type": "text", "text": "and its capital?"}]}]})
    assert r.status_code == 200, r.text
    ext = r.json()["ragline"]
    assert ext["strategy"] == "follow-up (contextualized topic)"
    assert ext["query"] == "France capital population"
    topic_call = next(c for c in llm.calls if "Current topic" in c.prompt)
    assert "France" in topic_call.prompt and "and its capital?" in topic_call.prompt
    answer = llm.calls[-1]
    assert answer.stream and answer.messages[0] == {"role": "system",
                                                    "content": "Answer like a pirate."}
    assert answer.messages[1]["role"] == "user" and "and its capital?" in answer.prompt
    assert (answer.temperature, answer.max_tokens, answer.stop) == (0.3, 40, ["\n\n"])
    decision = next(c for c in llm.calls if c.json_mode)
    assert "pirate" not in decision.prompt and decision.stop is None


def test_general_model_does_not_search(client: TestClient, llm: ScriptedChatModel) -> None:
    body = client.post("/v1/chat/completions", json=ask(model="ragline")).json()
    assert body["ragline"]["path"] == "general" and body["ragline"]["sources"] == []
    assert "Paris is the capital" not in llm.calls[-1].prompt


def test_citations_setting_appends_numbered_sources(tmp_path: Path,
                                                    llm: ScriptedChatModel) -> None:
    rl = start(tmp_path, llm, openai_citations=True)
    try:
        with client_for(rl) as c:
            whole = c.post("/v1/chat/completions", json=ask()).json()
            with c.stream("POST", "/v1/chat/completions", json=ask(stream=True)) as r:
                chunks = frames(r.read().decode())[:-1]
    finally:
        rl.close()
    expected = "The capital is Paris\n\nSources:\n[1] France (geo/france.md)"
    assert whole["choices"][0]["message"]["content"] == expected
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == expected


MALFORMED: list[tuple[Any, str | None, str]] = [
    ({"messages": [{"role": "user", "content": "hi"}]}, "model", "'model' is required"),
    ({"model": "ragline/kb"}, "messages", "non-empty array"),
    ({"model": "ragline/kb", "messages": []}, "messages", "non-empty array"),
    ({"model": "ragline/kb", "messages": [{"role": "robot", "content": "hi"}]},
     "messages[0].role", "must be one of"),
    ({"model": "ragline/kb", "messages": [{"role": "system", "content": "be nice"}]},
     "messages", "no user message"),
    ({"model": "ragline/kb", "messages": [{"role": "user", "content": 5}]},
     "messages[0].content", "string or an array"),
    ({"model": "ragline/kb", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}]},
     "messages[0].content[0].type", "only 'text'"),
    ({**ask(), "temperature": 3}, "temperature", "from 0 to 2"),
    ({**ask(), "temperature": "hot"}, "temperature", "from 0 to 2"),
    ({**ask(), "max_tokens": 0}, "max_tokens", "positive integer"),
    ({**ask(), "max_completion_tokens": 1.5}, "max_completion_tokens", "positive integer"),
    ({**ask(), "stop": ["a", "b", "c", "d", "e"]}, "stop", "at most 4"),
    ({**ask(), "stop": 7}, "stop", "at most 4"),
    ({**ask(), "stream": "yes"}, "stream", "true or false"),
    ({**ask(), "n": 2}, "n", "must be 1"),
    ({**ask(), "messages": [{"role": "user", "content": "  "}]}, "messages[0].content",
     "is empty"),
    ([1, 2], None, "JSON object"),
]


def test_malformed_fields_are_400_in_openai_shape(
        client: TestClient, llm: ScriptedChatModel) -> None:
    for body, param, says in MALFORMED:
        r = client.post("/v1/chat/completions", json=body)
        assert r.status_code == 400, r.text
        assert set(r.json()) == {"error"}
        err = r.json()["error"]
        assert err["type"] == "invalid_request_error" and err["param"] == param, err
        assert says in err["message"], err
    assert not llm.calls  # refused before any model call


def test_invalid_json_and_long_question_are_400(client: TestClient) -> None:
    r = client.post("/v1/chat/completions", content=b"{nope",
                    headers={"content-type": "application/json"})
    assert r.status_code == 400 and "valid JSON" in r.json()["error"]["message"]
    r = client.post("/v1/chat/completions", json=ask("word " * 2000))
    assert r.status_code == 400 and "longer than 8000" in r.json()["error"]["message"]


def test_auth_and_unknown_models_are_openai_errors(rl: Ragline, client: TestClient) -> None:
    app = create_app(ragline=rl)
    with TestClient(app, base_url="http://localhost") as anon:
        for r in (anon.get("/v1/models"),
                  anon.post("/v1/chat/completions", json=ask(),
                            headers={"Authorization": "Bearer wrong"}),
                  anon.get("/v1/models", headers={"Authorization": "Basic abc"})):
            assert r.status_code == 401, r.text
            assert r.json()["error"]["code"] == "invalid_api_key"
            assert r.json()["error"]["type"] == "authentication_error"
    for model in ("ragline/globex-only", "ragline/nope", "gpt-4o", "ragline/"):
        r = client.post("/v1/chat/completions", json=ask(model=model))
        assert r.status_code == 404, (model, r.text)
        assert r.json()["error"]["code"] == "model_not_found"
        assert "globex" not in r.json()["error"]["message"] or model.endswith("globex-only")
    r = client.get("/v1/nothing")
    assert r.status_code == 404 and r.json()["error"]["type"] == "invalid_request_error"
    r = client.get("/v1/chat/completions")
    assert r.status_code == 405 and "POST" in r.json()["error"]["message"]


def test_the_request_guards_answers_are_openai_errors_too(tmp_path: Path,
                                                          llm: ScriptedChatModel) -> None:
    """Errors answered before any route (Host, body size, NaN) have OpenAI's shape under
    /v1, and ragline's elsewhere."""
    rl = start(tmp_path, llm, max_request_bytes=4096)
    try:
        with client_for(rl) as client:
            guarded(client)
    finally:
        rl.close()


def guarded(client: TestClient) -> None:
    bad_host = client.get("/v1/models", headers={"host": "evil.example"})
    assert bad_host.status_code == 421
    assert bad_host.json()["error"]["code"] == "host_not_allowed"
    assert bad_host.json()["error"]["type"] == "invalid_request_error"
    nan = client.post("/v1/chat/completions", content=b'{"model": "ragline/kb", '
                      b'"temperature": NaN, "messages": []}',
                      headers={"content-type": "application/json"})
    assert nan.status_code == 400 and "not a finite number" in nan.json()["error"]["message"]
    big = client.post("/v1/chat/completions", json=ask("word " * 2000))
    assert big.status_code == 413 and big.json()["error"]["code"] == "payload_too_large"
    assert int(big.headers["content-length"]) == len(big.content)
    elsewhere = client.get("/collections", headers={"host": "evil.example"})
    assert elsewhere.status_code == 421 and elsewhere.json()["error"] == "host_not_allowed"


def test_without_a_chat_model_no_general_model_and_503(tmp_path: Path) -> None:
    rl = start(tmp_path, None)
    try:
        with client_for(rl) as c:
            ids = [m["id"] for m in c.get("/v1/models").json()["data"]]
            assert ids == ["ragline/acme-only", "ragline/kb"]
            r = c.post("/v1/chat/completions", json=ask())
    finally:
        rl.close()
    assert r.status_code == 503
    err = r.json()["error"]
    assert err["code"] == "llm_not_configured" and err["type"] == "server_error"
    assert "RAGLINE_LLM_BASE_URL" in err["message"]


def test_model_failure_mid_stream_is_an_error_frame(
        client: TestClient, llm: ScriptedChatModel) -> None:
    from ragline.errors import ProviderError

    llm.default = ProviderError("Chat request to the model failed")
    with client.stream("POST", "/v1/chat/completions", json=ask(stream=True)) as r:
        assert r.status_code == 200
        out = frames(r.read().decode())
    assert out[0]["choices"][0]["delta"]["role"] == "assistant"
    assert out[-1] == {"error": {"message": "Chat request to the model failed",
                                 "type": "server_error", "param": None,
                                 "code": "provider_error"}}


def test_settings_default_no_citations() -> None:
    assert Settings(_env_file=None).openai_citations is False  # type: ignore[call-arg]


def test_history_topic_folds_earlier_user_messages_in_order() -> None:
    from ragline.services.answers.topics import history_topic

    assert history_topic([]) == "" and history_topic(["  "]) == ""
    assert history_topic(["Tell me about InstructLab"]) == "Tell me about InstructLab"
    assert history_topic(["Tell me about InstructLab", "Does it run on OpenShift AI?"]) == (
        "InstructLab run OpenShift AI")  # content words, in order
