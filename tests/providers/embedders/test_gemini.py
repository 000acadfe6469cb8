"""Gemini task types (issue 37 item 4): spec 001 embeds documents with
``RETRIEVAL_DOCUMENT`` and queries with ``RETRIEVAL_QUERY``. A local server speaking
Gemini's native ``batchEmbedContents`` refuses any request without the right field, and
the provider is driven the way a user arrives at it: a collection embedding with it,
documents written, a text search."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragline.errors import ProviderError
from ragline.facade import DocumentInput, Ragline
from ragline.providers.embedders.gemini import GeminiEmbedder
from ragline.providers.registry import registry
from ragline.services.search.searching import SearchRequest
from ragline.settings import Settings
from ragline.testing.server import QuietHandler, serve_handler

KEY = "AIza-test-key-0123456789"


class Gemini:
    def __init__(self) -> None:
        self.url = ""
        self.seen: list[dict[str, Any]] = []


@pytest.fixture
def gemini() -> Iterator[Gemini]:
    state = Gemini()

    class Handler(QuietHandler):
        def do_POST(self) -> None:  # Gemini's native API, strict about taskType
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.seen.append({"path": self.path, "key": self.headers.get("x-goog-api-key"),
                               "auth": self.headers.get("Authorization"), "body": body})
            reqs = body.get("requests", [])
            tasks = {r.get("taskType") for r in reqs}
            if (self.headers.get("x-goog-api-key") != KEY
                    or not self.path.endswith("/models/text-embedding-004:batchEmbedContents")
                    or len(tasks) != 1 or not tasks <= {"RETRIEVAL_QUERY", "RETRIEVAL_DOCUMENT"}):
                self.send(400, b'{"error": {"message": "bad request"}}')
                return
            out = [{"values": [float(b) + 1 for b in hashlib.sha256(
                r["content"]["parts"][0]["text"].encode()).digest()[:8]]} for r in reqs]
            self.send(200, json.dumps({"embeddings": out}).encode(),
                      {"Content-Type": "application/json"})

    with serve_handler(Handler) as url:
        state.url = f"{url}/v1beta"
        yield state


@pytest.fixture(autouse=True)
def _gemini_registered() -> Iterator[None]:
    added = not registry.has("embedders", "gemini")  # an install older than the entry point
    if added:
        registry.register("embedders", "gemini", GeminiEmbedder)
    yield
    if added:
        registry.unregister("embedders", "gemini")


def test_documents_and_queries_carry_spec_001_task_types(gemini: Gemini) -> None:
    emb = GeminiEmbedder(base_url=gemini.url, api_key=KEY)
    docs = emb.embed(["a lesson", "another lesson"], "document")
    query = emb.embed(["what is a lesson?"], "query")
    assert docs.shape == (2, 8) and query.shape == (1, 8)
    assert [r["body"]["requests"][0]["taskType"] for r in gemini.seen] == [
        "RETRIEVAL_DOCUMENT", "RETRIEVAL_QUERY"]
    assert gemini.seen[0]["body"]["requests"][0]["model"] == "models/text-embedding-004"
    assert gemini.seen[0]["auth"] is None  # the key travels as x-goog-api-key only


def test_a_refused_request_names_the_status_not_the_key(gemini: Gemini) -> None:
    emb = GeminiEmbedder(base_url=gemini.url, api_key="wrong-key")
    with pytest.raises(ProviderError, match="HTTP 400") as err:
        emb.embed(["x"], "document")
    assert "wrong-key" not in str(err.value)


def test_a_collection_embedding_with_gemini(gemini: Gemini, tmp_path: Path) -> None:
    settings = Settings(_env_file=None, data_dir=tmp_path / "data",  # type: ignore[call-arg]
                        embedder_options={"gemini": {"base_url": gemini.url, "api_key": KEY}})
    rl = Ragline(settings).start()
    try:
        owner = rl.owner()
        rl.collections.create(owner, "kb", embed={"provider": "gemini"})
        gemini.seen.clear()
        rl.documents.add(owner, "kb", [DocumentInput("ROS 2 topics carry messages", {},
                                                     None, "t1")])
        assert {r["body"]["requests"][0]["taskType"] for r in gemini.seen} == {
            "RETRIEVAL_DOCUMENT"}
        gemini.seen.clear()
        res = rl.search.query_sync(owner, SearchRequest(
            collection="kb", query="how do nodes talk?", mode="dense", limit=1))
        assert [h.id for h in res.hits] == ["t1"]
        assert [r["body"]["requests"][0]["taskType"] for r in gemini.seen] == [
            "RETRIEVAL_QUERY"]
    finally:
        rl.close()


def test_health_is_one_query_call_and_never_raises(gemini: Gemini) -> None:
    ok = GeminiEmbedder(base_url=gemini.url, api_key=KEY).health()
    assert ok.status == "ok" and ok.details["dimension"] == 8
    assert gemini.seen[-1]["body"]["requests"][0]["taskType"] == "RETRIEVAL_QUERY"
    down = GeminiEmbedder(base_url=gemini.url, api_key="nope-key").health()
    assert down.status == "down" and "nope-key" not in str(down.error)
