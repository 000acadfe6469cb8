"""The PostgreSQL catalog schema and its migrations.

``schema_version`` records every migration applied; :func:`migrate` brings a
database (empty, or at any earlier version) to :data:`SCHEMA_VERSION`, each
migration in its own transaction, all of it under an advisory lock so that N
processes starting at once migrate once. Tables mirror the SQLite catalog's
(same names and columns; metadata as ``jsonb``) so the two stay one design.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
from psycopg import sql

from ragline.errors import InvalidInput

#: (version, what it adds, statements with ``{s}`` for the schema)
MIGRATIONS: list[tuple[int, str, list[str]]] = [
    (1, "collections and retired shards, as in the SQLite catalog", [
        "CREATE TABLE {s}.collections (name text PRIMARY KEY, "
        "metadata jsonb NOT NULL DEFAULT '{{}}', dimension int, embedding_provider text, "
        "embedding_model text, shard text NOT NULL, created_at text NOT NULL, "
        "updated_at text NOT NULL)",
        "CREATE TABLE {s}.retired_shards (shard text PRIMARY KEY, retired_at text NOT NULL)",
    ]),
    (2, "the job queue (claimed with FOR UPDATE SKIP LOCKED, leased, retried)", [
        "CREATE TABLE {s}.jobs (id text PRIMARY KEY, kind text NOT NULL, "
        "payload jsonb NOT NULL DEFAULT '{{}}', status text NOT NULL "
        "CHECK (status IN ('queued', 'running', 'succeeded', 'failed')), "
        "attempts int NOT NULL DEFAULT 0, max_attempts int NOT NULL DEFAULT 3, "
        "worker text, lease_until timestamptz, "
        "created_at timestamptz NOT NULL DEFAULT clock_timestamp(), "
        "started_at timestamptz, finished_at timestamptz, error text, result jsonb)",
        "CREATE INDEX jobs_ready ON {s}.jobs (created_at) WHERE status = 'queued'",
        "CREATE INDEX jobs_leased ON {s}.jobs (lease_until) WHERE status = 'running'",
    ]),
]
SCHEMA_VERSION = MIGRATIONS[-1][0]


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
            for number, description, statements in MIGRATIONS:
                if number <= version or number > target:
                    continue
                with conn.transaction():  # a migration is whole or absent
                    for statement in statements:
                        conn.execute(sql.SQL(statement).format(s=s))
                    conn.execute(sql.SQL("INSERT INTO {}.schema_version (version, description) "
                                         "VALUES (%s, %s)").format(s), (number, description))
                version = number
            return version
        finally:
            conn.execute("SELECT pg_advisory_unlock(hashtext(%s))",
                         (f"ragline-migrate:{schema}",))
