"""Ingestion state and ingestion jobs in PostgreSQL, shared by every process.

:class:`PgIngestState` is ``ingest_sources`` as in SQLite (``chunk_ids`` as
``jsonb``). :class:`PgJobTable` keeps a job in the queue's own ``jobs`` row
(:mod:`ragline.catalog.pg_queue`): one row is both what ``GET /ingestion/status``
shows and what a worker claims, so the status a user reads is the queue's. The
job's kind (directory, upload, text) is the queue kind; trigger, mode, path and
restricted paths are its payload; an upload's bytes wait in ``job_inputs``,
written in the same transaction as the row, so a worker never claims a job
whose input is not there yet.

A worker records progress and the outcome only while it still holds the job
(the claim it took: same worker, same attempt), so a worker that lost its lease
cannot overwrite the run that replaced it.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from ragline.catalog.ingest_state import COUNTERS, Job, SourceState, StateRow
from ragline.catalog.pg_pool import connection
from ragline.catalog.pg_queue import Claim, JobQueue
from ragline.catalog.sqlite import now_iso
from ragline.errors import CatalogUnavailable

_INSERT = ("INSERT INTO {} (collection, shard, tenant, source_id, origin, source_path, "
           "source_hash, fingerprint, chunk_ids, updated_at, status, created_at) VALUES ")
_KEY = "collection = %s AND shard = %s AND tenant = %s"


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


class PgIngestState:
    """``ingest_sources`` rows; every write is one transaction.

    :meth:`writing` orders the writes of one (collection, tenant) as the SQLite
    state's lock does, and across processes: an in-process re-entrant lock, and
    around the outermost hold a PostgreSQL advisory lock on a connection of its own
    (released by the server if the process dies).
    """

    def __init__(self, pool: ConnectionPool[Any], schema: str, dsn: str) -> None:
        self.pool = pool
        self.schema = schema
        self.dsn = dsn
        self.table = sql.Identifier(schema, "ingest_sources")
        self._locks: dict[tuple[str, str], threading.RLock] = {}
        self._depth: dict[tuple[str, str], int] = {}
        self._guard = threading.Lock()

    @contextmanager
    def writing(self, collection: str, tenant: str) -> Iterator[None]:
        key = (collection, tenant)
        with self._guard:
            lock = self._locks.setdefault(key, threading.RLock())
        with lock:
            outer = self._depth.get(key, 0) == 0
            self._depth[key] = self._depth.get(key, 0) + 1
            try:
                if not outer:
                    yield
                    return
                name = f"ragline-write:{self.schema}:{collection}:{tenant}"
                try:
                    conn = psycopg.connect(self.dsn, autocommit=True)
                except psycopg.OperationalError as exc:
                    raise CatalogUnavailable("the PostgreSQL catalog is unavailable "
                                             f"({type(exc).__name__})") from None
                with conn:
                    conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (name,))
                    yield  # closing the connection releases the lock
            finally:
                self._depth[key] -= 1

    @staticmethod
    def _row(row: dict[str, Any]) -> SourceState:
        return SourceState(row["source_id"], row["origin"], row["source_path"],
                           row["source_hash"], list(row["chunk_ids"]), row["fingerprint"],
                           row["updated_at"], row["status"],
                           row["created_at"] or row["updated_at"])

    def _select(self, where: str, params: tuple[Any, ...],
                tail: str = "") -> list[dict[str, Any]]:
        with connection(self.pool) as conn, conn.cursor(row_factory=dict_row) as cur:
            rows: list[dict[str, Any]] = cur.execute(
                sql.SQL("SELECT * FROM {} WHERE " + where + tail).format(self.table),
                params).fetchall()
        return rows

    def _many(self, stmt: str, params: list[tuple[Any, ...]]) -> None:
        if not params:
            return
        with connection(self.pool) as conn, conn.cursor() as cur:
            cur.executemany(sql.SQL(stmt).format(self.table), params)

    def page(self, collection: str, shard: str, tenant: str, limit: int,
             offset: int) -> tuple[list[SourceState], int]:
        """Sources ordered by id, and how many there are in all."""
        key = (collection, shard, tenant)
        with connection(self.pool) as conn:
            row = conn.execute(sql.SQL("SELECT count(*) FROM {} WHERE " + _KEY).format(
                self.table), key).fetchone()
        rows = self._select(_KEY, (*key, limit, offset),
                            " ORDER BY source_id LIMIT %s OFFSET %s")
        return [self._row(r) for r in rows], int(row[0]) if row else 0

    def rows(self) -> list[StateRow]:
        rows = self._select("TRUE", (), " ORDER BY collection, tenant, source_id")
        return [StateRow(r["collection"], r["shard"], r["tenant"], self._row(r)) for r in rows]

    def sources(self, collection: str, shard: str, tenant: str) -> dict[str, SourceState]:
        rows = self._select(_KEY, (collection, shard, tenant))
        return {r["source_id"]: self._row(r) for r in rows}

    def any(self, collection: str, shard: str, tenant: str) -> bool:
        return bool(self._select(_KEY, (collection, shard, tenant), " LIMIT 1"))

    def some(self, collection: str, shard: str, tenant: str,
             source_ids: set[str]) -> dict[str, SourceState]:
        rows = self._select(_KEY + " AND source_id = ANY(%s)",
                            (collection, shard, tenant, sorted(source_ids)))
        return {r["source_id"]: self._row(r) for r in rows}

    def source(self, collection: str, shard: str, tenant: str,
               source_id: str) -> SourceState | None:
        rows = self._select(_KEY + " AND source_id = %s", (collection, shard, tenant, source_id))
        return self._row(rows[0]) if rows else None

    def begin(self, collection: str, shard: str, tenant: str,
              entries: list[SourceState]) -> None:
        """First writes in flight (``source_hash`` NULL); existing rows are left alone."""
        ts = now_iso()
        self._many(_INSERT + "(%s, %s, %s, %s, %s, %s, NULL, '', '[]', %s, 'ok', %s) "
                   "ON CONFLICT DO NOTHING",
                   [(collection, shard, tenant, e.source_id, e.origin, e.source_path, ts, ts)
                    for e in entries])

    def commit(self, collection: str, shard: str, tenant: str,
               entries: list[SourceState]) -> None:
        """Clean rows again after the write (the first ``created_at`` is kept)."""
        ts = now_iso()
        self._many(_INSERT + "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, 'ok', %s) "
                   "ON CONFLICT (collection, shard, tenant, source_id) DO UPDATE SET "
                   "origin = EXCLUDED.origin, source_path = EXCLUDED.source_path, "
                   "source_hash = EXCLUDED.source_hash, fingerprint = EXCLUDED.fingerprint, "
                   "chunk_ids = EXCLUDED.chunk_ids, updated_at = EXCLUDED.updated_at, "
                   "status = 'ok'",
                   [(collection, shard, tenant, e.source_id, e.origin, e.source_path,
                     e.source_hash, e.fingerprint, Jsonb(e.chunk_ids), ts, ts)
                    for e in entries])

    def retag(self, collection: str, shard: str, tenant: str, source_ids: list[str],
              origin: str) -> None:
        self._many("UPDATE {} SET origin = %s WHERE " + _KEY + " AND source_id = %s",
                   [(origin, collection, shard, tenant, s) for s in source_ids])

    def mark_modified(self, collection: str, shard: str, tenant: str,
                      source_ids: list[str]) -> None:
        ts = now_iso()
        self._many("UPDATE {} SET status = 'modified', updated_at = %s WHERE " + _KEY +
                   " AND source_id = %s AND source_hash IS NOT NULL",
                   [(ts, collection, shard, tenant, s) for s in source_ids])

    def unmark(self, collection: str, shard: str, tenant: str, source_ids: list[str]) -> None:
        self._many("UPDATE {} SET status = 'ok' WHERE " + _KEY + " AND source_id = %s",
                   [(collection, shard, tenant, s) for s in source_ids])

    def settle(self, collection: str, shard: str, tenant: str,
               remaining: dict[str, list[str]]) -> None:
        """Each source lists the chunks it has left; one with none left loses its row."""
        ts = now_iso()
        with connection(self.pool) as conn, conn.transaction():
            for source_id, ids in remaining.items():
                key = (collection, shard, tenant, source_id)
                if ids:
                    conn.execute(sql.SQL("UPDATE {} SET chunk_ids = %s, updated_at = %s, "
                                         "status = 'modified' WHERE " + _KEY +
                                         " AND source_id = %s").format(self.table),
                                 (Jsonb(ids), ts, *key))
                else:
                    conn.execute(sql.SQL("DELETE FROM {} WHERE " + _KEY +
                                         " AND source_id = %s").format(self.table), key)

    def drop_tenant(self, collection: str, shard: str, tenant: str) -> int:
        with connection(self.pool) as conn:
            return int(conn.execute(sql.SQL("DELETE FROM {} WHERE " + _KEY).format(
                self.table), (collection, shard, tenant)).rowcount)

    def drop_rows(self, rows: list[StateRow]) -> None:
        self._many("DELETE FROM {} WHERE " + _KEY + " AND source_id = %s",
                   [(r.collection, r.shard, r.tenant, r.source.source_id) for r in rows])

    def drop(self, collection: str, shard: str, tenant: str, source_ids: list[str]) -> None:
        self._many("DELETE FROM {} WHERE " + _KEY + " AND source_id = %s",
                   [(collection, shard, tenant, s) for s in source_ids])

    def purge_stale(self, live: dict[str, str]) -> int:
        """Delete rows of shards that are no longer a collection's current shard."""
        with connection(self.pool) as conn:
            rows = conn.execute(sql.SQL("SELECT DISTINCT collection, shard FROM {}").format(
                self.table)).fetchall()
        stale = [(c, sh) for c, sh in rows if live.get(c) != sh]
        self._many("DELETE FROM {} WHERE collection = %s AND shard = %s", stale)
        return len(stale)


class PgJobTable:
    """Ingestion jobs as rows of the PostgreSQL job queue (see the module docstring)."""

    def __init__(self, queue: JobQueue, schema: str, max_attempts: int = 3) -> None:
        self.queue = queue
        self.pool = queue.pool
        self.table = queue.table
        self.inputs = sql.Identifier(schema, "job_inputs")
        self.max_attempts = max_attempts
        self._held: dict[str, Claim] = {}  # jobs this process runs now
        self._lock = threading.Lock()

    # -- the claims this process holds ---------------------------------------------------
    def hold(self, claim: Claim) -> None:
        with self._lock:
            self._held[claim.id] = claim

    def claim_of(self, job_id: str) -> Claim | None:
        with self._lock:
            return self._held.get(job_id)

    def release(self, job_id: str) -> None:
        with self._lock:
            self._held.pop(job_id, None)

    # -- rows -----------------------------------------------------------------------------
    @staticmethod
    def _job(row: dict[str, Any]) -> Job:
        p = row["payload"] or {}
        return Job(
            id=row["id"], kind=row["kind"], trigger=p.get("trigger", "api"),
            status=row["status"], mode=p.get("mode", "incremental"),
            collection=row["collection"] or "", tenant=row["tenant"] or "",
            path=p.get("path"), restricted_paths=p.get("restricted_paths"),
            counters={k: 0 for k in COUNTERS} | dict(row["counters"] or {}),
            warnings=list(row["warnings"] or []), result=row["result"],
            created_at=_iso(row["created_at"]) or "", started_at=_iso(row["started_at"]),
            finished_at=_iso(row["finished_at"]), duration_s=row["duration_s"],
            error=row["error"],
            extra={"attempts": row["attempts"], "worker": row["worker"]})

    def create(self, *, kind: str, trigger: str, mode: str, collection: str, tenant: str,
               path: str | None, restricted_paths: list[str] | None = None,
               data: bytes | None = None, worker: str | None = None) -> Job:
        """Queue a job; with ``worker``, created already claimed by that worker (the CLI
        runs it in its own process, under a lease like any worker)."""
        job_id = uuid.uuid4().hex
        payload = {"trigger": trigger, "mode": mode, "path": path,
                   "restricted_paths": restricted_paths}
        with connection(self.pool) as conn, conn.transaction():
            conn.execute(sql.SQL(
                "INSERT INTO {} (id, kind, payload, status, max_attempts, collection, tenant, "
                "attempts, worker, lease_until, started_at) VALUES (%(id)s, %(kind)s, %(p)s, "
                "%(status)s, %(max)s, %(c)s, %(t)s, %(attempts)s, %(w)s, CASE WHEN %(claimed)s "
                "THEN clock_timestamp() + make_interval(secs => %(lease)s) END, "
                "CASE WHEN %(claimed)s THEN clock_timestamp() END)").format(self.table),
                {"id": job_id, "kind": kind, "p": Jsonb(payload),
                 "status": "running" if worker else "queued", "max": self.max_attempts,
                 "c": collection, "t": tenant, "attempts": 1 if worker else 0, "w": worker,
                 "claimed": worker is not None, "lease": self.queue.lease_s})
            if data is not None:
                conn.execute(sql.SQL("INSERT INTO {} (job_id, data) VALUES (%s, %s)").format(
                    self.inputs), (job_id, data))
        if worker is not None:
            self.hold(Claim(job_id, kind, payload, 1, worker))
        job = self.get(job_id)
        assert job is not None
        return job

    def get(self, job_id: str) -> Job | None:
        with connection(self.pool) as conn, conn.cursor(row_factory=dict_row) as cur:
            row = cur.execute(sql.SQL("SELECT * FROM {} WHERE id = %s").format(self.table),
                              (job_id,)).fetchone()
        return self._job(row) if row else None

    def recent(self, limit: int = 20, collection: str | None = None,
               tenant: str | None = None) -> list[Job]:
        conds, args = [sql.SQL("TRUE")], list[Any]()
        if collection is not None:
            conds.append(sql.SQL("collection = %s"))
            args.append(collection)
        if tenant is not None:
            conds.append(sql.SQL("tenant = %s"))
            args.append(tenant)
        with connection(self.pool) as conn, conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(sql.SQL("SELECT * FROM {} WHERE {} ORDER BY created_at DESC, "
                                       "id DESC LIMIT %s").format(
                self.table, sql.SQL(" AND ").join(conds)), (*args, limit)).fetchall()
        return [self._job(r) for r in rows]

    def pending(self) -> int:
        """Jobs queued or running anywhere (the admission bound is cluster-wide)."""
        return self.queue.pending()

    def _fenced(self, job_id: str, assignments: str, params: dict[str, Any]) -> bool:
        """Update the row only while this process still holds the job's claim."""
        claim = self.claim_of(job_id)
        if claim is None:
            return False
        with connection(self.pool) as conn:
            cur = conn.execute(sql.SQL(
                "UPDATE {t} SET " + assignments + " WHERE id = %(id)s AND worker = %(w)s "
                "AND attempts = %(a)s AND status = 'running'").format(t=self.table),
                {**params, "id": job_id, "w": claim.worker, "a": claim.attempt})
            return bool(cur.rowcount == 1)

    def start(self, job_id: str) -> None:
        """Nothing to do: claiming the job marked it running."""

    def progress(self, job_id: str, counters: dict[str, int], warnings: list[str]) -> None:
        self._fenced(job_id, "counters = %(c)s, warnings = %(w50)s",
                     {"c": Jsonb(counters), "w50": Jsonb(warnings[-50:])})

    def finish(self, job_id: str, status: str, counters: dict[str, int], warnings: list[str],
               duration_s: float, error: str | None = None,
               result: dict[str, Any] | None = None) -> None:
        self._fenced(job_id, "status = %(s)s, counters = %(c)s, warnings = %(w50)s, "
                     "finished_at = clock_timestamp(), lease_until = NULL, "
                     "duration_s = %(d)s, error = %(e)s, result = %(r)s",
                     {"s": status, "c": Jsonb(counters), "w50": Jsonb(warnings[-50:]),
                      "d": round(duration_s, 3), "e": error,
                      "r": Jsonb(result) if result else None})

    def requeue(self, job_id: str, counters: dict[str, int], warnings: list[str]) -> bool:
        """Give a job this worker stopped (graceful shutdown) back to the queue; the
        attempt is not counted (the job did not fail, its worker left)."""
        return self._fenced(job_id, "status = 'queued', attempts = attempts - 1, "
                            "worker = NULL, lease_until = NULL, counters = %(c)s, "
                            "warnings = %(w50)s", {"c": Jsonb(counters),
                                                   "w50": Jsonb(warnings[-50:])})

    def fail_unfinished(self, error: str) -> list[str]:
        """Fail the jobs this process holds (other processes' jobs are theirs)."""
        with self._lock:
            held = list(self._held)
        failed = []
        for job_id in held:
            if self._fenced(job_id, "status = 'failed', finished_at = clock_timestamp(), "
                            "lease_until = NULL, error = %(e)s", {"e": error}):
                failed.append(job_id)
            self.release(job_id)
        return failed

    # -- inputs ---------------------------------------------------------------------------
    def input(self, job_id: str) -> bytes | None:
        with connection(self.pool) as conn:
            row = conn.execute(sql.SQL("SELECT data FROM {} WHERE job_id = %s").format(
                self.inputs), (job_id,)).fetchone()
        return bytes(row[0]) if row else None

    def drop_input(self, job_id: str) -> None:
        with connection(self.pool) as conn:
            conn.execute(sql.SQL("DELETE FROM {} WHERE job_id = %s").format(self.inputs),
                         (job_id,))
