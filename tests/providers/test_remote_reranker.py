"""The ragline-remote reranker against real uvicorn servers: success and graceful degradation.

Every failure mode of spec 000 ("Cross-Encoder Reranking Method") is produced
for real (no cross-encoder, timeout, nothing listening, 500) and must return
the caller's documents unchanged with a warning, never an exception.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse

from ragline.facade import Ragline
from ragline.providers.registry import registry
from ragline.providers.remote.config import RemoteRaglineConfig
from ragline.providers.remote.reranker import RemoteRaglineReranker
from ragline.providers.rerankers.cross_encoder import CrossEncoderReranker, ModelSource
from ragline.settings import Settings
from ragline.testing.cross_encoder import tiny_cross_encoder_dir
from ragline.testing.server import free_port, serve_in_thread
from tests.api.helpers import rerank_app

LOGGER = "ragline.providers.remote.reranker"


def remote(url: str, **config: Any) -> RemoteRaglineReranker:
    return RemoteRaglineReranker(RemoteRaglineConfig(base_url=url, **config))


DOCS: list[dict[str, Any]] = [
    {"id": "a", "text": "Rerankers read query and document together.", "metadata": {"p": 1}},
    {"text": "A document without an id.", "source": "upload"},
    {"id": "c", "text": "Bananas are yellow.", "score": 0.9},
    {"id": "d", "content": "Text under another key.", "tags": ["x"]},
]


class Recording:
    """Wraps a reranker and remembers what the server was asked."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[dict[str, Any]] = []

    def rerank(self, query: str, documents: Sequence[Mapping[str, Any]], top_k: Any = None) -> Any:
        self.calls.append({"query": query, "documents": list(documents), "top_k": top_k})
        return self.inner.rerank(query, documents, top_k)

    def health_info(self) -> dict[str, str]:
        return {"model": "tiny", "status": "loaded"}


class Exploding:
    def rerank(self, *_: Any) -> Any:
        raise ValueError("tensor shape mismatch")

    def health_info(self) -> dict[str, str]:
        return {"model": "broken", "status": "loaded"}


class Slow(Recording):
    def rerank(self, query: str, documents: Sequence[Mapping[str, Any]], top_k: Any = None) -> Any:
        time.sleep(3.0)
        return super().rerank(query, documents, top_k)


def make_server_app(cross_encoder: Any) -> tuple[FastAPI, list[tuple[str, str, str | None]]]:
    """The real /rerank router and error handlers, a /health like the real one, a request log."""
    app = rerank_app(cross_encoder)
    seen: list[tuple[str, str, str | None]] = []

    @app.middleware("http")
    async def record(request: Request, call_next: Any) -> Response:
        seen.append((request.method, request.url.path, request.headers.get("authorization")))
        response: Response = await call_next(request)
        return response

    @app.get("/health")
    def health() -> dict[str, Any]:
        body: dict[str, Any] = {"status": "healthy"}
        if cross_encoder is not None:
            body["cross_encoder"] = cross_encoder.health_info()
        return body

    return app, seen


@pytest.fixture(scope="module")
def model() -> CrossEncoderReranker:
    return CrossEncoderReranker.from_source(
        ModelSource(str(tiny_cross_encoder_dir()), "--cross-encoder-path")
    )


@pytest.fixture
def served(model: CrossEncoderReranker) -> Iterator[tuple[str, Recording, list[Any]]]:
    rec = Recording(model)
    app, seen = make_server_app(rec)
    with serve_in_thread(app) as url:
        yield url, rec, seen


def _docs() -> list[dict[str, Any]]:
    return copy.deepcopy(DOCS)


def _assert_degraded(
    result: list[dict[str, Any]], docs: list[dict[str, Any]], caplog: pytest.LogCaptureFixture
) -> str:
    assert result == DOCS  # unchanged content, unchanged order
    assert all(r is d for r, d in zip(result, docs, strict=True))  # the caller's own objects
    warnings = [r for r in caplog.records if r.name == LOGGER and r.levelno >= 30]
    assert len(warnings) == 1
    return warnings[0].getMessage()


# --- success -------------------------------------------------------------------------


def test_rerank_maps_scores_onto_original_documents(
    served: tuple[str, Recording, list[Any]], model: CrossEncoderReranker
) -> None:
    url, rec, _ = served
    with remote(url) as client:
        out = client.rerank("what do rerankers do", _docs())
    sent = rec.calls[0]["documents"]
    assert [d["id"] for d in sent] == ["a", "doc-1", "c", "d"]  # fallback id from the index
    assert sent[3]["text"] == "Text under another key."
    assert all(set(d) == {"id", "text"} for d in sent)  # only id and text go over the wire
    expected = model.rerank("what do rerankers do", sent)
    assert [o["original_rank"] for o in out] == [e["original_rank"] for e in expected]
    added = ("score", "rerank_score", "original_rank")
    for o in out:
        original = DOCS[o["original_rank"] - 1]
        assert {k: v for k, v in o.items() if k not in added} == {
            k: v for k, v in original.items() if k != "score"
        }
        assert o["score"] == o["rerank_score"]
    assert [o["score"] for o in out] == sorted((o["score"] for o in out), reverse=True)


def test_top_k_is_passed_to_the_server(served: tuple[str, Recording, list[Any]]) -> None:
    url, rec, _ = served
    with remote(url) as client:
        full = client.rerank("q", _docs())
        top = client.rerank("q", _docs(), top_k=2)
    assert rec.calls[1]["top_k"] == 2
    assert top == full[:2]


def test_auth_header_and_health_cache(served: tuple[str, Recording, list[Any]]) -> None:
    url, _, seen = served
    with remote(url, api_key="s3cret", health_ttl=30) as client:
        client.rerank("q", _docs())
        client.rerank("q", _docs())
    assert seen == [
        ("GET", "/health", "Bearer s3cret"),
        ("POST", "/rerank", "Bearer s3cret"),
        ("POST", "/rerank", "Bearer s3cret"),
    ]
    seen.clear()
    with remote(url, health_ttl=0) as client:
        client.rerank("q", _docs())
        client.rerank("q", _docs())
    assert [s[1] for s in seen] == ["/health", "/rerank", "/health", "/rerank"]
    assert all(s[2] is None for s in seen)


def test_empty_documents_make_no_request(served: tuple[str, Recording, list[Any]]) -> None:
    url, _, seen = served
    with remote(url) as client:
        assert client.rerank("q", []) == []
    assert seen == []


def test_transient_503_is_retried(model: CrossEncoderReranker) -> None:
    app, seen = make_server_app(Recording(model))
    failures = iter([True])
    attempts: list[str] = []

    @app.middleware("http")  # outermost, so `seen` only records what gets through
    async def flaky(request: Request, call_next: Any) -> Response:
        attempts.append(request.url.path)
        if request.url.path == "/rerank" and next(failures, False):
            return JSONResponse({"detail": "busy"}, status_code=503)
        response: Response = await call_next(request)
        return response

    with serve_in_thread(app) as url, remote(url, backoff=0.01) as client:
        out = client.rerank("q", _docs())
    assert "rerank_score" in out[0]
    assert attempts == ["/health", "/rerank", "/rerank"]
    assert [s[1] for s in seen] == ["/health", "/rerank"]


# --- graceful degradation ----------------------------------------------------------


def test_no_cross_encoder_in_health(caplog: pytest.LogCaptureFixture) -> None:
    app, seen = make_server_app(None)
    docs = _docs()
    with serve_in_thread(app) as url, remote(url) as client:
        result = client.rerank("q", docs)
    assert "has no cross-encoder loaded" in _assert_degraded(result, docs, caplog)
    assert [s[1] for s in seen] == ["/health"]  # /rerank is not even tried


def test_timeout_returns_originals_quickly(
    model: CrossEncoderReranker, caplog: pytest.LogCaptureFixture
) -> None:
    app, seen = make_server_app(Slow(model))
    docs = _docs()
    with serve_in_thread(app) as url, remote(url, timeout=0.3) as client:
        started = time.perf_counter()
        result = client.rerank("q", docs)
        elapsed = time.perf_counter() - started
    message = _assert_degraded(result, docs, caplog)
    assert "ReadTimeout" in message
    assert elapsed < 2.0  # gave up after the timeout, without waiting for the answer
    assert [s[1] for s in seen] == ["/health", "/rerank"]


def test_nothing_listening(caplog: pytest.LogCaptureFixture) -> None:
    docs = _docs()
    with remote(f"http://127.0.0.1:{free_port()}", backoff=0.01) as client:
        result = client.rerank("q", docs)
    message = _assert_degraded(result, docs, caplog)
    assert "unreachable" in message and "ConnectError" in message


def test_server_error_returns_originals_with_details(caplog: pytest.LogCaptureFixture) -> None:
    app, seen = make_server_app(Exploding())
    docs = _docs()
    with serve_in_thread(app) as url, remote(url, retries=3, backoff=0.01) as client:
        result = client.rerank("q", docs)
    message = _assert_degraded(result, docs, caplog)
    assert "HTTP 500" in message
    assert "Reranking failed: ValueError: tensor shape mismatch" in message
    assert [s[1] for s in seen] == ["/health", "/rerank"]  # a 500 is not transient


def test_malformed_answer_returns_originals(caplog: pytest.LogCaptureFixture) -> None:
    app = FastAPI()

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"cross_encoder": {"model": "m", "status": "loaded"}}

    @app.post("/rerank")
    def rerank() -> dict[str, Any]:
        return {"reranked": [{"id": "a", "score": 1.0, "original_rank": 99}]}

    docs = _docs()
    with serve_in_thread(app) as url, remote(url) as client:
        result = client.rerank("q", docs)
    assert "original_rank 99" in _assert_degraded(result, docs, caplog)


def test_failed_health_check_is_remembered_briefly(caplog: pytest.LogCaptureFixture) -> None:
    app = FastAPI()
    calls: list[int] = []

    @app.get("/health")
    def health() -> JSONResponse:
        calls.append(1)
        return JSONResponse({"detail": "catalog down"}, status_code=500)

    with serve_in_thread(app) as url:
        with remote(url, retries=2, backoff=0.01, failure_ttl=30) as client:
            assert client.rerank("q", _docs()) == DOCS
            assert client.rerank("q", _docs()) == DOCS
        assert len(calls) == 1  # a 500 is not retried; the second call reuses the failure
        messages = [r.getMessage() for r in caplog.records if r.name == LOGGER]
        assert "HTTP 500" in messages[0] and "catalog down" in messages[0]
        assert "health check failed" in messages[1] and "ago" in messages[1]
        with remote(url, retries=1, failure_ttl=0) as client:
            client.rerank("q", _docs())
            client.rerank("q", _docs())
        assert len(calls) == 3


def test_built_from_config_as_the_registry_does(
    served: tuple[str, Recording, list[Any]],
) -> None:
    url, _, seen = served
    cls = registry.get("rerankers", "ragline-remote")
    assert cls is RemoteRaglineReranker
    with cls(cls.Config(base_url=url + "/", api_key="k", timeout=5)) as client:
        assert client.base_url == url and client.config.timeout == 5
        assert "rerank_score" in client.rerank("q", _docs())[0]
    assert seen[0] == ("GET", "/health", "Bearer k")


def test_provider_health(served: tuple[str, Recording, list[Any]]) -> None:
    url, _, _ = served
    with remote(url) as client:
        ok = client.health()
    assert ok.status == "ok" and ok.details["cross_encoder"]["status"] == "loaded"
    with remote(f"http://127.0.0.1:{free_port()}", retries=1) as client:
        down = client.health()
    assert down.status == "down" and down.error and "ConnectError" in down.error


def test_degradation_logs_at_warning_not_error(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, LOGGER)
    with remote(f"http://127.0.0.1:{free_port()}", retries=1) as client:
        client.rerank("q", _docs())
    assert {r.levelname for r in caplog.records if r.name == LOGGER} == {"WARNING"}


# --- a second real ragline server, through the registry --------------------------------


@pytest.fixture(scope="module")
def second_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    from tests.live_server import LiveServer

    root = tmp_path_factory.mktemp("rerank-remote")
    server = LiveServer(root / "data", "--cross-encoder-path", str(tiny_cross_encoder_dir()),
                        env={"RAGLINE_AUTH": "on"})
    try:
        server.wait_ready()
        yield server.url, (root / "data" / "admin-key.txt").read_text().strip()
    finally:
        server.stop()


def _local(tmp_path: Path, url: str, key: str) -> Ragline:
    return Ragline(Settings(_env_file=None, data_dir=tmp_path / "local",  # type: ignore[call-arg]
                            reranker="ragline-remote",
                            reranker_options={"base_url": url, "api_key": key, "retries": 1}))


def test_a_local_ragline_reranks_through_a_second_ragline_serve(
        second_server: tuple[str, str], tmp_path: Path) -> None:
    url, key = second_server
    with _local(tmp_path, url, key) as rl:
        me = rl.owner()
        docs = _docs()
        ranked = rl.search.rerank(me, "robots", docs, top_k=2)
        assert len(ranked) == 2  # top_k went to the remote
        for item in ranked:
            original = docs[item["original_rank"] - 1]
            assert {k: v for k, v in item.items() if k not in ("score", "rerank_score",
                                                              "original_rank")} == \
                {k: v for k, v in original.items() if k != "score"}
            assert item["rerank_score"] == item["score"]
        assert rl.admin.health()["cross_encoder"]["status"] == "remote"


def test_a_second_ragline_serve_without_cross_encoder_or_dead(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from tests.live_server import LiveServer

    plain = LiveServer(tmp_path / "plain")
    try:
        plain.wait_ready()
        with _local(tmp_path / "a", plain.url, "unused") as rl:
            docs = _docs()
            assert rl.search.rerank(rl.owner(), "q", docs) == DOCS  # no cross-encoder there
    finally:
        plain.stop()
    with _local(tmp_path / "b", plain.url, "unused") as rl:  # now nothing listens there
        docs = _docs()
        assert rl.search.rerank(rl.owner(), "q", docs) == DOCS
    messages = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert "has no cross-encoder loaded" in messages[0] and "unreachable" in messages[-1]


def test_a_search_asking_for_rerank_survives_a_dead_remote(tmp_path: Path) -> None:
    from ragline.facade import DocumentInput, SearchRequest

    with _local(tmp_path, f"http://127.0.0.1:{free_port()}", "k") as rl:
        me = rl.owner()
        rl.collections.create(me, "c")
        rl.documents.add(me, "c", [DocumentInput("a", {}, [1.0, 0.0], "a"),
                                   DocumentInput("b", {}, [0.0, 1.0], "b")])
        res = rl.search.query_sync(me, SearchRequest(collection="c", embedding=[1.0, 0.1],
                                               query="a", rerank=True, limit=2))
    assert [h.id for h in res.hits] == ["a", "b"]  # first-stage order kept
    assert "rerank" not in res.stages and any("rerank skipped" in w for w in res.warnings)
