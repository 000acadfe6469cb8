"""The OpenAI-compatible chat provider against a real HTTP server speaking the protocol:
request bodies, JSON mode, streaming, retries of transient failures only (Retry-After
honoured), no retry of 401, key never in an error."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from ragline.errors import ProviderError
from ragline.providers.llms.base import ChatModel
from ragline.providers.llms.openai_compat import OpenAIChatModel
from ragline.providers.registry import registry
from ragline.testing.server import QuietHandler, serve_handler

KEY = "sk-chat-secret-0123456789"


@dataclass
class Server:
    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    script: list[tuple[int, dict[str, str], str]] = field(default_factory=list)
    answer: str = "Hello there friend"


@pytest.fixture
def server() -> Iterator[Server]:
    state = Server()

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.requests.append({"path": self.path, "body": body,
                                   "auth": self.headers.get("Authorization")})
            if state.script:
                status, headers, text = state.script.pop(0)
                self.send(status, text.encode(), headers)
                return
            if body.get("stream"):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for i, word in enumerate(state.answer.split(" ")):
                    delta = {"content": word if i == 0 else " " + word}
                    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0,
                             "model": body["model"],
                             "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
                return
            payload = {"id": "c", "object": "chat.completion", "created": 0,
                       "model": body["model"],
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": state.answer}}]}
            self.send(200, json.dumps(payload).encode(), {"Content-Type": "application/json"})

    with serve_handler(Handler) as url:
        state.url = f"{url}/v1"
        yield state


def make(server: Server, **kw: Any) -> tuple[OpenAIChatModel, list[float]]:
    llm = OpenAIChatModel(base_url=server.url, model="tiny", api_key=KEY, **kw)
    waits: list[float] = []

    async def record(w: float) -> None:
        waits.append(w)

    llm.retrier.asleep = record
    return llm, waits


async def test_complete_sends_openai_request_with_json_mode(server: Server) -> None:
    llm, _ = make(server, temperature=0.0, max_tokens=77)
    assert isinstance(llm, ChatModel)
    out = await llm.complete([{"role": "user", "content": "hi"}], json_mode=True)
    assert out == "Hello there friend"
    req = server.requests[0]
    assert req["path"] == "/v1/chat/completions" and req["auth"] == f"Bearer {KEY}"
    assert req["body"]["model"] == "tiny" and req["body"]["max_tokens"] == 77
    assert req["body"]["messages"] == [{"role": "user", "content": "hi"}]
    assert req["body"]["response_format"] == {"type": "json_object"}
    await llm.complete([{"role": "user", "content": "hi"}])
    assert "response_format" not in server.requests[1]["body"]
    off, _ = make(server, json_mode=False)
    await off.complete([{"role": "user", "content": "x"}], json_mode=True)
    assert "response_format" not in server.requests[2]["body"]


async def test_stream_yields_deltas_in_order(server: Server) -> None:
    llm, _ = make(server)
    parts = [p async for p in llm.stream([{"role": "user", "content": "hi"}])]
    assert parts == ["Hello", " there", " friend"]
    assert server.requests[0]["body"]["stream"] is True
    assert server.requests[0]["body"]["temperature"] == 0.0 and "stop" not in server.requests[0][
        "body"]
    # a client's own settings (/v1/chat/completions) override the configured ones
    assert [p async for p in llm.stream([{"role": "user", "content": "hi"}], max_tokens=9,
                                        temperature=0.7, stop=["\n\n"])] == parts
    body = server.requests[1]["body"]
    assert (body["temperature"], body["max_tokens"], body["stop"]) == (0.7, 9, ["\n\n"])


async def test_transient_failures_are_retried_honouring_retry_after(server: Server) -> None:
    llm, waits = make(server, backoff_base=0.25)
    server.script += [(429, {"Retry-After": "3"}, '{"error": {"message": "slow down"}}'),
                      (503, {}, "overloaded")]
    assert await llm.complete([{"role": "user", "content": "x"}]) == "Hello there friend"
    assert len(server.requests) == 3 and waits == [3.0, 0.5]


async def test_client_errors_are_not_retried_and_key_is_scrubbed(server: Server) -> None:
    llm, waits = make(server)
    server.script.append((401, {}, json.dumps({"error": f"bad key {KEY}"})))
    with pytest.raises(ProviderError) as err:
        await llm.complete([{"role": "user", "content": "x"}])
    assert len(server.requests) == 1 and waits == []
    assert "HTTP 401" in err.value.message and KEY not in err.value.message
    assert err.value.details["transient"] is False and KEY not in repr(llm)


async def test_exhausted_retries_and_connection_errors(server: Server) -> None:
    llm, waits = make(server, max_retries=2, backoff_base=0.5)
    server.script += [(500, {}, "e")] * 3
    with pytest.raises(ProviderError, match=r"after 3 attempt\(s\) \(HTTP 500"):
        await llm.complete([{"role": "user", "content": "x"}])
    assert waits == [0.5, 1.0]
    dead = OpenAIChatModel(base_url="http://127.0.0.1:9/v1", model="m", max_retries=1,
                           backoff_base=0)
    with pytest.raises(ProviderError, match="after 2 attempt"):
        await dead.complete([{"role": "user", "content": "x"}])


def test_registered_as_llm_provider_and_scripted_model_is_not() -> None:
    assert registry.get("llms", "openai") is OpenAIChatModel
    assert "scripted" not in registry.names("llms")
    assert {"fetch_url", "search_knowledge_base"} <= set(registry.names("tools"))
    tools = {t["name"]: t for t in registry.describe()["tools"]}
    assert tools["fetch_url"]["schema"]["required"] == ["url"]
    schema = OpenAIChatModel.connection_schema()
    assert {"base_url", "model", "api_key", "timeout"} <= set(schema["properties"])
