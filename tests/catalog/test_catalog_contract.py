"""One behaviour for both catalogs: the embedded SQLite one and the PostgreSQL one (on a
real PostgreSQL) that scaled-out processes share."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragline.errors import CollectionExists, CollectionNotFound


@pytest.fixture(scope="module")
def dsn() -> Iterator[str]:
    from ragline.testing.postgres import postgres_server

    with postgres_server() as uri:
        yield uri


@pytest.fixture(params=["sqlite", "postgres"])
def catalog(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "sqlite":
        from ragline.catalog.sqlite import Catalog

        cat: Any = Catalog(tmp_path / "catalog.sqlite3")
    else:
        from ragline.catalog.pg_catalog import PgCatalog

        cat = PgCatalog(request.getfixturevalue("dsn"), schema=f"c_{uuid.uuid4().hex[:10]}")
    yield cat
    cat.close()


def test_collection_lifecycle(catalog: Any) -> None:
    info = catalog.create_collection("docs", {"a": [1, "x"]}, "s1", None, "local", "m")
    assert (info.name, info.metadata, info.shard, info.dimension) == (
        "docs", {"a": [1, "x"]}, "s1", None)
    with pytest.raises(CollectionExists):
        catalog.create_collection("docs", {}, "s2", None, None, None)
    catalog.set_dimension("docs", 384)
    catalog.set_dimension("docs", 8)  # only the first dimension sticks
    assert catalog.get_collection("docs").dimension == 384
    assert catalog.set_metadata("docs", {"b": True}).metadata == {"b": True}
    catalog.swap_shard("docs", "s1", "s2")
    assert catalog.get_collection("docs").shard == "s2"
    with pytest.raises(CollectionNotFound):
        catalog.swap_shard("docs", "s1", "s3")  # lost a race: the pointer moved on
    assert catalog.retired_shards() == ["s1"]
    catalog.create_collection("other", {}, "s9", 4, None, None)
    assert [c.name for c in catalog.list_collections()] == ["docs", "other"]
    assert catalog.live_shards() == {"s2", "s9"}
    assert catalog.delete_collection("docs").shard == "s2"
    assert sorted(catalog.retired_shards()) == ["s1", "s2"]
    catalog.forget_retired("s1")
    assert catalog.retired_shards() == ["s2"]
    assert catalog.find_collection("docs") is None
    with pytest.raises(CollectionNotFound, match="'docs' not found"):
        catalog.get_collection("docs")
    with pytest.raises(CollectionNotFound):
        catalog.delete_collection("docs")


def test_two_postgres_catalogs_see_each_other(dsn: str) -> None:
    from ragline.catalog.pg_catalog import PgCatalog

    schema = f"c_{uuid.uuid4().hex[:10]}"
    a, b = PgCatalog(dsn, schema), PgCatalog(dsn, schema)
    try:
        a.create_collection("c", {}, "s1", 4, None, None)
        assert b.get_collection("c").shard == "s1"
        b.swap_shard("c", "s1", "s2")
        assert a.get_collection("c").shard == "s2"  # no stale cache across processes
    finally:
        a.close()
        b.close()
