"""The PostgreSQL catalog schema: its dialect of the shared migration steps.

The version and the steps (numbers, names, descriptions) are
:mod:`ragline.catalog.schema_version`'s, shared with the SQLite catalog; this
module holds PostgreSQL's statements for each step. ``schema_version`` records
every step applied; :func:`migrate` brings a database (empty, or at any earlier
version) to :data:`SCHEMA_VERSION`, each step in its own transaction, all of it
under an advisory lock so that N processes starting at once migrate once. A
database at a *newer* version than this code knows is refused. Tables are the
SQLite catalog's (same names and columns; JSON as ``jsonb``).
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
from psycopg import sql

from ragline.catalog.schema_version import (
    SCHEMA_VERSION,
    check_implemented,
    pending,
    refuse_newer,
)
from ragline.errors import InvalidInput

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "current_version", "migrate"]

#: step number -> statements with ``{s}`` for the schema
MIGRATIONS: dict[int, list[str]] = {
    1: [
        "CREATE TABLE {s}.collections (name text PRIMARY KEY, "
        "metadata jsonb NOT NULL DEFAULT '{{}}', dimension int, embedding_provider text, "
        "embedding_model text, shard text NOT NULL, created_at text NOT NULL, "
        "updated_at text NOT NULL)",
        "CREATE TABLE {s}.retired_shards (shard text PRIMARY KEY, retired_at text NOT NULL)",
    ],
    2: [  # the job queue (claimed with FOR UPDATE SKIP LOCKED, leased, retried)
        "CREATE TABLE {s}.jobs (id text PRIMARY KEY, kind text NOT NULL, "
        "payload jsonb NOT NULL DEFAULT '{{}}', status text NOT NULL "
        "CHECK (status IN ('queued', 'running', 'succeeded', 'failed')), "
        "attempts int NOT NULL DEFAULT 0, max_attempts int NOT NULL DEFAULT 3, "
        "worker text, lease_until timestamptz, "
        "created_at timestamptz NOT NULL DEFAULT clock_timestamp(), "
        "started_at timestamptz, finished_at timestamptz, error text, result jsonb)",
        "CREATE INDEX jobs_ready ON {s}.jobs (created_at) WHERE status = 'queued'",
        "CREATE INDEX jobs_leased ON {s}.jobs (lease_until) WHERE status = 'running'",
    ],
    3: [
        "CREATE TABLE {s}.ingest_sources (collection text NOT NULL, shard text NOT NULL, "
        "tenant text NOT NULL, source_id text NOT NULL, origin text NOT NULL, "
        "source_path text NOT NULL, source_hash text, fingerprint text NOT NULL DEFAULT '', "
        "chunk_ids jsonb NOT NULL DEFAULT '[]', updated_at text NOT NULL, "
        "PRIMARY KEY (collection, shard, tenant, source_id))",
        "ALTER TABLE {s}.jobs ADD COLUMN collection text, ADD COLUMN tenant text, "
        "ADD COLUMN counters jsonb NOT NULL DEFAULT '{{}}', "
        "ADD COLUMN warnings jsonb NOT NULL DEFAULT '[]', ADD COLUMN duration_s float8",
        "CREATE INDEX jobs_by_time ON {s}.jobs (created_at DESC)",
        "CREATE TABLE {s}.job_inputs (job_id text PRIMARY KEY "
        "REFERENCES {s}.jobs (id) ON DELETE CASCADE, data bytea NOT NULL)",
        "CREATE TABLE {s}.api_keys (id text PRIMARY KEY, hash text NOT NULL, "
        "role text NOT NULL, tenant text NOT NULL, name text NOT NULL DEFAULT '', "
        "created_at text NOT NULL, last_used_at text, revoked_at text)",
        "CREATE TABLE {s}.conversations (id text PRIMARY KEY, tenant text NOT NULL, "
        "collection text, topic text NOT NULL DEFAULT '', created_at text NOT NULL, "
        "updated_at text NOT NULL)",
        "CREATE INDEX conversations_by_tenant ON {s}.conversations (tenant, updated_at)",
        "CREATE TABLE {s}.conversation_messages (conversation_id text NOT NULL "
        "REFERENCES {s}.conversations (id) ON DELETE CASCADE, seq int NOT NULL, "
        "role text NOT NULL, content text NOT NULL, meta jsonb NOT NULL DEFAULT '{{}}', "
        "created_at text NOT NULL, PRIMARY KEY (conversation_id, seq))",
        "CREATE TABLE {s}.webhook_deliveries (delivery_id text PRIMARY KEY, "
        "received_at float8 NOT NULL)",
    ],
    4: [
        "ALTER TABLE {s}.ingest_sources ADD COLUMN status text NOT NULL DEFAULT 'ok', "
        "ADD COLUMN created_at text NOT NULL DEFAULT ''",
        "UPDATE {s}.ingest_sources SET created_at = updated_at",
    ],
    5: [
        "CREATE TABLE {s}.connections (id text PRIMARY KEY, kind text NOT NULL, "
        "provider text NOT NULL, options jsonb NOT NULL DEFAULT '{{}}', "
        "secrets jsonb NOT NULL DEFAULT '{{}}', created_at text NOT NULL)",
    ],
    6: [],  # the SQLite catalog takes this catalog's jobs/job_inputs layout; nothing here
}
check_implemented("PostgreSQL", MIGRATIONS)


def current_version(conn: psycopg.Connection[Any], schema: str) -> int:
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL",
                       (f'"{schema}".schema_version',)).fetchone()
    if not row or not row[0]:
        return 0
    got = conn.execute(sql.SQL("SELECT coalesce(max(version), 0) FROM {}.schema_version"
                               ).format(sql.Identifier(schema))).fetchone()
    return int(got[0]) if got else 0


def migrate(dsn: str, schema: str, target: int | None = None) -> int:
    """Apply the missing migrations up to ``target`` (default: the latest); returns the
    version the database is at. Safe to run from many processes at once."""
    if not re.match(r"^[a-z_][a-z0-9_]{0,62}$", schema):
        raise InvalidInput("catalog schema must be a lower-case SQL name")
    target = SCHEMA_VERSION if target is None else target
    s = sql.Identifier(schema)
    with psycopg.connect(dsn, autocommit=True) as conn:
        # a session lock: held across the migrations' own transactions
        conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (f"ragline-migrate:{schema}",))
        try:
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(s))
            conn.execute(sql.SQL(
                "CREATE TABLE IF NOT EXISTS {}.schema_version (version int PRIMARY KEY, "
                "description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
            ).format(s))
            version = current_version(conn, schema)
            refuse_newer(version, "PostgreSQL")
            for step in pending(version, target):
                with conn.transaction():  # a step is whole or absent
                    for statement in MIGRATIONS[step.number]:
                        conn.execute(sql.SQL(statement).format(s=s))
                    conn.execute(sql.SQL("INSERT INTO {}.schema_version (version, description) "
                                         "VALUES (%s, %s)").format(s),
                                 (step.number, f"{step.name}: {step.description}"))
                version = step.number
            return version
        finally:
            conn.execute("SELECT pg_advisory_unlock(hashtext(%s))",
                         (f"ragline-migrate:{schema}",))
