"""POST /rerank, scenario by scenario from spec 000 ("Cross-Encoder Reranking Endpoint")."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from ragline.api.app import create_app
from ragline.errors import InvalidInput
from ragline.facade import Ragline
from ragline.providers.rerankers.cross_encoder import CrossEncoderReranker, ModelSource
from ragline.settings import Settings
from ragline.testing.cross_encoder import tiny_cross_encoder_dir
from ragline.testing.server import serve_in_thread
from tests.api.helpers import local_client, rerank_app

NOT_LOADED = "Cross-encoder not loaded. Start server with --cross-encoder flag."
TEXTS = [
    "Retrieval augmented generation grounds answers in documents.",
    "The Eiffel tower is in Paris.",
    "Cats sleep most of the day.",
    "Vector databases store embeddings.",
    "Bananas are yellow.",
    "BM25 is a lexical ranking function.",
    "Cross-encoders read the query and document together.",
    "The weather is nice today.",
    "Rerankers improve search precision.",
    "x",
]
DOCS = [{"id": f"doc{i}", "text": t} for i, t in enumerate(TEXTS)]


@pytest.fixture(scope="module")
def reranker() -> CrossEncoderReranker:
    source = ModelSource(str(tiny_cross_encoder_dir()), "--cross-encoder-path")
    return CrossEncoderReranker.from_source(source)


@pytest.fixture
def client(reranker: CrossEncoderReranker) -> Iterator[TestClient]:
    with local_client(rerank_app(reranker)) as c:
        yield c


class Exploding:
    """A reranker whose model blows up, to check the 500 path."""

    def rerank(self, query: str, documents: Sequence[Mapping[str, Any]], top_k: Any = None) -> Any:
        raise ValueError("tensor shape mismatch (3 vs 4)")


class Slow:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def rerank(self, query: str, documents: Sequence[Mapping[str, Any]], top_k: Any = None) -> Any:
        time.sleep(self.seconds)
        return [
            {"id": d["id"], "score": 0.5, "original_rank": n} for n, d in enumerate(documents, 1)
        ]


def test_reranks_all_documents_sorted_by_score(
    client: TestClient, reranker: CrossEncoderReranker
) -> None:
    resp = client.post("/rerank", json={"query": "what is a reranker", "documents": DOCS})
    assert resp.status_code == 200
    body = resp.json()
    assert list(body) == ["reranked"]
    items = body["reranked"]
    assert len(items) == len(DOCS)
    scores = [it["score"] for it in items]
    assert scores == sorted(scores, reverse=True)
    assert sorted(it["original_rank"] for it in items) == list(range(1, 11))
    for it in items:
        assert set(it) == {"id", "score", "original_rank"}
        assert isinstance(it["score"], float)
        assert DOCS[it["original_rank"] - 1]["id"] == it["id"]
    direct = reranker.rerank("what is a reranker", DOCS)
    assert [it["id"] for it in items] == [d["id"] for d in direct]
    assert scores == pytest.approx([d["score"] for d in direct])


def test_top_k_returns_best_k_of_all_scored(client: TestClient) -> None:
    full = client.post("/rerank", json={"query": "rerankers", "documents": DOCS}).json()
    top = client.post("/rerank", json={"query": "rerankers", "documents": DOCS, "top_k": 3}).json()
    assert top["reranked"] == full["reranked"][:3]


def test_empty_documents_is_an_empty_result(client: TestClient) -> None:
    resp = client.post("/rerank", json={"query": "anything", "documents": []})
    assert resp.status_code == 200
    assert resp.json() == {"reranked": []}


def test_ids_keep_their_type_and_extra_fields_are_ignored(client: TestClient) -> None:
    docs = [{"id": 7, "text": "seven", "metadata": {"a": 1}}, {"id": "8", "text": "eight"}]
    items = client.post("/rerank", json={"query": "q", "documents": docs}).json()["reranked"]
    assert {(type(it["id"]), it["id"]) for it in items} == {(int, 7), (str, "8")}


def test_without_model_answers_503_with_the_spec_message() -> None:
    with local_client(rerank_app(None)) as c:
        resp = c.post("/rerank", json={"query": "q", "documents": DOCS})
    assert resp.status_code == 503
    assert resp.json() == {"detail": NOT_LOADED, "error": "model_not_loaded", "message": NOT_LOADED}


def test_empty_documents_without_model_is_still_an_empty_result() -> None:
    """Spec 000's empty-list scenario holds on a server started without a cross-encoder
    (issue 37 item 6): nothing to score, so nothing needs the model."""
    with local_client(rerank_app(None)) as c:
        resp = c.post("/rerank", json={"query": "q", "documents": []})
        assert resp.status_code == 200 and resp.json() == {"reranked": []}
        assert c.post("/rerank", json={"query": "q", "documents": DOCS}).status_code == 503


@pytest.mark.parametrize(
    ("body", "field"),
    [({"documents": DOCS}, "query"), ({"query": "q"}, "documents")],
)
def test_missing_required_field_is_400(
    client: TestClient, body: dict[str, Any], field: str
) -> None:
    resp = client.post("/rerank", json=body)
    assert resp.status_code == 400
    assert f"'{field}' is required" in resp.json()["detail"]


def test_document_without_text_and_bad_top_k_are_400(client: TestClient) -> None:
    resp = client.post("/rerank", json={"query": "q", "documents": [{"id": "1"}]})
    assert resp.status_code == 400 and "documents.0.text" in resp.json()["detail"]
    resp = client.post("/rerank", json={"query": "q", "documents": DOCS, "top_k": 0})
    assert resp.status_code == 400 and "top_k" in resp.json()["detail"]


def test_too_many_documents_is_400(tmp_path: Path) -> None:
    source = ModelSource(str(tiny_cross_encoder_dir()), "--cross-encoder-path")
    small = CrossEncoderReranker.from_source(source, max_documents=3)
    with local_client(rerank_app(small)) as c:
        resp = c.post("/rerank", json={"query": "q", "documents": DOCS})
    assert resp.status_code == 400
    assert resp.json()["detail"] == "Too many documents to rerank: 10 (maximum 3)"


def test_scoring_exception_is_500_with_details_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    with local_client(rerank_app(Exploding()), raise_server_exceptions=False) as c:
        resp = c.post("/rerank", json={"query": "q", "documents": DOCS})
    assert resp.status_code == 500
    body = resp.json()
    assert body["error"] == "rerank_failed"
    assert body["detail"] == "Reranking failed: ValueError: tensor shape mismatch (3 vs 4)"
    failures = [r for r in caplog.records if r.name == "ragline.facade"]
    assert failures and failures[0].levelno == logging.ERROR and failures[0].exc_info


def test_real_model_failure_is_500_with_details(reranker: CrossEncoderReranker) -> None:
    broken = CrossEncoderReranker(reranker.config, model=SimpleNamespace(predict=None))
    with local_client(rerank_app(broken)) as c:
        resp = c.post("/rerank", json={"query": "q", "documents": DOCS[:2]})
    assert resp.status_code == 500
    assert resp.json()["detail"].startswith("Reranking failed: TypeError:")


def test_scoring_does_not_block_the_event_loop() -> None:
    app = rerank_app(Slow(2.0))

    @app.get("/ping")
    async def ping() -> dict[str, bool]:
        return {"ok": True}

    with serve_in_thread(app) as url:
        body = {"query": "q", "documents": DOCS}
        slow = threading.Thread(target=httpx.post, args=(f"{url}/rerank",), kwargs={"json": body})
        slow.start()
        time.sleep(0.2)  # the rerank request is now sleeping in the thread pool
        started = time.perf_counter()
        assert httpx.get(f"{url}/ping").json() == {"ok": True}
        assert time.perf_counter() - started < 1.0  # not queued behind the 2 s rerank
        slow.join()


def test_wired_into_the_real_app(tmp_path: Path, reranker: CrossEncoderReranker) -> None:
    """With the real app factory: /health advertises the model and /rerank uses it."""
    rl = Ragline(Settings(_env_file=None, data_dir=tmp_path))
    app = create_app(ragline=rl)
    with local_client(app) as c:
        assert "cross_encoder" not in c.get("/health").json()
        resp = c.post("/rerank", json={"query": "q", "documents": DOCS[:3]})
        assert resp.status_code == 503 and resp.json()["detail"] == NOT_LOADED
        rl.services.reranker.current = reranker
        assert c.get("/health").json()["cross_encoder"] == {
            "model": str(tiny_cross_encoder_dir()),
            "status": "loaded",
        }
        items = c.post("/rerank", json={"query": "q", "documents": DOCS[:3]}).json()["reranked"]
        assert sorted(it["id"] for it in items) == ["doc0", "doc1", "doc2"]
    rl.close()


def test_reranker_configured_in_settings_is_loaded_by_library_and_app(tmp_path: Path) -> None:
    """``Ragline(settings)`` and ``create_app(settings)`` load the configured cross-encoder
    themselves (no CLI step), through the registry."""
    model = tiny_cross_encoder_dir()
    settings = Settings(_env_file=None, data_dir=tmp_path / "a", cross_encoder_path=model)
    with Ragline(settings) as rl:
        me = rl.owner()
        ranked = rl.search.rerank(me, "q", DOCS[:3])
        assert sorted(r["id"] for r in ranked) == ["doc0", "doc1", "doc2"]
        assert rl.admin.health()["cross_encoder"] == {"model": str(model), "status": "loaded"}
    generic = Settings(_env_file=None, data_dir=tmp_path / "b", reranker="cross-encoder",
                       reranker_options={"model": str(model), "local_files_only": True})
    with local_client(create_app(generic)) as c:
        assert c.get("/health").json()["cross_encoder"]["model"] == str(model)
        items = c.post("/rerank", json={"query": "q", "documents": DOCS[:2]}).json()
        assert {i["id"] for i in items["reranked"]} == {"doc0", "doc1"}
    bad = Settings(_env_file=None, data_dir=tmp_path / "c", reranker="cross-encoder",
                   reranker_options={"modell": "x", "api_key": "sk-secret"})
    with pytest.raises(InvalidInput) as info:
        Ragline(bad).start()
    assert "'modell'" in info.value.message and "sk-secret" not in info.value.message
