"""What a restart settles (issue 32, item 10): sources a crash left ``pending`` are settled
when the server starts; the disk reserve always covers reopening every shard."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ragline.api.app import create_app
from ragline.errors import InsufficientStorage
from ragline.facade import IngestSource, Ragline
from ragline.providers.stores.qdrant_edge.provider import (
    SHARD_REOPEN_SLACK,
    QdrantEdgeStore,
    wal_bytes,
)
from tests.api.helpers import local_client
from tests.ingestion_support import fake_settings

pytestmark = pytest.mark.usefixtures("few_payload_indexes")
MiB = 1024 * 1024


def test_a_source_left_pending_by_a_crash_is_settled_when_the_server_starts(
    tmp_path: Path
) -> None:
    settings = fake_settings(tmp_path)
    with Ragline(settings) as rl:
        me = rl.owner()
        kept = rl.ingestion.submit(me, IngestSource("text", "book",
                                                    text="# Gears\n\nGears turn motors."))
        lost = rl.ingestion.submit(me, IngestSource("text", "book",
                                                    text="# Belts\n\nBelts move loads."))
        assert kept.document is not None and lost.document is not None
        sid = lost.document.source_id
    db = sqlite3.connect(settings.data_dir / "catalog.sqlite3")
    with db:  # the crash: chunks written, the first write's row never committed
        db.execute("UPDATE ingest_sources SET source_hash=NULL WHERE source_id=?", (sid,))
    db.close()
    with Ragline(settings) as rl:  # the library and `ragline verify` leave it to report
        assert rl.documents.source(rl.owner(), "book", sid).state == "pending"
    with local_client(create_app(settings)) as client:
        sources = client.get("/collections/book/sources").json()["sources"]
        assert [s["source_id"] for s in sources] == [kept.document.source_id]
        assert all(s["state"] == "ingested" for s in sources)
        docs = client.get("/collections/book/documents").json()["documents"]
        assert {d["metadata"]["parent_doc_id"] for d in docs} == {kept.document.source_id}
        rl = client.app.state.ragline  # type: ignore[attr-defined]
        assert rl.admin.verify(rl.owner()).findings == []
        # the same text again is written as new, not "unchanged"
        again = client.post("/api/rag/ingest/text", json={"text": "# Belts\n\nBelts move loads."})
        assert again.status_code == 201 and again.json()["unchanged"] is False


class FakeDisk:
    def __init__(self, free: int) -> None:
        self.free = free

    def __call__(self, _path: Path) -> int:
        return self.free


def test_a_lowered_reserve_still_covers_reopening_every_shard(tmp_path: Path) -> None:
    with Ragline(fake_settings(tmp_path, disk_reserve_bytes=1 * MiB)) as rl:
        me = rl.owner()
        for name in ("a", "b", "c"):
            rl.ingestion.submit(me, IngestSource("text", name,
                                                 text=f"# {name}\n\nSome text about {name}."))
        guard = rl.services.ingest.disk
        store = rl.services.store
        assert isinstance(store, QdrantEdgeStore)
        store.wal_usage.max_age_s = 0  # no 5 s cache here
        floor = guard.reserve
        assert floor >= 3 * SHARD_REOPEN_SLACK > guard.setting  # three shards to reopen
        assert floor - 3 * SHARD_REOPEN_SLACK == wal_bytes(store.root) > 0  # WALs
        guard.free = FakeDisk(floor - 1)
        with pytest.raises(InsufficientStorage, match="raised to what reopening every shard"):
            rl.ingestion.submit(me, IngestSource("text", "a", text="# More\n\nAnother text."))
        assert guard.status()["writes_allowed"] is False
        guard.free = FakeDisk(floor + 64 * MiB)
        rl.ingestion.submit(me, IngestSource("text", "a", text="# More\n\nAnother text."))
    with Ragline(fake_settings(tmp_path, disk_reserve_bytes=0)) as rl:
        assert rl.services.ingest.disk.reserve == 0  # 0 still turns the check off
