"""A job queue in PostgreSQL: any number of worker processes, on any machines.

* **Claiming** is one statement: the oldest claimable row is locked with
  ``FOR UPDATE SKIP LOCKED`` and marked ``running`` for this worker, so two
  workers never take the same job (a row locked by one claim is skipped by the
  others, not waited for).
* **Leases**: a claim holds the job until ``lease_until``; the running worker
  extends it (:meth:`JobQueue.heartbeat`) well before it ends. A worker that dies
  stops extending, and once the lease is over the job is claimable again — it is
  *retried*, up to ``max_attempts`` claims; after that :meth:`JobQueue.reap` fails it.
* **Fencing**: heartbeat, complete and fail only touch a row still ``running`` for
  the same worker *and the same attempt*, so a worker that lost its lease (it
  stalled past it and another worker took over) cannot overwrite the new run's
  outcome; it learns so from the ``False`` they return.

So a job's *outcome* is recorded once. Its side effects can run twice only if a
live worker stalls for longer than the lease (ingestion is incremental and
idempotent, so a re-run converges on the same state).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from ragline.catalog.pg_pool import connection


@dataclass(frozen=True, slots=True)
class Claim:
    """A job a worker holds: run it, heartbeat, then complete or fail it."""

    id: str
    kind: str
    payload: dict[str, Any]
    attempt: int
    worker: str


class JobQueue:
    def __init__(self, pool: ConnectionPool[Any], schema: str, lease_s: float = 30.0) -> None:
        self.pool = pool
        self.table = sql.Identifier(schema, "jobs")
        self.lease_s = lease_s

    def enqueue(self, kind: str, payload: dict[str, Any], max_attempts: int = 3) -> str:
        job_id = uuid.uuid4().hex
        with connection(self.pool) as conn:
            conn.execute(sql.SQL("INSERT INTO {} (id, kind, payload, status, max_attempts) "
                                 "VALUES (%s, %s, %s, 'queued', %s)").format(self.table),
                         (job_id, kind, Jsonb(payload), max_attempts))
        return job_id

    def claim(self, worker: str) -> Claim | None:
        """Take the oldest queued job, or a running one whose lease ran out (a dead
        worker's) while it has attempts left; None when there is nothing to take."""
        with connection(self.pool) as conn:
            row = conn.execute(sql.SQL(
                "UPDATE {t} SET status = 'running', attempts = attempts + 1, worker = %(w)s, "
                "lease_until = clock_timestamp() + make_interval(secs => %(lease)s), "
                "started_at = clock_timestamp(), error = NULL "
                "WHERE id = (SELECT id FROM {t} WHERE status = 'queued' OR (status = 'running' "
                "AND lease_until < clock_timestamp() AND attempts < max_attempts) "
                "ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED) "
                "RETURNING id, kind, payload, attempts").format(t=self.table),
                {"w": worker, "lease": self.lease_s}).fetchone()
        if row is None:
            return None
        return Claim(row[0], row[1], row[2] or {}, int(row[3]), worker)

    def _fenced(self, claim: Claim, assignments: str, params: dict[str, Any]) -> bool:
        with connection(self.pool) as conn:
            cur = conn.execute(sql.SQL(
                "UPDATE {t} SET " + assignments + " WHERE id = %(id)s AND worker = %(w)s "
                "AND attempts = %(a)s AND status = 'running'").format(t=self.table),
                {**params, "id": claim.id, "w": claim.worker, "a": claim.attempt})
            return bool(cur.rowcount == 1)

    def heartbeat(self, claim: Claim) -> bool:
        """Extend the lease; False when the job is no longer this worker's."""
        return self._fenced(claim, "lease_until = clock_timestamp() + "
                            "make_interval(secs => %(lease)s)", {"lease": self.lease_s})

    def complete(self, claim: Claim, result: dict[str, Any] | None = None) -> bool:
        return self._fenced(claim, "status = 'succeeded', finished_at = clock_timestamp(), "
                            "lease_until = NULL, result = %(r)s",
                            {"r": Jsonb(result) if result is not None else None})

    def fail(self, claim: Claim, error: str, retry: bool = False) -> bool:
        """Record a failure; with ``retry`` the job is queued again while it has attempts."""
        return self._fenced(
            claim, "status = CASE WHEN %(retry)s AND attempts < max_attempts THEN 'queued' "
            "ELSE 'failed' END, finished_at = clock_timestamp(), lease_until = NULL, "
            "error = %(e)s", {"retry": retry, "e": error[:2000]})

    def reap(self) -> int:
        """Fail jobs whose lease ran out with no attempts left (their workers died)."""
        with connection(self.pool) as conn:
            return int(conn.execute(sql.SQL(
                "UPDATE {} SET status = 'failed', finished_at = clock_timestamp(), "
                "error = 'worker lost (lease expired) after the last attempt' "
                "WHERE status = 'running' AND lease_until < clock_timestamp() "
                "AND attempts >= max_attempts").format(self.table)).rowcount)

    def get(self, job_id: str) -> dict[str, Any] | None:
        with connection(self.pool) as conn, conn.cursor(row_factory=dict_row) as cur:
            row: dict[str, Any] | None = cur.execute(
                sql.SQL("SELECT * FROM {} WHERE id = %s").format(self.table), (job_id,)
            ).fetchone()
        return row

    def pending(self) -> int:
        """Jobs not finished yet (queued or running)."""
        with connection(self.pool) as conn:
            row = conn.execute(sql.SQL("SELECT count(*) FROM {} WHERE status IN "
                                       "('queued', 'running')").format(self.table)).fetchone()
        return int(row[0]) if row else 0
