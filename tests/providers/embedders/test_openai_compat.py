"""The OpenAI-compatible embedder against a real HTTP server speaking the protocol.

The server is ``http.server`` in a thread on a free port: real sockets, real
headers, real status codes, so retries, Retry-After and batching are exercised
exactly as against OpenAI, Ollama or vLLM.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from ragline.errors import InvalidInput, ProviderError
from ragline.providers.embedders.openai_compat import OpenAIEmbedder, retry_after_seconds
from ragline.testing.server import QuietHandler, serve_handler

KEY = "sk-test-0123456789abcdef"
DIM = 6


def fake_vector(text: str) -> list[float]:
    """Unnormalised, deterministic: the client must normalise."""
    h = hashlib.sha256(text.encode()).digest()
    return [float(b) + 1.0 for b in h[:DIM]]


@dataclass
class Server:
    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    script: list[tuple[int, dict[str, str], str]] = field(default_factory=list)
    shuffle: bool = True

    def plan(self, status: int, headers: dict[str, str] | None = None, body: str = "") -> None:
        """Queue a canned answer for the next request (then back to normal answers)."""
        self.script.append((status, headers or {}, body))


@pytest.fixture
def server() -> Iterator[Server]:
    state = Server(url="")

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.requests.append(
                {"path": self.path, "auth": self.headers.get("Authorization"), "body": body}
            )
            if state.script:
                status, headers, text = state.script.pop(0)
                self.send(status, text.encode(), headers)
                return
            data = [
                {"object": "embedding", "index": i, "embedding": fake_vector(t)}
                for i, t in enumerate(body["input"])
            ]
            if state.shuffle:
                data.reverse()  # the protocol allows any order; the client sorts by index
            payload = {"object": "list", "data": data, "model": body["model"],
                       "usage": {"prompt_tokens": 1, "total_tokens": 1}}
            self.send(200, json.dumps(payload).encode(), {"Content-Type": "application/json"})

    with serve_handler(Handler) as url:
        state.url = f"{url}/v1"
        yield state


def make(server: Server, **kw: Any) -> OpenAIEmbedder:
    emb = OpenAIEmbedder(base_url=server.url, model="text-embedding-3-small", api_key=KEY, **kw)
    emb.sleeps = []  # type: ignore[attr-defined]
    emb.sleep = emb.sleeps.append  # type: ignore[attr-defined]  # record waits, don't wait
    return emb


def expected(texts: list[str]) -> np.ndarray:
    v = np.array([fake_vector(t) for t in texts], dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_embeds_in_index_order_normalised_with_auth(server: Server) -> None:
    emb = make(server)
    texts = ["alpha", "beta", "gamma"]
    out = emb.embed(texts)
    np.testing.assert_allclose(out, expected(texts), atol=1e-6)
    req = server.requests[0]
    assert req["path"] == "/v1/embeddings"
    assert req["auth"] == f"Bearer {KEY}"
    assert req["body"] == {"model": "text-embedding-3-small", "input": texts}
    assert emb.dimension == DIM  # learnt from the call, no extra request
    assert len(server.requests) == 1


def test_batches_inputs_larger_than_batch_size(server: Server) -> None:
    emb = make(server, batch_size=4)
    texts = [f"text {i}" for i in range(10)]
    out = emb.embed(texts)
    assert [len(r["body"]["input"]) for r in server.requests] == [4, 4, 2]
    np.testing.assert_allclose(out, expected(texts), atol=1e-6)


def test_429_with_retry_after_then_success(server: Server) -> None:
    emb = make(server)
    server.plan(429, {"Retry-After": "2"}, '{"error": {"message": "rate limited"}}')
    out = emb.embed(["hello"])
    np.testing.assert_allclose(out, expected(["hello"]), atol=1e-6)
    assert len(server.requests) == 2
    assert emb.sleeps == [2.0]  # type: ignore[attr-defined]


def test_500s_exhaust_retries_with_exponential_backoff(
    server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    emb = make(server, max_retries=3, backoff_base=0.5)
    for _ in range(4):
        server.plan(500, {}, "internal error")
    with caplog.at_level(logging.WARNING), pytest.raises(ProviderError) as err:
        emb.embed(["hello"])
    assert len(server.requests) == 4
    assert emb.sleeps == [0.5, 1.0, 2.0]  # type: ignore[attr-defined]
    assert "after 4 attempt(s)" in err.value.message and "HTTP 500" in err.value.message
    assert err.value.status == 502
    assert KEY not in caplog.text


def test_client_errors_are_not_retried_and_key_never_leaks(server: Server) -> None:
    emb = make(server)
    server.plan(401, {}, json.dumps({"error": f"Incorrect API key provided: {KEY}"}))
    with pytest.raises(ProviderError) as err:
        emb.embed(["hello"])
    assert len(server.requests) == 1
    assert KEY not in str(err.value) and "HTTP 401" in str(err.value)
    assert KEY not in repr(emb) and KEY not in repr(emb.config)


def test_connection_errors_are_retried_then_reported() -> None:
    emb = OpenAIEmbedder(base_url="http://127.0.0.1:9/v1", api_key=KEY, max_retries=2, timeout=2)
    waits: list[float] = []
    emb.sleep = waits.append  # type: ignore[assignment]
    with pytest.raises(ProviderError, match="after 3 attempt"):
        emb.embed(["x"])
    assert waits == [0.5, 1.0]
    assert emb.health().status == "down"


def test_dimension_discovered_by_probe_and_checked(server: Server) -> None:
    emb = make(server)
    assert emb.dimension == DIM
    assert server.requests[0]["body"]["input"] == ["dimension probe"]
    wrong = make(server, dimension=DIM + 1)
    with pytest.raises(ProviderError, match="dimension"):
        wrong.embed(["x"])


def test_malformed_or_short_answers_are_provider_errors(server: Server) -> None:
    emb = make(server)
    server.plan(200, {"Content-Type": "application/json"}, json.dumps({"data": [{"index": 0}]}))
    with pytest.raises(ProviderError, match="Malformed"):
        emb.embed(["x"])
    server.plan(200, {"Content-Type": "application/json"}, json.dumps({"data": []}))
    with pytest.raises(ProviderError, match="0 vectors for 1 inputs"):
        emb.embed(["x"])


def test_api_key_from_environment(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAGLINE_OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-openai-env")
    OpenAIEmbedder(base_url=server.url).embed(["x"])
    monkeypatch.setenv("RAGLINE_OPENAI_API_KEY", "sk-from-ragline-env")
    OpenAIEmbedder(base_url=server.url).embed(["x"])
    assert [r["auth"] for r in server.requests] == [
        "Bearer sk-from-openai-env", "Bearer sk-from-ragline-env"
    ]


def test_prefixes_connection_id_and_surface(server: Server) -> None:
    emb = make(server, query_prefix="search_query: ", document_prefix="search_document: ")
    emb.embed(["q"], "query")
    emb.embed(["d"])
    assert [r["body"]["input"] for r in server.requests] == [
        ["search_query: q"], ["search_document: d"]
    ]
    other_key = OpenAIEmbedder(base_url=server.url, api_key="sk-other")
    assert emb.connection_id != other_key.connection_id
    assert emb.connection_id.startswith("openai:") and KEY not in emb.connection_id
    assert emb.embed([]).shape == (0, DIM)
    assert emb.count_tokens("abcdefgh") == 2
    assert emb.health().status == "ok"
    assert "api_key" in OpenAIEmbedder.connection_schema()["properties"]
    with pytest.raises(InvalidInput):
        emb.embed([1])  # type: ignore[list-item]


def test_retry_after_parsing() -> None:
    assert retry_after_seconds("3") == 3.0
    assert retry_after_seconds(None) is None
    assert retry_after_seconds("garbage") is None
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past


def test_retry_after_is_capped_by_backoff_max(server: Server) -> None:
    emb = make(server, backoff_max=5)
    server.plan(503, {"Retry-After": "3600"}, "overloaded")
    emb.embed(["x"])
    assert emb.sleeps == [5]  # type: ignore[attr-defined]
