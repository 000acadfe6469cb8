"""Operations surface: offline docs, front door, /version, /metrics, request ids, JSON logs,
and job progress (files done/total, rate, ETA, log lines)."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from ragline import __version__
from ragline.api.app import create_app
from ragline.catalog.schema_version import SCHEMA_VERSION
from ragline.datadir import FORMAT_VERSION
from ragline.observability.logs import configure_logging, reset_logging
from ragline.settings import Settings
from tests.ingestion_support import (
    copy_book,
    fake_settings,
)


@pytest.fixture
def fake_client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(fake_settings(tmp_path, job_progress_every=2)),
                    base_url="http://localhost") as c:
        yield c


def test_root_redirects_to_the_console(client: TestClient) -> None:
    r = client.get("/", follow_redirects=False)
    assert r.status_code == 307 and r.headers["location"] == "/ui"


def test_root_redirects_to_docs_when_no_console() -> None:
    from fastapi import FastAPI

    from ragline.api import docs_ui

    app = FastAPI(docs_url=None, redoc_url=None)
    docs_ui.install(app)
    with TestClient(app,
                    base_url="http://localhost") as c:
        r = c.get("/", follow_redirects=False)
        assert r.status_code == 307 and r.headers["location"] == "/docs"


def test_docs_and_redoc_load_only_local_assets(client: TestClient) -> None:
    for page, asset in (("/docs", "swagger-ui/swagger-ui-bundle.js"),
                        ("/redoc", "redoc/redoc.standalone.js")):
        html = client.get(page).text
        assert f"/static/api-docs/{asset}" in html
        # every URL the page loads is ours: no CDN, no Google fonts
        assert "cdn.jsdelivr" not in html and "fonts.googleapis" not in html
        assert "http://" not in html and "https://" not in html
        js = client.get(f"/static/api-docs/{asset}")
        assert js.status_code == 200 and len(js.content) > 500_000
    css = client.get("/static/api-docs/swagger-ui/swagger-ui.css")
    assert css.status_code == 200 and ".swagger-ui" in css.text
    assert client.get("/openapi.json").json()["info"]["version"] == __version__


def test_version(client: TestClient) -> None:
    body = client.get("/version").json()
    assert body["name"] == "ragline" and body["version"] == __version__
    assert body["data_format_version"] == FORMAT_VERSION and body["python"].count(".") == 2
    assert body["catalog_schema_version"] == SCHEMA_VERSION


def test_request_id_is_generated_or_echoed(client: TestClient) -> None:
    a, b = client.get("/health"), client.get("/health")
    assert len(a.headers["x-request-id"]) == 16
    assert a.headers["x-request-id"] != b.headers["x-request-id"]
    given = client.get("/health", headers={"X-Request-ID": "trace-abc.123"})
    assert given.headers["x-request-id"] == "trace-abc.123"
    # a header that could forge log lines is replaced, not echoed
    bad = client.get("/health", headers={"X-Request-ID": "x\" injected"})
    assert bad.headers["x-request-id"] != "x\" injected"
    # errors carry it too
    assert client.get("/collections/nope").headers["x-request-id"]


def _samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def _value(samples: dict[str, list[tuple[dict[str, str], float]]], name: str,
           **labels: str) -> float:
    return sum(v for lab, v in samples.get(name, []) if all(lab.get(k) == x
                                                            for k, x in labels.items()))


def test_metrics_scrape_parses_and_counts_by_route_template(client: TestClient) -> None:
    before = _samples(client.get("/metrics").text)
    assert client.post("/collections", json={"name": "m1"}).status_code in (200, 201)
    docs = [{"id": f"d{i}", "text": f"doc {i}", "embedding": [float(i), 1.0, 0.5]}
            for i in range(5)]
    assert client.post("/collections/m1/documents", json={"documents": docs}).status_code < 300
    for _ in range(3):
        r = client.post("/collections/m1/search", json={"embedding": [1.0, 1.0, 0.5],
                                                        "limit": 2})
        assert r.status_code == 200, r.text
    client.get("/collections/does-not-exist")
    r = client.get("/metrics")
    assert r.headers["content-type"].startswith("text/plain")
    after = _samples(r.text)

    def delta(name: str, **labels: str) -> float:
        return _value(after, name, **labels) - _value(before, name, **labels)

    route = "/collections/{name}/search"
    assert delta("ragline_http_requests_total", route=route, status="200", method="POST") == 3
    assert delta("ragline_http_request_duration_seconds_count", route=route) == 3
    assert delta("ragline_http_requests_total", route="/collections/{name}",
                 status="404") == 1
    # raw paths never become labels
    assert not any("m1" in lab.get("route", "") for lab, _ in
                   after["ragline_http_requests_total"])
    assert delta("ragline_store_query_seconds_count", op="query_batch") >= 3
    assert delta("ragline_batch_size_count", batcher="search") >= 1
    assert "ragline_ingest_jobs_running" in after and "process_cpu_seconds_total" in after


def test_metrics_can_be_switched_off(tmp_path: Path) -> None:
    s = Settings(data_dir=tmp_path / "d", metrics_enabled=False,
                 _env_file=None)  # type: ignore[call-arg]
    with TestClient(create_app(s),
                    base_url="http://localhost") as c:
        r = c.get("/metrics")
        assert r.status_code == 404 and "metrics_enabled" in r.json()["message"]


def test_json_logs_carry_the_request_id_of_the_response(settings: Settings) -> None:
    app = create_app(settings)

    @app.get("/probe")
    def probe() -> dict[str, str]:  # a sync route: runs in the thread pool
        logging.getLogger("ragline.probe").warning("inside the route")
        return {}

    stream = io.StringIO()
    configure_logging("info", "json", stream=stream)
    try:
        with TestClient(app,
                    base_url="http://localhost") as client:
            r = client.get("/collections/missing-one")
            rid = r.headers["x-request-id"]
            client.get("/health")
            probe_id = client.get("/probe").headers["x-request-id"]
    finally:
        reset_logging()
    lines = [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]
    assert lines and all({"ts", "level", "logger", "message", "request_id"} <= set(x)
                         for x in lines)
    inside = [x for x in lines if x["logger"] == "ragline.probe"]
    assert [x["request_id"] for x in inside] == [probe_id]
    assert inside[0]["level"] == "warning" and inside[0]["message"] == "inside the route"
    access = [x for x in lines if x["logger"] == "ragline.access"]
    mine = [x for x in access if x["request_id"] == rid]
    assert len(mine) == 1
    assert mine[0]["status"] == 404 and mine[0]["route"] == "/collections/{name}"
    assert mine[0]["method"] == "GET" and mine[0]["duration_ms"] >= 0
    assert len({x["request_id"] for x in access}) == 3


@pytest.mark.usefixtures("few_payload_indexes")
def test_job_status_has_progress_and_logs_start_progress_end(
        fake_client: TestClient, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    book = copy_book(tmp_path)
    rl = fake_client.app.state.ragline  # type: ignore[attr-defined]
    before = _samples(fake_client.get("/metrics").text)
    with caplog.at_level(logging.INFO, logger="ragline.services.ingestion.jobs"):
        r = fake_client.post("/ingestion/trigger", json={"collection": "book",
                                                         "path": str(book)})
        job_id = r.json()["job_id"]
        rl.ingestion.wait(rl.owner(), job_id, timeout=60)
    job = fake_client.get(f"/ingestion/status/{job_id}").json()
    assert job["status"] == "succeeded"
    assert job["files_total"] == job["files_done"] == 6
    assert job["rate_files_per_s"] > 0 and job["eta_s"] == 0
    msgs = [rec.getMessage() for rec in caplog.records if job_id in rec.getMessage()]
    assert "started" in msgs[0] and "into 'book'" in msgs[0]
    progress = [m for m in msgs if "/6 files" in m]
    # a line each time at least 2 more files are written (job_progress_every=2): files count
    # when their write is acknowledged, so one write of several files is one line
    done = [int(m.split(": ")[1].split("/")[0]) for m in progress]
    assert done == sorted(set(done)) and done[-1] == 6
    assert all(b - a >= 2 for a, b in zip([0, *done], done, strict=False))
    assert "succeeded" in msgs[-1] and "6 files (6 changed" in msgs[-1]
    after = _samples(fake_client.get("/metrics").text)
    assert _value(after, "ragline_ingest_jobs_total", kind="directory", status="succeeded") \
        - _value(before, "ragline_ingest_jobs_total", kind="directory",
                 status="succeeded") == 1
    assert _value(after, "ragline_ingest_files_total", outcome="changed") \
        - _value(before, "ragline_ingest_files_total", outcome="changed") == 6
