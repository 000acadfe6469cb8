"""End to end with the real default embedder (all-MiniLM-L6-v2 on onnxruntime, offline)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from ragline.api.app import create_app
from ragline.facade import Ragline
from ragline.services.corpus.embedders import EmbedderPool
from ragline.settings import Settings
from tests.api.helpers import local_client
from tests.ingestion_support import SENSING, copy_book, sid


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    tmp = tmp_path_factory.mktemp("local")
    settings = Settings(data_dir=tmp / "data", default_collection="book",
                        ingest_allowed_roots=[tmp], _env_file=None)  # type: ignore[call-arg]
    try:
        EmbedderPool(settings).get("local").embed(["probe"], "query")
    except Exception as exc:  # model not built on this machine
        pytest.skip(f"local embedder unavailable: {exc}")
    book = copy_book(tmp)
    with local_client(create_app(settings)) as c:
        r = c.post("/ingestion/trigger", json={"path": str(book)})
        assert r.status_code == 202
        rl: Ragline = c.app.state.ragline  # type: ignore[attr-defined]
        job = rl.ingestion.wait(rl.owner(), r.json()["job_id"], timeout=300)
        assert job.status == "succeeded", job.error
        yield c


def test_chunks_fit_the_model_and_search_finds_the_lesson(client: TestClient) -> None:
    rl: Ragline = client.app.state.ragline  # type: ignore[attr-defined]
    emb = rl.services.embedders.get("local")
    lesson = client.get(f"/lesson/{sid(SENSING)}").json()
    assert lesson["total_chunks"] >= 3
    for chunk in lesson["chunks"]:
        assert emb.count_tokens(chunk["text"]) <= emb.max_input_tokens  # never truncated
    hits = client.post("/search", json={"query": "how does lidar measure distance?",
                                        "limit": 3}).json()["results"]
    assert hits[0]["metadata"]["parent_doc_id"] == sid(SENSING)
    assert "lidar" in hits[0]["text"].lower()


def test_rerun_is_free_with_the_real_model(client: TestClient) -> None:
    rl: Ragline = client.app.state.ragline  # type: ignore[attr-defined]
    first = rl.services.jobs.recent(1)[0]
    r = client.post("/ingestion/trigger", json={"path": first.path})
    job = rl.ingestion.wait(rl.owner(), r.json()["job_id"], timeout=120)
    assert job.counters["files_skipped"] == 6 and job.counters["texts_embedded"] == 0
