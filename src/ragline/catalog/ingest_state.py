"""Ingestion state and ingestion jobs, in the catalog's SQLite database.

Two tables beside ``collections``:

* ``ingest_sources`` — per (collection, shard, tenant, source): the source's
  path, the SHA-256 of its bytes and its chunk ids in order. This is what makes
  runs incremental. Rows carry the shard key they describe, so a collection
  that was emptied, recreated or deleted and re-created (a new shard) simply
  has no state and is rebuilt, instead of "unchanged" files pointing at chunks
  that are gone. A row with ``source_hash`` NULL is a first write in flight:
  it exists so that a crash before the write finished is still noticed
  (file changed → rewritten; file gone → its chunks deleted). ``status`` is
  ``modified`` when chunks of the source were deleted outside ingestion (a
  documents delete): the row then lists only the chunks that are left and is
  never "unchanged", so the next run or re-upload writes the source again.
* ``jobs`` — one row per ingestion run with its counters, so progress and
  results survive the request that started them (and the process). Same layout
  as the PostgreSQL catalog's queue rows (schema step 6): trigger, mode, path and
  restricted paths are the ``payload``; the queue's columns (attempts, worker,
  lease) stay at their defaults here, where jobs run in the process that made
  them. An upload's bytes wait in ``job_inputs``, written in the same
  transaction as the job row.

Both tables are created and migrated by the catalog
(:mod:`ragline.catalog.sqlite_schema`).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragline.catalog.sqlite import Catalog, now_iso

COUNTERS = (
    "files_total", "files_seen", "files_changed", "files_skipped", "files_deleted", "files_failed",
    "chunks_created", "chunks_updated", "chunks_deleted", "texts_embedded", "embedding_calls",
)
"""Job counters, always present in a job (0 until the run gets there)."""

JOB_STATUSES = ("queued", "running", "succeeded", "failed")

@dataclass(slots=True)
class SourceState:
    source_id: str
    origin: str
    source_path: str
    source_hash: str | None
    chunk_ids: list[str]
    fingerprint: str = ""
    updated_at: str = ""
    status: str = "ok"
    created_at: str = ""

    @property
    def state(self) -> str:
        """``ingested`` (state and store agree), ``pending`` (a first write that has not
        finished) or ``modified`` (chunks deleted outside ingestion)."""
        if self.source_hash is None:
            return "pending"
        return "modified" if self.status == "modified" else "ingested"


@dataclass(frozen=True, slots=True)
class StateRow:
    """One ``ingest_sources`` row with its keys (for ``ragline verify``)."""

    collection: str
    shard: str
    tenant: str
    source: SourceState


@dataclass(slots=True)
class Job:
    id: str
    kind: str
    trigger: str
    status: str
    mode: str
    collection: str
    tenant: str
    path: str | None
    restricted_paths: list[str] | None
    counters: dict[str, int]
    warnings: list[str]
    result: dict[str, Any] | None
    created_at: str
    started_at: str | None = None
    finished_at: str | None = None
    duration_s: float | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class IngestState:
    """Source state rows; every write is one catalog transaction.

    :meth:`writing` is the in-process lock that orders writes of one (collection,
    tenant): an ingestion write (upsert, stale delete, commit) and a documents
    delete (mark, delete, settle) never interleave, so neither can commit a state
    that the other has just made untrue.
    """

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._locks: dict[tuple[str, str], threading.RLock] = {}
        self._guard = threading.Lock()  # the table: the catalog's migrations

    @contextmanager
    def writing(self, collection: str, tenant: str) -> Iterator[None]:
        """Hold the write lock of (collection, tenant) (re-entrant)."""
        with self._guard:
            lock = self._locks.setdefault((collection, tenant), threading.RLock())
        with lock:
            yield

    @staticmethod
    def _row(row: sqlite3.Row) -> SourceState:
        return SourceState(row["source_id"], row["origin"], row["source_path"],
                           row["source_hash"], json.loads(row["chunk_ids"]),
                           row["fingerprint"], row["updated_at"], row["status"],
                           row["created_at"] or row["updated_at"])

    def page(self, collection: str, shard: str, tenant: str, limit: int,
             offset: int) -> tuple[list[SourceState], int]:
        """Sources ordered by id, and how many there are in all."""
        db = self.catalog.read()
        key = (collection, shard, tenant)
        total = db.execute("SELECT COUNT(*) FROM ingest_sources WHERE collection=? AND "
                           "shard=? AND tenant=?", key).fetchone()[0]
        rows = db.execute(
            "SELECT * FROM ingest_sources WHERE collection=? AND shard=? AND tenant=? "
            "ORDER BY source_id LIMIT ? OFFSET ?", (*key, limit, offset)).fetchall()
        return [self._row(r) for r in rows], int(total)

    def rows(self) -> list[StateRow]:
        """Every row of every collection, shard and tenant."""
        rows = self.catalog.read().execute(
            "SELECT * FROM ingest_sources ORDER BY collection, tenant, source_id").fetchall()
        return [StateRow(r["collection"], r["shard"], r["tenant"], self._row(r)) for r in rows]

    def sources(self, collection: str, shard: str, tenant: str) -> dict[str, SourceState]:
        rows = self.catalog.read().execute(
            "SELECT * FROM ingest_sources WHERE collection=? AND shard=? AND tenant=?",
            (collection, shard, tenant)).fetchall()
        return {r["source_id"]: self._row(r) for r in rows}

    def any(self, collection: str, shard: str, tenant: str) -> bool:
        """Whether the tenant has any source in this shard (one indexed lookup)."""
        return self.catalog.read().execute(
            "SELECT 1 FROM ingest_sources WHERE collection=? AND shard=? AND tenant=? LIMIT 1",
            (collection, shard, tenant)).fetchone() is not None

    def some(self, collection: str, shard: str, tenant: str,
             source_ids: set[str]) -> dict[str, SourceState]:
        """The rows of these sources (those that exist)."""
        out: dict[str, SourceState] = {}
        ids = sorted(source_ids)
        db = self.catalog.read()
        for start in range(0, len(ids), 500):
            part = ids[start:start + 500]
            rows = db.execute(
                "SELECT * FROM ingest_sources WHERE collection=? AND shard=? AND tenant=? "
                f"AND source_id IN ({','.join('?' * len(part))})",
                (collection, shard, tenant, *part)).fetchall()
            out.update({r["source_id"]: self._row(r) for r in rows})
        return out

    def source(self, collection: str, shard: str, tenant: str,
               source_id: str) -> SourceState | None:
        row = self.catalog.read().execute(
            "SELECT * FROM ingest_sources WHERE collection=? AND shard=? AND tenant=? "
            "AND source_id=?", (collection, shard, tenant, source_id)).fetchone()
        return self._row(row) if row else None

    def begin(self, collection: str, shard: str, tenant: str,
              entries: list[SourceState]) -> None:
        """Record sources about to be written for the first time (``source_hash`` NULL).

        Rows that already exist are left alone: their old hash keeps them
        "changed" until :meth:`commit`, which is all a crash needs.
        """
        ts = now_iso()
        with self.catalog.tx() as db:
            db.executemany(
                "INSERT OR IGNORE INTO ingest_sources (collection, shard, tenant, source_id, "
                "origin, source_path, source_hash, fingerprint, chunk_ids, updated_at, "
                "created_at) VALUES (?,?,?,?,?,?,NULL,'','[]',?,?)",
                [(collection, shard, tenant, e.source_id, e.origin, e.source_path, ts, ts)
                 for e in entries])

    def commit(self, collection: str, shard: str, tenant: str,
               entries: list[SourceState]) -> None:
        """Settle sources after their chunks were written and stale ones deleted (the
        row is clean again; its first ``created_at`` is kept)."""
        ts = now_iso()
        with self.catalog.tx() as db:
            db.executemany(
                "INSERT INTO ingest_sources (collection, shard, tenant, source_id, origin, "
                "source_path, source_hash, fingerprint, chunk_ids, updated_at, status, "
                "created_at) VALUES (?,?,?,?,?,?,?,?,?,?,'ok',?) "
                "ON CONFLICT (collection, shard, tenant, source_id) DO UPDATE SET "
                "origin=excluded.origin, source_path=excluded.source_path, "
                "source_hash=excluded.source_hash, fingerprint=excluded.fingerprint, "
                "chunk_ids=excluded.chunk_ids, updated_at=excluded.updated_at, status='ok'",
                [(collection, shard, tenant, e.source_id, e.origin, e.source_path,
                  e.source_hash, e.fingerprint, json.dumps(e.chunk_ids), ts, ts)
                 for e in entries])

    def retag(self, collection: str, shard: str, tenant: str, source_ids: list[str],
              origin: str) -> None:
        """Give unchanged sources a new origin (their tree was moved; chunks are equal)."""
        with self.catalog.tx() as db:
            db.executemany(
                "UPDATE ingest_sources SET origin=? WHERE collection=? AND shard=? AND "
                "tenant=? AND source_id=?",
                [(origin, collection, shard, tenant, s) for s in source_ids])

    def mark_modified(self, collection: str, shard: str, tenant: str,
                      source_ids: list[str]) -> None:
        """Before chunks of these sources are deleted outside ingestion: from here on the
        sources are never "unchanged", whatever happens to the delete."""
        ts = now_iso()
        with self.catalog.tx() as db:
            db.executemany(
                "UPDATE ingest_sources SET status='modified', updated_at=? WHERE "
                "collection=? AND shard=? AND tenant=? AND source_id=? AND "
                "source_hash IS NOT NULL",
                [(ts, collection, shard, tenant, s) for s in source_ids])

    def unmark(self, collection: str, shard: str, tenant: str, source_ids: list[str]) -> None:
        """Undo :meth:`mark_modified` for sources a delete did not touch after all."""
        with self.catalog.tx() as db:
            db.executemany(
                "UPDATE ingest_sources SET status='ok' WHERE collection=? AND shard=? AND "
                "tenant=? AND source_id=?",
                [(collection, shard, tenant, s) for s in source_ids])

    def settle(self, collection: str, shard: str, tenant: str,
               remaining: dict[str, list[str]]) -> None:
        """After such a delete: each source lists the chunks it has left; one with none
        left has no state any more (re-ingesting it writes it as new)."""
        ts = now_iso()
        with self.catalog.tx() as db:
            for source_id, ids in remaining.items():
                key = (collection, shard, tenant, source_id)
                if ids:
                    db.execute(
                        "UPDATE ingest_sources SET chunk_ids=?, updated_at=?, status="
                        "'modified' WHERE collection=? AND shard=? AND tenant=? AND "
                        "source_id=?", (json.dumps(ids), ts, *key))
                else:
                    db.execute("DELETE FROM ingest_sources WHERE collection=? AND shard=? "
                               "AND tenant=? AND source_id=?", key)

    def drop_tenant(self, collection: str, shard: str, tenant: str) -> int:
        """Every row of one tenant in one shard (its documents were all deleted)."""
        with self.catalog.tx() as db:
            return db.execute("DELETE FROM ingest_sources WHERE collection=? AND shard=? AND "
                              "tenant=?", (collection, shard, tenant)).rowcount

    def drop_rows(self, rows: list[StateRow]) -> None:
        with self.catalog.tx() as db:
            db.executemany(
                "DELETE FROM ingest_sources WHERE collection=? AND shard=? AND tenant=? AND "
                "source_id=?", [(r.collection, r.shard, r.tenant, r.source.source_id)
                                for r in rows])

    def drop(self, collection: str, shard: str, tenant: str, source_ids: list[str]) -> None:
        with self.catalog.tx() as db:
            db.executemany(
                "DELETE FROM ingest_sources WHERE collection=? AND shard=? AND tenant=? "
                "AND source_id=?", [(collection, shard, tenant, s) for s in source_ids])

    def purge_stale(self, live: dict[str, str]) -> int:
        """Delete rows of shards that are no longer a collection's current shard."""
        rows = self.catalog.read().execute(
            "SELECT DISTINCT collection, shard FROM ingest_sources").fetchall()
        stale = [(r[0], r[1]) for r in rows if live.get(r[0]) != r[1]]
        if stale:
            with self.catalog.tx() as db:
                db.executemany("DELETE FROM ingest_sources WHERE collection=? AND shard=?",
                               stale)
        return len(stale)


class JobTable:
    """``jobs`` rows: created queued, moved through running to a final status.

    An upload or text waits for its job in ``job_inputs``, written in the same
    transaction as the row. ``inputs_dir`` is where ragline before catalog schema 6
    kept them as files (removed by :meth:`drop_inputs`)."""

    def __init__(self, catalog: Catalog, inputs_dir: Path | None = None) -> None:
        self.catalog = catalog
        self.inputs_dir = inputs_dir or catalog.path.parent / "uploads"

    @staticmethod
    def _row(row: sqlite3.Row) -> Job:
        counters = {k: 0 for k in COUNTERS} | json.loads(row["counters"])
        p = json.loads(row["payload"] or "{}")
        return Job(
            id=row["id"], kind=row["kind"], trigger=p.get("trigger", "api"),
            status=row["status"], mode=p.get("mode", "incremental"),
            collection=row["collection"] or "", tenant=row["tenant"] or "",
            path=p.get("path"), restricted_paths=p.get("restricted_paths"),
            counters=counters, warnings=json.loads(row["warnings"]),
            result=json.loads(row["result"]) if row["result"] else None,
            created_at=row["created_at"], started_at=row["started_at"],
            finished_at=row["finished_at"], duration_s=row["duration_s"], error=row["error"],
        )

    def create(self, *, kind: str, trigger: str, mode: str, collection: str, tenant: str,
               path: str | None, restricted_paths: list[str] | None = None,
               data: bytes | None = None) -> Job:
        job_id = uuid.uuid4().hex
        payload = {"trigger": trigger, "mode": mode, "path": path,
                   "restricted_paths": restricted_paths}
        with self.catalog.tx() as db:
            db.execute(
                "INSERT INTO jobs (id, kind, payload, status, collection, tenant, created_at) "
                "VALUES (?,?,?,?,?,?,?)",
                (job_id, kind, json.dumps(payload), "queued", collection, tenant, now_iso()))
            if data is not None:
                db.execute("INSERT INTO job_inputs (job_id, data) VALUES (?, ?)",
                           (job_id, data))
        job = self.get(job_id)
        assert job is not None
        return job

    def input(self, job_id: str) -> bytes | None:
        row = self.catalog.read().execute("SELECT data FROM job_inputs WHERE job_id=?",
                                          (job_id,)).fetchone()
        return bytes(row[0]) if row else None

    def drop_input(self, job_id: str) -> None:
        with self.catalog.tx() as db:
            db.execute("DELETE FROM job_inputs WHERE job_id=?", (job_id,))

    def drop_inputs(self) -> None:
        """Every waiting input (at start-up, when no job of this process can use them),
        and the files an older ragline kept them in."""
        with self.catalog.tx() as db:
            db.execute("DELETE FROM job_inputs")
        shutil.rmtree(self.inputs_dir, ignore_errors=True)

    def get(self, job_id: str) -> Job | None:
        row = self.catalog.read().execute(
            "SELECT * FROM jobs WHERE id=?", (job_id,)).fetchone()
        return self._row(row) if row else None

    def recent(self, limit: int = 20, collection: str | None = None,
               tenant: str | None = None) -> list[Job]:
        sql = "SELECT * FROM jobs"
        conds: list[str] = []
        args: tuple[Any, ...] = ()
        if collection is not None:
            conds.append("collection=?")
            args += (collection,)
        if tenant is not None:
            conds.append("tenant=?")
            args += (tenant,)
        if conds:
            sql += " WHERE " + " AND ".join(conds)
        sql += " ORDER BY created_at DESC, rowid DESC LIMIT ?"
        return [self._row(r) for r in self.catalog.read().execute(sql, (*args, limit))]

    def start(self, job_id: str) -> None:
        with self.catalog.tx() as db:
            db.execute("UPDATE jobs SET status='running', attempts=attempts+1, started_at=? "
                       "WHERE id=?", (now_iso(), job_id))

    def progress(self, job_id: str, counters: dict[str, int], warnings: list[str]) -> None:
        with self.catalog.tx() as db:
            db.execute("UPDATE jobs SET counters=?, warnings=? WHERE id=?",
                       (json.dumps(counters), json.dumps(warnings[-50:]), job_id))

    def finish(self, job_id: str, status: str, counters: dict[str, int], warnings: list[str],
               duration_s: float, error: str | None = None,
               result: dict[str, Any] | None = None) -> None:
        with self.catalog.tx() as db:
            db.execute(
                "UPDATE jobs SET status=?, counters=?, warnings=?, finished_at=?, "
                "duration_s=?, error=?, result=? WHERE id=?",
                (status, json.dumps(counters), json.dumps(warnings[-50:]), now_iso(),
                 round(duration_s, 3), error, json.dumps(result) if result else None, job_id))

    def fail_unfinished(self, error: str) -> list[str]:
        """Mark every ``queued``/``running`` job failed (they belong to a dead process)."""
        with self.catalog.tx() as db:
            ids = [r[0] for r in db.execute(
                "SELECT id FROM jobs WHERE status IN ('queued','running')")]
            db.execute(
                "UPDATE jobs SET status='failed', error=?, finished_at=? "
                "WHERE status IN ('queued','running')", (error, now_iso()))
        return ids
