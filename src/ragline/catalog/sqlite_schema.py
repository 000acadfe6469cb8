"""The SQLite catalog schema: its dialect of the shared migration steps.

The version and the steps are :mod:`ragline.catalog.schema_version`'s, shared
with the PostgreSQL catalog (:mod:`ragline.catalog.pg_schema`), and this module
implements each step for SQLite. :func:`migrate` runs inside the caller's write
transaction (``BEGIN IMMEDIATE``), so the whole migration of a database is
applied or absent (SQLite's DDL is transactional), and records every step in
``schema_version`` like the PostgreSQL catalog does.

Catalogs written before the shared version (no ``schema_version`` table) count
as version 0 whatever they hold: they created their tables with ``CREATE TABLE
IF NOT EXISTS`` and added columns in place, so one may hold any prefix of steps
1 to 5. Those steps are therefore written to be idempotent (create if missing,
add a column if missing); step 6 and later run on a known layout.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime

from ragline.catalog.schema_version import (
    SCHEMA_VERSION,
    check_implemented,
    pending,
    refuse_newer,
)

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "current_version", "migrate"]


def _columns(db: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in db.execute(f"PRAGMA table_info({table})")]


def _exists(db: sqlite3.Connection, table: str) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?",
                      (table,)).fetchone() is not None


def _step1(db: sqlite3.Connection) -> None:
    db.execute("""CREATE TABLE IF NOT EXISTS collections (
        name TEXT PRIMARY KEY,
        metadata TEXT NOT NULL DEFAULT '{}',
        dimension INTEGER,
        embedding_provider TEXT,
        embedding_model TEXT,
        shard TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    )""")
    db.execute("""CREATE TABLE IF NOT EXISTS retired_shards (
        shard TEXT PRIMARY KEY,
        retired_at TEXT NOT NULL
    )""")


def _step2(db: sqlite3.Connection) -> None:
    """The embedded catalog's job rows as they were until step 6."""
    if _exists(db, "jobs"):
        return  # a database that got step 6 some other way (never expected)
    db.execute("""CREATE TABLE IF NOT EXISTS ingest_jobs (
        id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        trigger TEXT NOT NULL,
        status TEXT NOT NULL,
        mode TEXT NOT NULL,
        collection TEXT NOT NULL,
        tenant TEXT NOT NULL,
        path TEXT,
        restricted_paths TEXT,
        counters TEXT NOT NULL DEFAULT '{}',
        warnings TEXT NOT NULL DEFAULT '[]',
        result TEXT,
        created_at TEXT NOT NULL,
        started_at TEXT,
        finished_at TEXT,
        duration_s REAL,
        error TEXT
    )""")
    db.execute("CREATE INDEX IF NOT EXISTS ingest_jobs_by_time ON ingest_jobs(created_at)")


def _step3(db: sqlite3.Connection) -> None:
    """Ingestion state (its step-3 columns), keys, conversations, deliveries. SQLite kept
    upload bytes in files until step 6, which adds ``job_inputs``."""
    db.execute("""CREATE TABLE IF NOT EXISTS ingest_sources (
        collection TEXT NOT NULL,
        shard TEXT NOT NULL,
        tenant TEXT NOT NULL,
        source_id TEXT NOT NULL,
        origin TEXT NOT NULL,
        source_path TEXT NOT NULL,
        source_hash TEXT,
        fingerprint TEXT NOT NULL DEFAULT '',
        chunk_ids TEXT NOT NULL DEFAULT '[]',
        updated_at TEXT NOT NULL,
        PRIMARY KEY (collection, shard, tenant, source_id)
    )""")
    db.execute("""CREATE TABLE IF NOT EXISTS api_keys (
        id TEXT PRIMARY KEY,
        hash TEXT NOT NULL,
        role TEXT NOT NULL,
        tenant TEXT NOT NULL,
        name TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL,
        last_used_at TEXT,
        revoked_at TEXT
    )""")
    db.execute("""CREATE TABLE IF NOT EXISTS conversations (
        id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL,
        collection TEXT,
        topic TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    )""")
    db.execute("CREATE INDEX IF NOT EXISTS conversations_by_tenant "
               "ON conversations(tenant, updated_at)")
    db.execute("""CREATE TABLE IF NOT EXISTS conversation_messages (
        conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        meta TEXT NOT NULL DEFAULT '{}',
        created_at TEXT NOT NULL,
        PRIMARY KEY (conversation_id, seq)
    )""")
    db.execute("""CREATE TABLE IF NOT EXISTS webhook_deliveries (
        delivery_id TEXT PRIMARY KEY,
        received_at REAL NOT NULL
    )""")


def _step4(db: sqlite3.Connection) -> None:
    have = _columns(db, "ingest_sources")
    if "status" not in have:
        db.execute("ALTER TABLE ingest_sources ADD COLUMN status TEXT NOT NULL DEFAULT 'ok'")
    if "created_at" not in have:
        db.execute("ALTER TABLE ingest_sources ADD COLUMN created_at TEXT NOT NULL DEFAULT ''")
        db.execute("UPDATE ingest_sources SET created_at=updated_at")


def _step5(db: sqlite3.Connection) -> None:
    db.execute("""CREATE TABLE IF NOT EXISTS connections (
        id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        provider TEXT NOT NULL,
        options TEXT NOT NULL DEFAULT '{}',
        secrets TEXT NOT NULL DEFAULT '{}',
        created_at TEXT NOT NULL
    )""")


def _step6(db: sqlite3.Connection) -> None:
    """``ingest_jobs`` becomes ``jobs`` with the queue's columns (trigger, mode, path and
    restricted paths move into ``payload``, as the PostgreSQL catalog keeps them; rows
    keep their order), and upload bytes wait in ``job_inputs`` instead of files."""
    db.execute("""CREATE TABLE jobs (
        id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        payload TEXT NOT NULL DEFAULT '{}',
        status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed')),
        attempts INTEGER NOT NULL DEFAULT 0,
        max_attempts INTEGER NOT NULL DEFAULT 1,
        worker TEXT,
        lease_until TEXT,
        created_at TEXT NOT NULL,
        started_at TEXT,
        finished_at TEXT,
        error TEXT,
        result TEXT,
        collection TEXT,
        tenant TEXT,
        counters TEXT NOT NULL DEFAULT '{}',
        warnings TEXT NOT NULL DEFAULT '[]',
        duration_s REAL
    )""")
    db.execute("CREATE INDEX jobs_by_time ON jobs(created_at)")
    db.execute("""CREATE TABLE job_inputs (
        job_id TEXT PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,
        data BLOB NOT NULL
    )""")
    if _exists(db, "ingest_jobs"):
        db.execute(
            "INSERT INTO jobs (id, kind, payload, status, attempts, max_attempts, created_at, "
            "started_at, finished_at, error, result, collection, tenant, counters, warnings, "
            "duration_s) SELECT id, kind, json_object('trigger', trigger, 'mode', mode, "
            "'path', path, 'restricted_paths', json(restricted_paths)), "
            "CASE WHEN status IN ('queued', 'running', 'succeeded') THEN status "
            "ELSE 'failed' END, CASE WHEN started_at IS NULL THEN 0 ELSE 1 END, 1, "
            "created_at, started_at, finished_at, error, result, collection, tenant, "
            "counters, warnings, duration_s FROM ingest_jobs ORDER BY rowid")
        db.execute("DROP TABLE ingest_jobs")


MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {
    1: _step1, 2: _step2, 3: _step3, 4: _step4, 5: _step5, 6: _step6,
}
check_implemented("SQLite", MIGRATIONS)


def current_version(db: sqlite3.Connection) -> int:
    """The recorded version; 0 for an empty database or one from before versioning."""
    if not _exists(db, "schema_version"):
        return 0
    row = db.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()
    return int(row[0])


def migrate(db: sqlite3.Connection, target: int | None = None) -> int:
    """Apply the missing steps up to ``target`` (default: the latest) on ``db``, which
    must be inside a write transaction; returns the version the database is at."""
    db.execute("""CREATE TABLE IF NOT EXISTS schema_version (
        version INTEGER PRIMARY KEY,
        description TEXT NOT NULL,
        applied_at TEXT NOT NULL
    )""")
    version = current_version(db)
    refuse_newer(version, "SQLite")
    for step in pending(version, target):
        MIGRATIONS[step.number](db)
        db.execute("INSERT INTO schema_version (version, description, applied_at) "
                   "VALUES (?, ?, ?)", (step.number, f"{step.name}: {step.description}",
                                        datetime.now(UTC).isoformat()))
        version = step.number
    return version
