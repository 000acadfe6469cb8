"""A tiny OpenAI-compatible HTTP server for tests: embeddings, chat (plain and streamed), models.

The OpenAI-compatible providers are HTTP clients, so the honest way to test them
without a real model server is a real server on a local port that speaks the
same protocol. Answers are deterministic: an embedding is derived from the
SHA-256 of its text (unnormalised: the client must normalise), a chat answer
echoes the last user message (as a JSON object in JSON mode), and a stream sends
it word by word. Every request is recorded with its Authorization header.
Nothing here can be selected by configuration: it is a server, not a provider.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ragline.testing.server import QuietHandler, serve_handler

DIM = 16
MODEL = "fake-model"


def fake_vector(text: str, dim: int = DIM) -> list[float]:
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
    return [float(digest[i % len(digest)]) - 127.5 for i in range(dim)]


def reply_to(messages: list[dict[str, Any]], json_mode: bool) -> str:
    last = next((m.get("content", "") for m in reversed(messages) if m.get("role") == "user"),
                "")
    text = f"echo: {last}"
    return json.dumps({"answer": text}) if json_mode else text


@dataclass
class FakeOpenAI:
    url: str = ""  # ends in /v1
    requests: list[dict[str, Any]] = field(default_factory=list)
    dim: int = DIM
    models: list[str] = field(default_factory=lambda: [MODEL])


@contextmanager
def fake_openai_server(dim: int = DIM) -> Iterator[FakeOpenAI]:
    state = FakeOpenAI(dim=dim)

    class Handler(QuietHandler):
        protocol_version = "HTTP/1.1"

        def _record(self, body: Any) -> None:
            state.requests.append({"method": self.command, "path": self.path, "body": body,
                                   "auth": self.headers.get("Authorization")})

        def do_GET(self) -> None:
            self._record(None)
            if self.path.rstrip("/").endswith("/models"):
                data = [{"id": m, "object": "model", "owned_by": "test"} for m in state.models]
                self._json(200, {"object": "list", "data": data})
            else:
                self._json(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0)) or 0)
                              or b"{}")
            self._record(body)
            if self.path.endswith("/embeddings"):
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                data = [{"object": "embedding", "index": i,
                         "embedding": fake_vector(t, state.dim)} for i, t in enumerate(texts)]
                self._json(200, {"object": "list", "data": data, "model": body.get("model"),
                                 "usage": {"prompt_tokens": 1, "total_tokens": 1}})
            elif self.path.endswith("/chat/completions"):
                json_mode = (body.get("response_format") or {}).get("type") == "json_object"
                text = reply_to(body.get("messages", []), json_mode)
                if body.get("stream"):
                    self._stream(body.get("model", MODEL), text)
                else:
                    self._json(200, {
                        "id": "chatcmpl-1", "object": "chat.completion", "created": 0,
                        "model": body.get("model", MODEL),
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": text}}],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1,
                                  "total_tokens": 2}})
            else:
                self._json(404, {"error": {"message": "not found"}})

        def _json(self, status: int, payload: Any) -> None:
            self.send(status, json.dumps(payload).encode(), {"Content-Type": "application/json"})

        def _stream(self, model: str, text: str) -> None:
            words = text.split(" ")
            chunks = [w if i == 0 else " " + w for i, w in enumerate(words)]
            events = [{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0,
                       "model": model, "choices": [{"index": 0, "delta": {"content": c},
                                                    "finish_reason": None}]}
                      for c in chunks]
            raw = b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events)
            raw += b"data: [DONE]\n\n"
            self.send(200, raw, {"Content-Type": "text/event-stream"})

    with serve_handler(Handler) as url:
        state.url = f"{url}/v1"
        yield state
