"""The SQLite catalog's in-memory cache of collection rows never serves stale data."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import pytest

from ragline.catalog.sqlite import Catalog
from ragline.core.types import CollectionInfo


@pytest.fixture()
def catalog(tmp_path: Path) -> Catalog:
    cat = Catalog(tmp_path / "catalog.sqlite3")
    cat.create_collection("docs", {"v": 1}, "shard-a", 4, None, None)
    return cat


def test_every_write_is_seen_by_the_next_read(catalog: Catalog) -> None:
    assert catalog.get_collection("docs").metadata == {"v": 1}  # now cached
    catalog.set_metadata("docs", {"v": 2})
    assert catalog.get_collection("docs").metadata == {"v": 2}
    catalog.swap_shard("docs", "shard-a", "shard-b")
    assert catalog.get_collection("docs").shard == "shard-b"
    catalog.delete_collection("docs")
    assert catalog.find_collection("docs") is None


def test_reads_are_served_from_memory(catalog: Catalog) -> None:
    first = catalog.get_collection("docs")
    catalog.read = None  # type: ignore[assignment,method-assign]  # any SQL read would fail now
    assert catalog.get_collection("docs") is first


def test_rows_are_frozen_so_sharing_them_is_safe(catalog: Catalog) -> None:
    info = catalog.get_collection("docs")
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.shard = "other"  # type: ignore[misc]


def test_a_read_that_raced_a_write_is_not_cached(catalog: Catalog) -> None:
    # The reader fetches the old row, then a write commits before it stores it.
    catalog = Catalog(catalog.path)  # a fresh process: nothing cached yet
    real_info = Catalog._info
    raced = threading.Event()

    def info_then_write(row):  # type: ignore[no-untyped-def]
        out: CollectionInfo = real_info(row)
        if not raced.is_set():
            raced.set()
            t = threading.Thread(target=catalog.set_metadata, args=("docs", {"v": 2}))
            t.start()
            t.join()
        return out

    catalog._info = info_then_write  # type: ignore[method-assign,assignment]
    stale = catalog.get_collection("docs")
    assert raced.is_set() and stale.metadata == {"v": 1}  # the read returns what it saw
    assert catalog.get_collection("docs").metadata == {"v": 2}  # but did not cache it


def test_a_failed_write_leaves_the_cached_row_true(catalog: Catalog) -> None:
    catalog.get_collection("docs")
    with pytest.raises(RuntimeError), catalog.tx() as db:
        db.execute("UPDATE collections SET metadata='{\"v\": 9}' WHERE name='docs'")
        raise RuntimeError("boom")
    assert catalog.get_collection("docs").metadata == {"v": 1}
