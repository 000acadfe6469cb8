"""``rl.admin.verify`` findings the CLI test cannot reach (start-up recovery runs first
there): stale state rows of an old shard, and a collection whose shard vanished."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ragline.catalog.ingest_state import SourceState
from ragline.errors import Forbidden
from ragline.facade import IngestSource, Ragline
from tests.ingestion_support import (
    fake_settings,
)

pytestmark = pytest.mark.usefixtures("few_payload_indexes")


@pytest.fixture
def rl(tmp_path: Path) -> Iterator[Ragline]:
    r = Ragline(fake_settings(tmp_path)).start()
    r.ingestion.submit(r.owner(), IngestSource("text", "book", text="# Gears\n\nGears turn motors.",
                                     title="gears"))
    yield r
    r.close()


def test_stale_rows_are_reported_and_dropped(rl: Ragline) -> None:
    rl.services.ingest_state.commit("book", "an-old-shard", "default",
                                    [SourceState("old", "upload", "old.md", "h", ["x"])])
    report = rl.admin.verify(rl.owner())
    assert [(f.kind, f.collection, f.count) for f in report.problems] == [
        ("stale_state", "book", 1)]
    assert rl.admin.verify(rl.owner(), repair=True).ok
    assert rl.admin.verify(rl.owner()).findings == []
    assert rl.services.ingest_state.rows()[0].source.origin == "text"  # the live row stays


def test_a_vanished_shard_is_recreated_and_its_rows_settled(rl: Ragline) -> None:
    info = rl.services.collections.get("book")
    rl.services.store.drop_shard(info.shard)
    report = rl.admin.verify(rl.owner())
    assert {f.kind for f in report.problems} == {"missing_shard", "missing_chunks"}
    assert not report.ok
    assert rl.admin.verify(rl.owner(), repair=True).ok
    assert rl.services.store.has_shard(info.shard)
    assert rl.documents.sources(rl.owner(), "book") == ([], 0)
    assert rl.admin.verify(rl.owner()).findings == []
    again = rl.ingestion.submit(rl.owner(), IngestSource("text", "book",
                                                         text="# Gears\n\nGears turn "
                                               "motors.", title="gears")).document
    assert again is not None and not again.unchanged and again.chunks == 1


def test_verify_is_for_admins(rl: Ragline) -> None:
    from ragline.core.principal import Principal

    with pytest.raises(Forbidden):
        rl.admin.verify(Principal("default"))
