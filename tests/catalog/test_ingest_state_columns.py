"""``ingest_sources`` columns added by issue 12 (``status``, ``created_at``) appear in place
in a catalog written before them, and the rows already there read as clean sources."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ragline.catalog.ingest_state import IngestState, SourceState
from ragline.catalog.sqlite import Catalog

OLD = """CREATE TABLE ingest_sources (
    collection TEXT NOT NULL, shard TEXT NOT NULL, tenant TEXT NOT NULL,
    source_id TEXT NOT NULL, origin TEXT NOT NULL, source_path TEXT NOT NULL,
    source_hash TEXT, fingerprint TEXT NOT NULL DEFAULT '',
    chunk_ids TEXT NOT NULL DEFAULT '[]', updated_at TEXT NOT NULL,
    PRIMARY KEY (collection, shard, tenant, source_id))"""


def test_an_old_catalog_gains_the_columns_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "catalog.sqlite3"
    db = sqlite3.connect(path)
    with db:
        db.execute(OLD)
        db.execute("INSERT INTO ingest_sources VALUES ('c','s','t','a','upload','a.md','h',"
                   "'fp',?,'2026-01-01T00:00:00+00:00')", ('["x", "y"]',))
    db.close()
    catalog = Catalog(path)
    try:
        state = IngestState(catalog)
        IngestState(catalog)  # a second open (the job table does one) changes nothing
        row = state.source("c", "s", "t", "a")
        assert row is not None
        assert (row.state, row.chunk_ids, row.created_at) == (
            "ingested", ["x", "y"], "2026-01-01T00:00:00+00:00")
        state.mark_modified("c", "s", "t", ["a"])
        assert state.source("c", "s", "t", "a").state == "modified"  # type: ignore[union-attr]
        state.commit("c", "s", "t", [SourceState("a", "upload", "a.md", "h2", ["z"], "fp")])
        again = state.source("c", "s", "t", "a")
        assert again is not None and again.state == "ingested" and again.chunk_ids == ["z"]
        assert again.created_at == "2026-01-01T00:00:00+00:00"  # the first write's time
        assert again.updated_at > again.created_at
        state.settle("c", "s", "t", {"a": []})
        assert state.source("c", "s", "t", "a") is None
    finally:
        catalog.close()
