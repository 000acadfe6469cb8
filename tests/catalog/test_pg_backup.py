"""``ragline backup`` / ``restore`` on the scaled-out setup (PostgreSQL catalog, pgvector
store), on a real PostgreSQL: catalog rows as JSON plus every collection in the export
format, restored into an empty catalog and store with nothing lost that a restore keeps."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragline.catalog.conversations import Message
from ragline.catalog.schema_version import SCHEMA_VERSION
from ragline.core.principal import Principal
from ragline.errors import Conflict, DataFormatError, InvalidInput
from ragline.facade import IngestSource, Ragline, SearchRequest
from ragline.services.corpus.documents import DocumentInput
from tests.ingestion_support import copy_book, fake_settings


@pytest.fixture(scope="module")
def dsn() -> Iterator[str]:
    from ragline.testing.postgres import postgres_server

    with postgres_server() as uri:
        yield uri


def pg_settings(tmp_path: Path, dsn: str, schema: str) -> Any:
    return fake_settings(
        tmp_path, catalog="postgres",
        catalog_options={"dsn": dsn, "db_schema": schema, "job_lease_s": 2.0,
                         "worker_poll_s": 0.05},
        store="pgvector", store_options={"dsn": dsn, "db_schema": f"{schema}_v"})


def fresh(tmp_path: Path, dsn: str) -> Ragline:
    return Ragline(pg_settings(tmp_path, dsn, f"b_{uuid.uuid4().hex[:8]}")).start()


def test_backup_and_restore_into_an_empty_database(tmp_path: Path, dsn: str) -> None:
    src = fresh(tmp_path, dsn)
    me = src.owner()
    book = copy_book(tmp_path)
    try:
        job = src.ingestion.submit(me, IngestSource("directory", path=str(book)), wait=True).job
        assert job is not None and job.status == "succeeded"
        src.collections.create(me, "notes", {"team": "x"})
        acme = Principal("acme")
        src.documents.add(acme, "notes", [DocumentInput("acme's only note", {"n": 1},
                                                        [0.5] * 8, "n1")])
        _, key = src.keys.create(me, "user", "acme", "k")
        conv = src.services.answers.conversations.create("acme", "notes")
        src.services.answers.conversations.append("acme", conv.id, [Message("user", "hi")],
                                                  topic="t")
        src.services.tables.connections.add("staging", "stores", "qdrant",
                                            {"url": "http://q:6333"}, {"api_key": "s3"})
        before = src.search.query_sync(me, SearchRequest(collection="book", query="soft grippers",
                                                   limit=3)).hits
        # every row, connection secrets included (they are left out unless asked for)
        manifest = src.admin.backup(me, tmp_path / "bk", include_secrets=True)
    finally:
        src.close()
    assert manifest["catalog_schema_version"] == SCHEMA_VERSION
    assert manifest["collections"] == ["book", "notes"]
    assert manifest["documents"]["notes"] == {"acme": 1, "default": 0}  # acme named by rows
    assert {"catalog.json", "collections.jsonl", "backup.json"} <= {
        p.name for p in (tmp_path / "bk").iterdir()}

    dst = fresh(tmp_path, dsn)
    try:
        got = dst.admin.restore_catalog(dst.owner(), tmp_path / "bk")
        assert got["restored"]["rows"]["api_keys"] == 1
        assert got["restored"]["rows"]["ingest_sources"] == 6
        me = dst.owner()
        assert [c.name for c in dst.collections.all(me)] == ["book", "notes"]
        assert dst.collections.get(me, "notes").metadata == {"team": "x"}
        after = dst.search.query_sync(me, SearchRequest(collection="book", query="soft grippers",
                                                  limit=3)).hits
        assert [h.id for h in after] == [h.id for h in before]  # same vectors, same ranking
        assert [d.id for d in dst.documents.page(Principal("acme"), "notes").records] == ["n1"]
        verified = dst.services.auth.keys.verify(key)  # the same key still works
        assert verified is not None and verified.tenant == "acme"
        restored = dst.services.answers.conversations.get("acme", conv.id)
        assert (restored.topic, [m.content for m in restored.messages]) == ("t", ["hi"])
        conn = dst.services.tables.connections.get("staging")
        assert conn is not None and conn.secrets == {"api_key": "s3"}
        assert [j.id for j in dst.ingestion.jobs(me, limit=5)] == [job.id]  # job history too
        # the ingestion state moved to the new shard: the same directory is unchanged
        again = dst.ingestion.submit(me, IngestSource("directory", path=str(book)), wait=True).job
        assert again is not None and again.counters["files_skipped"] == 6
        assert again.counters["files_changed"] == 0
        with pytest.raises(Conflict, match="not empty"):  # never over existing data
            dst.admin.restore_catalog(me, tmp_path / "bk")
    finally:
        dst.close()


def test_a_backup_from_a_newer_schema_or_of_another_kind_is_refused(tmp_path: Path,
                                                                    dsn: str) -> None:
    rl = fresh(tmp_path, dsn)
    try:
        manifest = rl.admin.backup(rl.owner(), tmp_path / "bk")
        with pytest.raises(InvalidInput, match="not empty"):
            rl.admin.backup(rl.owner(), tmp_path / "bk")
        bumped = {**manifest, "catalog_schema_version": SCHEMA_VERSION + 1}
        (tmp_path / "bk" / "backup.json").write_text(json.dumps(bumped))
        with pytest.raises(DataFormatError, match=f"version {SCHEMA_VERSION + 1}"):
            rl.admin.restore_catalog(rl.owner(), tmp_path / "bk")
        (tmp_path / "other").mkdir()
        (tmp_path / "other" / "backup.json").write_text(json.dumps({"shards": []}))
        with pytest.raises(InvalidInput, match="shared catalog"):
            rl.admin.restore_catalog(rl.owner(), tmp_path / "other")
    finally:
        rl.close()


def test_the_cli_backs_up_and_restores_the_postgres_setup(tmp_path: Path, dsn: str,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    from typer.testing import CliRunner

    from ragline.cli.main import app

    src = fresh(tmp_path, dsn)
    src.collections.create(src.owner(), "notes", {"a": 1})
    schema = src.settings.catalog_options.db_schema
    src.close()
    runner = CliRunner()

    def env(s: str) -> None:
        monkeypatch.setenv("RAGLINE_CATALOG", "postgres")
        monkeypatch.setenv("RAGLINE_CATALOG_OPTIONS", json.dumps({"dsn": dsn, "db_schema": s}))
        monkeypatch.setenv("RAGLINE_STORE", "pgvector")
        monkeypatch.setenv("RAGLINE_STORE_OPTIONS",
                           json.dumps({"dsn": dsn, "db_schema": f"{s}_v"}))
        monkeypatch.setenv("RAGLINE_DEFAULT_EMBEDDER", "fake")

    env(schema)
    done = runner.invoke(app, ["backup", str(tmp_path / "bk"), "--data-dir",
                               str(tmp_path / "d1")])
    assert done.exit_code == 0, done.output
    assert "1 collection(s)" in done.output
    target = f"r_{uuid.uuid4().hex[:8]}"
    env(target)
    done = runner.invoke(app, ["restore", str(tmp_path / "bk"), "--data-dir",
                               str(tmp_path / "d2")])
    assert done.exit_code == 0, done.output
    assert "into the PostgreSQL catalog" in done.output
    again = runner.invoke(app, ["restore", str(tmp_path / "bk"), "--data-dir",
                                str(tmp_path / "d2")])
    assert again.exit_code == 2 and "not empty" in again.output  # refused
    check = Ragline(pg_settings(tmp_path, dsn, target)).start()
    try:
        assert check.collections.get(check.owner(), "notes").metadata == {"a": 1}
    finally:
        check.close()
