"""/info and /health under races, 500 bodies, Host names and CORS (issue 10)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ragline.api.app import create_app
from ragline.settings import Settings
from tests.api.helpers import doc


def test_info_and_health_never_500_while_collections_are_emptied_and_deleted(
    tmp_path: Path, client: TestClient
) -> None:
    stop = threading.Event()
    errors: list[str] = []

    def churn() -> None:
        i = 0
        while not stop.is_set():
            name = f"c{i % 3}"
            client.post("/collections", json={"name": name})
            client.post(f"/collections/{name}/documents",
                        json={"documents": [doc(j) for j in range(20)]})
            client.delete(f"/collections/{name}/documents/all")
            client.post(f"/collections/{name}/documents", json={"documents": [doc(1)]})
            client.delete(f"/collections/{name}")
            i += 1

    workers = [threading.Thread(target=churn) for _ in range(2)]
    for w in workers:
        w.start()
    try:
        for _ in range(150):
            for path in ("/info", "/health"):
                r = client.get(path)
                if r.status_code != 200 or str(tmp_path) in r.text:
                    errors.append(f"{path} {r.status_code} {r.text[:300]}")
    finally:
        stop.set()
        for w in workers:
            w.join(30)
    assert not errors, errors[:3]


def test_unexpected_errors_answer_an_id_that_is_in_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    app = create_app(Settings(data_dir=tmp_path / "d", _env_file=None))  # type: ignore[call-arg]

    @app.get("/boom")
    def boom() -> None:
        raise RuntimeError(f"secret path {tmp_path}/catalog.sqlite3")

    with (TestClient(app, base_url="http://localhost", raise_server_exceptions=False) as c,
          caplog.at_level(logging.ERROR)):
        r = c.get("/boom")
    assert r.status_code == 500
    body = r.json()
    assert str(tmp_path) not in r.text and "secret" not in r.text
    assert body["error"] == "internal_error" and len(body["error_id"]) == 16
    logged = [rec for rec in caplog.records if body["error_id"] in rec.getMessage()]
    assert logged and logged[0].exc_info is not None  # the traceback is in the log


@pytest.mark.parametrize("host,ok", [
    ("localhost", True), ("localhost:8000", True), ("127.0.0.1:8000", True),
    ("[::1]:8000", True), ("app.localhost", True), ("10.1.2.3", True),
    ("evil.example.com", False), ("evil.example.com:8000", False),
    ("127.0.0.1.nip.io", False),
])
def test_host_names_are_checked(client: TestClient, host: str, ok: bool) -> None:
    r = client.get("/health", headers={"host": host})
    assert (r.status_code == 200) == ok
    if not ok:
        assert r.status_code == 421 and "allowed_hosts" in r.json()["message"]


def test_allowed_hosts_setting(tmp_path: Path) -> None:
    s = Settings(data_dir=tmp_path / "d", allowed_hosts=["rag.example.com"],  # type: ignore[call-arg]
                 _env_file=None)
    with TestClient(create_app(s), base_url="http://rag.example.com") as c:
        assert c.get("/health").status_code == 200
        assert c.get("/health", headers={"host": "localhost"}).status_code == 421


def test_simple_requests_cannot_change_state(tmp_path: Path) -> None:
    s = Settings(data_dir=tmp_path / "d", _env_file=None)  # type: ignore[call-arg]
    with TestClient(create_app(s), base_url="http://localhost") as c:
        # what a form on any web page can send: refused before any work
        r = c.post("/api/rag/ingest/upload",
                   files={"documentFile": ("a.txt", b"planted", "text/plain")})
        assert r.status_code == 403 and "X-API-Key" in r.json()["message"]
        r = c.post("/collections", content=b'{"name": "x"}', headers={"content-type": "text/plain"})
        assert r.status_code == 403
        assert c.get("/collections/x").status_code == 404
        # a JSON body needs a preflight, so it is no simple request
        assert c.post("/collections", json={"name": "x"}).status_code == 201
        r = c.post("/collections", content=b'{"name": "y"}',
                   headers={"content-type": "text/plain", "x-api-key": "k"})
        assert r.status_code != 403
    s2 = Settings(data_dir=tmp_path / "d2", require_credential_header=False,  # type: ignore[call-arg]
                  _env_file=None)
    with TestClient(create_app(s2), base_url="http://localhost") as c:
        r = c.post("/collections", content=b'{"name": "x"}', headers={"content-type": "text/plain"})
        assert r.status_code != 403


def test_cors_is_off_by_default_and_per_origin_when_configured(tmp_path: Path) -> None:
    origin = {"origin": "https://app.example.com"}
    s = Settings(data_dir=tmp_path / "d", _env_file=None)  # type: ignore[call-arg]
    with TestClient(create_app(s), base_url="http://localhost") as c:
        r = c.get("/health", headers=origin)
        assert "access-control-allow-origin" not in r.headers
        pre = c.options("/collections", headers={**origin, "access-control-request-method": "POST"})
        assert "access-control-allow-origin" not in pre.headers
    s = Settings(data_dir=tmp_path / "d2", cors_origins=["https://app.example.com"],  # type: ignore[call-arg]
                 _env_file=None)
    with TestClient(create_app(s), base_url="http://localhost") as c:
        r = c.get("/health", headers=origin)
        assert r.headers["access-control-allow-origin"] == "https://app.example.com"
        r = c.get("/health", headers={"origin": "https://evil.example.com"})
        assert "access-control-allow-origin" not in r.headers
