"""``/ingestion/trigger`` and ``/ingestion/status``: jobs over HTTP, restarts, re-runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ragline.api.app import create_app
from ragline.catalog.ingest_state import JobTable
from ragline.catalog.sqlite import Catalog
from ragline.facade import Ragline
from ragline.settings import Settings
from tests.api.helpers import local_client
from tests.ingestion_support import (
    SENSING,
    copy_book,
    edit_section,
    fake_settings,
)

pytestmark = pytest.mark.usefixtures("few_payload_indexes")

JOB_FIELDS = {
    "job_id", "status", "mode", "collection", "files_seen", "files_changed", "files_skipped",
    "files_deleted", "chunks_created", "chunks_deleted", "texts_embedded", "started_at",
    "finished_at", "duration_s", "error",
}


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return fake_settings(tmp_path)


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with local_client(create_app(settings)) as c:
        yield c


def rl_of(client: TestClient) -> Ragline:
    rl: Ragline = client.app.state.ragline  # type: ignore[attr-defined]
    return rl


def run_job(client: TestClient, **body: Any) -> dict[str, Any]:
    r = client.post("/ingestion/trigger", json=body)
    assert r.status_code == 202, r.text
    started = r.json()
    assert started["status"] == "queued" and set(started) >= {"job_id", "status"}
    rl_of(client).ingestion.wait(rl_of(client).owner(), started["job_id"], timeout=60)
    status = client.get(f"/ingestion/status/{started['job_id']}")
    assert status.status_code == 200
    return status.json()  # type: ignore[no-any-return]


def test_trigger_runs_a_job_and_reports_exact_counters(client: TestClient,
                                                       tmp_path: Path) -> None:
    book = copy_book(tmp_path)
    job = run_job(client, collection="book", path=str(book), mode="incremental")
    assert set(job) >= JOB_FIELDS
    assert job["status"] == "succeeded" and job["error"] is None
    assert (job["files_seen"], job["files_changed"], job["files_skipped"]) == (6, 6, 0)
    count = client.get("/collections/book").json()["count"]
    assert job["chunks_created"] == count == job["texts_embedded"] > 0
    assert job["started_at"] and job["finished_at"] and job["duration_s"] >= 0
    # the malformed frontmatter, and spec 004's defaults announced for pages without them
    assert sum("malformed frontmatter" in w for w in job["warnings"]) == 1
    assert any(w.startswith("README.md: no proficiency_level") for w in job["warnings"])
    edit_section(book / SENSING, "Cameras", "Cameras, rewritten for the second job.")
    second = run_job(client, collection="book", path=str(book))
    assert (second["files_changed"], second["files_skipped"]) == (1, 5)
    assert second["texts_embedded"] == second["chunks_created"] >= 1
    listing = client.get("/ingestion/status").json()
    assert [j["job_id"] for j in listing["jobs"]] == [second["job_id"], job["job_id"]]


def test_trigger_validation_errors(client: TestClient, tmp_path: Path) -> None:
    r = client.post("/ingestion/trigger", json={"collection": "book",
                                                "path": str(tmp_path / "missing")})
    assert r.status_code == 400 and "does not exist" in r.json()["message"]
    r = client.post("/ingestion/trigger", json={"collection": "book", "path": str(tmp_path),
                                                "mode": "everything"})
    assert r.status_code == 400 and "Invalid mode" in r.json()["message"]
    r = client.post("/ingestion/trigger", json={"collection": "book"})
    assert r.status_code == 400 and "'path' is required" in r.json()["message"]
    r = client.post("/ingestion/trigger", json={"collection": "bad name!", "path": str(tmp_path)})
    assert r.status_code == 400 and "Invalid collection name" in r.json()["message"]
    r = client.get("/ingestion/status/nope")
    assert r.status_code == 404 and r.json()["error"] == "not_found"


def test_a_failing_job_reports_its_error(client: TestClient, tmp_path: Path) -> None:
    assert client.post("/collections", json={"name": "vectors-only"}).status_code == 201
    job = run_job(client, collection="vectors-only", path=str(copy_book(tmp_path)))
    assert job["status"] == "failed"
    assert "no embedding provider" in job["error"]


def test_missing_collection_is_created_with_the_default_embedder(client: TestClient,
                                                                 tmp_path: Path) -> None:
    job = run_job(client, path=str(copy_book(tmp_path)))  # default collection "book"
    assert job["status"] == "succeeded" and job["collection"] == "book"
    info = client.get("/collections/book").json()
    assert info["embed"]["provider"] == "fake"
    assert info["dimension"] == 16


def test_jobs_interrupted_by_a_restart_are_failed_and_can_be_rerun(tmp_path: Path) -> None:
    settings = fake_settings(tmp_path)
    book = copy_book(tmp_path)
    catalog = Catalog(settings.catalog_path())  # a process that died mid-job
    table = JobTable(catalog)
    stuck = table.create(kind="directory", trigger="api", mode="incremental",
                         collection="book", tenant="default", path=str(book))
    table.start(stuck.id)
    catalog.close()
    with local_client(create_app(settings)) as client:
        job = client.get(f"/ingestion/status/{stuck.id}").json()
        assert job["status"] == "failed" and job["error"] == "interrupted by restart"
        r = client.post(f"/ingestion/jobs/{stuck.id}/rerun")
        assert r.status_code == 202 and r.json()["rerun_of"] == stuck.id
        rl_of(client).ingestion.wait(rl_of(client).owner(), r.json()["job_id"], timeout=60)
        again = client.get(f"/ingestion/status/{r.json()['job_id']}").json()
        assert again["status"] == "succeeded" and again["files_changed"] == 6
