"""Access control over HTTP against the real app: two tenants, keys of each role.

Every endpoint is tried without a key, with a bad and with a revoked key (401), with the
wrong role (403), and across tenants (404, nothing returned, counted or changed).
"""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from ragline.api.app import create_app
from ragline.facade import Ragline
from tests.ingestion_support import fake_settings
from tests.live_server import LiveServer

DIM = 16
PUBLIC_ROUTES = {("GET", "/health"), ("POST", "/ingestion/webhook/github")}


class World:
    def __init__(self, client: TestClient, keys: dict[str, str]) -> None:
        self.c = client
        self.keys = keys

    def h(self, who: str, **extra: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[who]}", **extra}

    def get(self, who: str, url: str, **kw: Any) -> Any:
        return self.c.get(url, headers=self.h(who), **kw)

    def post(self, who: str, url: str, body: Any = None, **kw: Any) -> Any:
        return self.c.post(url, json=body, headers=self.h(who), **kw)


def chunk_ids(w: World, who: str) -> list[str]:
    r = w.get(who, "/collections/kb/documents")
    return [d["id"] for d in r.json()["documents"]]


@pytest.fixture
def world(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> Iterator[World]:
    settings = fake_settings(tmp_path, auth="on", default_collection="kb",
                             ingest_sync_max_bytes=300, public_search_tenant="robolearn")
    caplog.set_level(logging.DEBUG)
    with TestClient(create_app(settings), base_url="http://localhost") as c:
        rl: Ragline = c.app.state.ragline  # type: ignore[attr-defined]
        me = rl.owner()
        keys = {"admin": rl.keys.create(me, "admin", "default", "ops")[1],
                "alice": rl.keys.create(me, "user", "alice")[1],
                "bob": rl.keys.create(me, "user", "bob")[1],
                "robo": rl.keys.create(me, "user", "robolearn")[1]}
        w = World(c, keys)
        assert w.post("admin", "/collections", {"name": "kb", "embed": {"provider": "fake"}}
                      ).status_code == 201
        for who, words in (("alice", "alpha secret gripper"), ("bob", "beta plain gripper"),
                           ("robo", "public lesson gripper")):
            r = w.post(who, "/api/rag/ingest/text", {"text": f"# {who}\n\n{words} notes",
                                                      "title": f"{who} notes"})
            assert r.status_code == 201, r.text
            r = w.post(who, "/collections/kb/documents", {"documents": [
                {"id": f"{who}-doc", "text": f"{words} document",
                 "metadata": {"owner": who, "n": 1}}]})
            assert r.status_code == 200, r.text
        yield w
    text = caplog.text
    for key in keys.values():
        assert key not in text  # keys never reach the log


def test_every_endpoint_needs_a_valid_key(world: World) -> None:
    app = world.c.app
    revoked = world.post("admin", "/api/keys", {"role": "user", "tenant": "carol"}).json()
    assert world.c.delete(f"/api/keys/{revoked['id']}",
                          headers=world.h("admin")).json()["status"] == "revoked"
    bad_headers: list[dict[str, str]] = [
        {}, {"Authorization": "Bearer rl_000000000000_nope"}, {"X-API-Key": "garbage"},
        {"Authorization": f"Bearer {revoked['key']}"}, {"Authorization": "Basic abc"}]
    paths = app.openapi()["paths"]  # type: ignore[attr-defined]
    routes = [(m.upper(), p) for p, ops in paths.items() for m in ops]
    assert len(routes) > 20
    for method, path in routes:
        if (method, path) in PUBLIC_ROUTES:
            continue
        url = path.replace("{name}", "kb").replace("{doc_id}", "x").replace(
            "{chunk_id}", "x").replace("{parent_doc_id}", "x").replace(
            "{job_id}", "x").replace("{key_id}", "x")
        for headers in bad_headers:
            r = world.c.request(method, url, headers=headers, json={})
            if not headers and path in ("/search", "/context/{chunk_id}",
                                        "/lesson/{parent_doc_id}"):
                assert r.status_code != 401, (method, path)  # public search is configured
                continue
            assert r.status_code == 401, (method, path, headers, r.text)
            if path.startswith("/v1/"):  # OpenAI's error shape and code
                assert r.json()["error"]["code"] == "invalid_api_key"
            else:
                assert r.json()["error"] == "unauthorized"


def test_user_keys_cannot_do_admin_things(world: World) -> None:
    for method, url, body in (
            ("POST", "/collections", {"name": "mine"}),
            ("DELETE", "/collections/kb", None),
            ("PUT", "/collections/kb/metadata", {"metadata": {"x": 1}}),
            ("POST", "/api/keys", {"role": "admin", "tenant": "alice"}),
            ("GET", "/api/keys", None),
            ("POST", "/ingestion/trigger", {"path": "/tmp"})):
        r = world.c.request(method, url, headers=world.h("alice"), json=body)
        assert r.status_code == 403, (method, url, r.text)
        assert r.json()["error"] == "forbidden"
    assert world.get("admin", "/collections/kb").json()["metadata"] == {}
    r = world.c.get("/collections/kb", headers=world.h("alice", **{"X-Ragline-Tenant": "bob"}))
    assert r.status_code == 403


def test_backup_and_metrics_are_for_admin_keys_only(world: World) -> None:
    """Both cover every tenant: a user key of another tenant and a user key of the admin's
    own tenant are refused alike, with the one error body and no archive or figures."""
    same_tenant = world.post("admin", "/api/keys", {"role": "user", "tenant": "default"})
    assert same_tenant.status_code == 201
    world.keys["default-user"] = same_tenant.json()["key"]
    refusals = {("POST", "/admin/backup"): "Only an admin key can take backups",
                ("GET", "/metrics"): "Only an admin key can read metrics"}
    for who, tenant in (("alice", "alice"), ("default-user", "default")):
        for extra in ({}, {"X-Ragline-Tenant": tenant}):  # naming its own tenant changes nothing
            for (method, url), message in refusals.items():
                r = world.c.request(method, url, headers=world.h(who, **extra))
                assert r.status_code == 403, (who, url, r.text)
                assert r.headers["content-type"] == "application/json"
                assert r.json() == {"detail": message, "error": "forbidden",
                                    "message": message}
    # a user key naming a tenant other than its own is refused before the role check
    r = world.c.get("/metrics", headers=world.h("alice", **{"X-Ragline-Tenant": "default"}))
    assert r.status_code == 403
    assert r.json()["message"] == "A user key acts only inside its own tenant"
    backup = world.c.post("/admin/backup", headers=world.h("admin"))
    assert backup.status_code == 200 and backup.headers["content-type"] == "application/gzip"
    assert backup.content[:2] == b"\x1f\x8b"  # a gzip stream
    metrics = world.get("admin", "/metrics")
    assert metrics.status_code == 200 and "ragline_http_requests_total" in metrics.text


def test_records_of_another_tenant_are_invisible(world: World) -> None:
    alice_ids = chunk_ids(world, "alice")
    assert "alice-doc" in alice_ids and not any("bob" in i for i in alice_ids)
    bob_ids = chunk_ids(world, "bob")
    assert set(alice_ids).isdisjoint(bob_ids)
    # guessed ids: 404, never the record
    for doc_id in alice_ids:
        r = world.get("bob", f"/collections/kb/documents/{doc_id}")
        assert r.status_code == 404 and "alpha" not in r.text
        assert world.get("bob", f"/context/{doc_id}").status_code == 404
    # crafted filters cannot widen the tenant
    for where in ('{"owner": "alice"}', '{"$or": [{"owner": "alice"}, {"$not": {"n": 5}}]}',
                  '{"owner": {"$nin": ["zz"]}}', '{"$not": {"owner": "bob"}}'):
        r = world.get("bob", "/collections/kb/documents", params={"where": where})
        assert all(d["metadata"].get("owner") in (None, "bob") for d in r.json()["documents"])
        assert "alpha" not in r.text
    # every search mode
    for mode in ("dense", "sparse", "hybrid"):
        for url in ("/collections/kb/search", "/search"):
            r = world.post("bob", url, {"query": "alpha secret gripper", "mode": mode,
                                        "limit": 50})
            assert r.status_code == 200, r.text
            assert r.json()["results"] and "alpha" not in r.text, (mode, url)
    # metadata values, counts, info
    values = world.get("bob", "/collections/kb/metadata-values",
                       params={"field": "owner"}).json()
    assert values["values"] == ["bob"]
    assert world.get("bob", "/collections/kb").json()["count"] == len(bob_ids)
    info = world.get("bob", "/info").json()
    assert info["total_documents"] == len(bob_ids)
    # lesson of alice's source
    r = world.get("bob", "/lesson/text-alice")
    assert "alpha" not in r.text


def test_deletes_and_empty_stay_inside_the_tenant(world: World) -> None:
    alice_before = chunk_ids(world, "alice")
    r = world.c.request("DELETE", "/collections/kb/documents", headers=world.h("bob"),
                        json={"ids": alice_before})
    assert r.json()["count_deleted"] == 0
    r = world.c.request("DELETE", "/collections/kb/documents", headers=world.h("bob"),
                        json={"where": {"owner": "alice"}})
    assert r.json()["count_deleted"] == 0
    r = world.c.delete("/collections/kb/documents/all", headers=world.h("bob"))
    assert r.status_code == 200 and r.json()["count_deleted"] >= 1
    assert chunk_ids(world, "bob") == []
    assert chunk_ids(world, "alice") == alice_before  # untouched
    # an admin naming a tenant empties only that tenant
    r = world.c.delete("/collections/kb/documents/all",
                       headers=world.h("admin", **{"X-Ragline-Tenant": "alice"}))
    assert r.json()["count_deleted"] == len(alice_before)
    assert chunk_ids(world, "robo")  # the third tenant still has its records


def test_jobs_belong_to_their_tenant(world: World) -> None:
    big = "# big\n\n" + "gripper torque notes " * 40  # above ingest_sync_max_bytes: a job
    r = world.post("alice", "/api/rag/ingest/text", {"text": big, "title": "big"})
    assert r.status_code == 202
    job_id = r.json()["job_id"]
    assert world.get("alice", f"/ingestion/status/{job_id}").status_code == 200
    assert world.get("bob", f"/ingestion/status/{job_id}").status_code == 404
    assert job_id not in world.get("bob", "/ingestion/status").text
    assert job_id in world.get("admin", "/ingestion/status").text


def test_public_search_reads_only_the_public_tenant(world: World) -> None:
    r = world.c.post("/search", json={"query": "gripper notes", "limit": 50})
    assert r.status_code == 200
    assert r.json()["results"] and all("public" in x["text"] for x in r.json()["results"])
    assert world.c.post("/search", json={"query": "x"},
                        headers={"X-Ragline-Tenant": "alice"}).status_code == 403
    for method, url in (("POST", "/collections/kb/documents"), ("POST", "/api/rag/ingest/text"),
                        ("DELETE", "/collections/kb/documents/all"), ("GET", "/collections")):
        assert world.c.request(method, url, json={}).status_code == 401


def test_keys_are_shown_once_and_never_listed(world: World) -> None:
    created = world.post("admin", "/api/keys", {"role": "user", "tenant": "dave",
                                                "name": "d"}).json()
    assert created["key"].startswith("rl_") and created["tenant"] == "dave"
    listed = world.get("admin", "/api/keys").text
    assert created["id"] in listed
    for key in (*world.keys.values(), created["key"]):
        assert key not in listed
    assert world.get("admin", "/collections").status_code == 200
    r = world.c.get("/collections", headers={"X-API-Key": created["key"]})
    assert r.status_code == 200  # the X-API-Key header works too
    rl: Ragline = world.c.app.state.ragline  # type: ignore[attr-defined]
    caller = rl.keys.authenticate(created["key"])
    assert created["key"] not in repr(caller) and caller.tenant == "dave"


def test_directory_ingestion_only_under_configured_roots(tmp_path: Path) -> None:
    inside = tmp_path / "root" / "book"
    inside.mkdir(parents=True)
    (inside / "a.md").write_text("# A\n\nhello\n")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    app = create_app(fake_settings(tmp_path, ingest_allowed_roots=None))
    with TestClient(app, base_url="http://localhost") as c:
        r = c.post("/ingestion/trigger", json={"path": str(inside)})
        assert r.status_code == 400 and "RAGLINE_INGEST_ALLOWED_ROOTS" in r.json()["detail"]
    settings = fake_settings(tmp_path / "s2", ingest_allowed_roots=[tmp_path / "root"])
    with TestClient(create_app(settings), base_url="http://localhost") as c:
        assert c.post("/ingestion/trigger", json={"path": "docs"}).json()["detail"].endswith(
            "must be absolute (relative paths are refused)")
        exists = c.post("/ingestion/trigger", json={"path": str(outside)}).json()["detail"]
        missing = c.post("/ingestion/trigger",
                         json={"path": str(tmp_path / "nope")}).json()["detail"]
        assert exists.replace(str(outside), "P") == missing.replace(str(tmp_path / "nope"), "P")
        assert "not under an allowed ingestion root" in exists
        r = c.post("/ingestion/trigger", json={"path": str(inside)})
        assert r.status_code == 202, r.text


def _serve(tmp_path: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ragline.cli.main", "serve", "--data-dir",
                           str(tmp_path / "d"), *args], capture_output=True, text=True,
                          timeout=60, env={**os.environ, **env})


def test_auth_off_is_refused_on_a_public_address(tmp_path: Path) -> None:
    done = _serve(tmp_path, "--host", "0.0.0.0", env={"RAGLINE_AUTH": "off"})
    assert done.returncode == 1
    assert "RAGLINE_AUTH_OFF_I_UNDERSTAND" in done.stderr
    assert not (tmp_path / "d").exists()  # refused before anything was created


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0"])
def test_auth_off_serves_loopback_and_warns_every_start(tmp_path: Path, host: str) -> None:
    """Loopback: served with auth off, every caller an admin, a warning each start; any other
    address only with RAGLINE_AUTH_OFF_I_UNDERSTAND=1 (refused otherwise: test above)."""
    env = {"RAGLINE_AUTH": "off"}
    if host != "127.0.0.1":
        env["RAGLINE_AUTH_OFF_I_UNDERSTAND"] = "1"
    for start in (1, 2):
        srv = LiveServer(tmp_path / "data", "--host", host, env=env)
        try:
            srv.wait_ready()
            r = httpx.post(srv.url + "/collections", json={"name": f"c{start}"})
            assert r.status_code == 201, r.text  # no key: an admin
            assert httpx.get(srv.url + "/api/keys").status_code == 200
        finally:
            srv.stop()
        log = srv.log.read_text()
        assert "RAGLINE_AUTH=off: every caller is an admin" in log, (start, log)
        assert "admin-key" not in log  # no key is created with auth off
    assert not (tmp_path / "data" / "admin-key.txt").exists()


def test_first_start_creates_an_admin_key_and_a_second_process_is_refused(
        tmp_path: Path) -> None:
    srv = LiveServer(tmp_path / "data", env={"RAGLINE_AUTH": "on"})
    try:
        srv.wait_ready()
        key_file = tmp_path / "data" / "admin-key.txt"
        key = key_file.read_text().strip()
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        banner = srv.log.read_text()
        # the server's output is a log file here: the key is in the key file, never the log
        assert key not in banner and "admin-key.txt" in banner and srv.url in banner
        assert httpx.get(srv.url + "/collections").status_code == 401
        ok = httpx.get(srv.url + "/collections", headers={"Authorization": f"Bearer {key}"})
        assert ok.status_code == 200
        second = subprocess.run(
            [sys.executable, "-m", "ragline.cli.main", "serve", "--data-dir",
             str(tmp_path / "data"), "--port", str(srv.port + 1)],
            capture_output=True, text=True, timeout=60, env={**os.environ, "RAGLINE_AUTH": "on"})
        assert second.returncode == 1
        assert f"pid {srv.proc.pid}" in second.stderr and srv.url in second.stderr
        # the CLI does not fail on the lock: it talks to the server holding the directory,
        # with the admin key the server wrote there
        keys = subprocess.run([sys.executable, "-m", "ragline.cli.main", "keys", "list",
                               "--data-dir", str(tmp_path / "data"), "--json"],
                              capture_output=True, text=True, timeout=60)
        assert keys.returncode == 0, keys.stderr
        listed = json.loads(keys.stdout)["keys"]
        assert [k["id"] for k in listed] == [key.split("_")[1]] and key not in keys.stdout
    finally:
        srv.stop()
    restarted = LiveServer(tmp_path / "data", env={"RAGLINE_AUTH": "on"})
    try:
        restarted.wait_ready()
        assert key_file.read_text().strip() == key  # not replaced on later starts
        assert key not in restarted.log.read_text()  # shown once only
    finally:
        restarted.stop()


def test_keys_cli_provisions_before_the_first_start(tmp_path: Path) -> None:
    data = tmp_path / "data"
    done = subprocess.run([sys.executable, "-m", "ragline.cli.main", "keys", "create",
                           "--role", "user", "--tenant", "alice", "--data-dir", str(data),
                           "--json"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    made = json.loads(done.stdout)
    # the body of POST /api/keys: the record and, once, the key
    assert {"id", "key", "role", "tenant", "created_at"} <= set(made)
    assert made["tenant"] == "alice"
    listed = subprocess.run([sys.executable, "-m", "ragline.cli.main", "keys", "list",
                             "--data-dir", str(data), "--json"],
                            capture_output=True, text=True, timeout=60)
    rows = json.loads(listed.stdout)["keys"]  # the body of GET /api/keys
    assert [r["id"] for r in rows] == [made["id"]] and made["key"] not in listed.stdout
    revoked = subprocess.run([sys.executable, "-m", "ragline.cli.main", "keys", "revoke",
                              made["id"], "--data-dir", str(data)],
                             capture_output=True, text=True, timeout=60)
    assert revoked.returncode == 0
    app = create_app(fake_settings(tmp_path, data_dir=data, auth="on"))
    with TestClient(app, base_url="http://localhost") as c:
        r = c.get("/collections", headers={"Authorization": f"Bearer {made['key']}"})
        assert r.status_code == 401
