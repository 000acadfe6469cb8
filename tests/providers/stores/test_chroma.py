"""The Chroma store: the conformance suite in-process (PersistentClient) and against a
real ``chroma run`` server, plus what is particular to Chroma."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("chromadb")

from ragline.core.filters import parse_where
from ragline.core.types import Metadata, Record, SearchMode, StoreQuery
from ragline.errors import InvalidInput, StoreError, StoreUnavailable
from ragline.providers.registry import registry
from ragline.providers.stores.chroma.config import ChromaConfig
from ragline.providers.stores.chroma.encoding import FAN_OUT, SUPPORTED_OPERATORS, to_where
from ragline.providers.stores.chroma.provider import ChromaStore
from ragline.testing.chroma_server import chroma_server
from ragline.testing.store_conformance import StoreConformance, dense, rec, vec
from ragline.testing.strategies import ALL_OPERATORS


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    with chroma_server(tmp_path_factory.mktemp("chroma-server") / "db") as hp:
        yield hp


class TestChromaPersistent(StoreConformance):
    FILTER_OPERATORS = ChromaStore.FILTER_OPERATORS

    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[ChromaStore]:
        s = ChromaStore(ChromaConfig(path=tmp_path / "chroma"))
        yield s
        s.close()


class TestChromaServer(StoreConformance):
    @pytest.fixture
    def broken(self, tmp_path: Path) -> Iterator[ChromaStore]:
        """A server store whose server went away after it connected (its own server,
        stopped: the module's server stays up for the other tests)."""
        with chroma_server(tmp_path / "gone") as (host, port):
            s = ChromaStore(ChromaConfig(host=host, port=port))
        yield s
        s.close()

    FILTER_OPERATORS = ChromaStore.FILTER_OPERATORS

    @pytest.fixture
    def store(self, server: tuple[str, int]) -> Iterator[ChromaStore]:
        # a database of its own per test: the store starts empty on a shared server
        host, port = server
        s = ChromaStore(ChromaConfig(host=host, port=port,
                                     database=f"db{uuid.uuid4().hex[:12]}"))
        yield s
        s.close()


def test_every_where_operator_maps() -> None:
    assert SUPPORTED_OPERATORS == ALL_OPERATORS


def test_registered_with_schema_and_honest_capabilities() -> None:
    cls = registry.get("stores", "chroma")
    assert cls is ChromaStore
    schema = cls.connection_schema()
    assert {"path", "host", "port", "ssl", "headers", "tenant", "database"} <= set(
        schema["properties"])
    assert "hybrid" not in cls.CAPABILITIES and "search" in cls.CAPABILITIES


def test_config_needs_exactly_one_target(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="exactly one"):
        ChromaConfig()
    with pytest.raises(ValueError, match="exactly one"):
        ChromaConfig(path=tmp_path, host="localhost")
    with pytest.raises(ValueError, match="extra"):
        ChromaConfig(path=tmp_path, hsot="x")  # type: ignore[call-arg]
    cfg = ChromaConfig(host="h", headers={"Authorization": "Bearer s3cret"})
    assert "s3cret" not in repr(cfg) and "s3cret" not in cfg.model_dump_json()


def test_long_in_lists_are_nested_for_sqlite() -> None:
    where = to_where(parse_where({"a": {"$in": list(range(1000))}}))
    assert len(where["$or"]) <= FAN_OUT
    assert all(len(child["$or"]) <= FAN_OUT for child in where["$or"])


def test_long_in_list_and_big_batches(tmp_path: Path) -> None:
    """1000-value $in (SQLite would refuse a flat OR) and a write above Chroma's batch
    limit (split into parts) both work."""
    s = ChromaStore(ChromaConfig(path=tmp_path))
    s.create_shard("k", 4)
    n = s._batch() + 10
    rng = np.random.default_rng(0)
    s.upsert("k", [Record(f"d{i}", "", {"g": i}, rng.normal(size=4).astype(np.float32))
                   for i in range(n)])
    assert s.count("k", "default", None) == n
    assert s.count("k", "default", parse_where({"g": {"$in": list(range(0, 2000, 2))}})) == 1000
    s.close()


def test_failed_part_of_a_big_batch_is_undone(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    s = ChromaStore(ChromaConfig(path=tmp_path))
    s.create_shard("k", 4)
    monkeypatch.setattr(s, "_max_batch", 3)
    s.upsert("k", [Record("old", "before", {"v": 1}, np.ones(4, np.float32))])
    calls = {"n": 0}
    real = s._write

    def flaky(*args: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise StoreError("boom")
        real(*args)

    monkeypatch.setattr(s, "_write", flaky)
    batch = [Record("old", "after", {"v": 2}, np.ones(4, np.float32))] + [
        Record(f"n{i}", "", {}, np.ones(4, np.float32)) for i in range(5)]
    with pytest.raises(StoreError, match="boom"):
        s.upsert("k", batch)
    assert [(r.id, r.text, r.metadata) for r in s.list_page("k", "default", None, 10, 0).records
            ] == [("old", "before", {"v": 1})]
    s.close()


def test_metadata_round_trips_exactly_and_foreign_collections_are_left_alone(
    tmp_path: Path,
) -> None:
    import chromadb

    s = ChromaStore(ChromaConfig(path=tmp_path))
    s.create_shard("k", 4)
    meta: Metadata = {"i": 3, "f": 3.0, "none": None, "mixed": [1, "1", True, 2.5], "empty": [],
            "ü nicode/key": "✓"}
    s.upsert("k", [Record("a", "t", meta, np.ones(4, np.float32))])
    [got] = s.get("k", "default", ["a"])
    assert got.metadata == meta and type(got.metadata["i"]) is int
    assert s.count("k", "default", parse_where({"mixed": True})) == 1
    assert s.count("k", "default", parse_where({"mixed": {"$gt": 2}})) == 1
    assert s.count("k", "default", parse_where({"mixed": {"$gt": 3}})) == 0
    assert s.count("k", "default", parse_where({"ü nicode/key": "✓"})) == 1
    # a collection of another application in the same database is invisible to ragline
    other = s._client.create_collection("someone_elses", embedding_function=None)
    other.add(ids=["x"], embeddings=[[1.0, 0, 0, 0]])
    assert s.shard_keys() == ["k"]
    assert chromadb.__version__
    s.close()


def test_sparse_and_hybrid_are_refused_naming_the_capability(tmp_path: Path) -> None:
    s = ChromaStore(ChromaConfig(path=tmp_path))
    s.create_shard("k", 8)
    with pytest.raises(InvalidInput, match="'sparse' needs BM25 \\(capability 'hybrid'\\)"):
        s.query_batch("k", [StoreQuery("default", SearchMode.SPARSE, 3, text="x")])
    s.close()


def test_health_reports_heartbeat_version_and_collections(server: tuple[str, int]) -> None:
    host, port = server
    s = ChromaStore(ChromaConfig(host=host, port=port, database=f"h{uuid.uuid4().hex[:8]}",
                                 headers={"X-Token": "secret-value"}))
    s.create_shard("k1", 4)
    s.create_shard("k2", 4)
    h = s.health()
    assert h.status == "ok"
    assert h.details["heartbeat_ns"] > 0 and h.details["version"]
    assert h.details["collection_count"] == 2 and h.details["mode"] == "http"
    assert "secret-value" not in h.model_dump_json()
    assert s.size_bytes("k1") == 0
    s.upsert("k1", [rec(i) for i in range(5)])
    assert s.size_bytes("k1") > 0
    s.close()


def test_local_size_grows_with_data(tmp_path: Path) -> None:
    s = ChromaStore(ChromaConfig(path=tmp_path))
    s.create_shard("k", 8)
    empty = s.size_bytes("k")
    s.upsert("k", [rec(i, {"text": "x" * 500}) for i in range(200)])
    assert s.size_bytes("k") > empty + 200 * 500
    assert s.health().details["collection_count"] == 1
    s.close()


def test_unreachable_server_is_store_unavailable() -> None:
    from ragline.testing.server import free_port

    with pytest.raises(StoreUnavailable, match="cannot be reached"):
        ChromaStore(ChromaConfig(host="127.0.0.1", port=free_port(), create_database=False)
                    ).shard_keys()


def test_dense_search_after_reopen(tmp_path: Path) -> None:
    s = ChromaStore(ChromaConfig(path=tmp_path))
    s.create_shard("k", 8)
    s.upsert("k", [rec(i) for i in range(50)])
    s.close()
    s2 = ChromaStore(ChromaConfig(path=tmp_path))
    assert dense(s2, "k", "default", vec(7), None, 1)[0].id == "doc-7"
    s2.close()
