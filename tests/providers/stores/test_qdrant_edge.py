from pathlib import Path

import pytest

from ragline.providers.stores.qdrant_edge.provider import QdrantEdgeConfig, QdrantEdgeStore
from ragline.testing.store_conformance import StoreConformance


class TestQdrantEdgeStore(StoreConformance):
    @pytest.fixture
    def store(self, tmp_path: Path):  # type: ignore[no-untyped-def]
        s = QdrantEdgeStore(QdrantEdgeConfig(path=tmp_path / "shards"))
        yield s
        s.close()


def test_reopen_keeps_data_and_field_indexes(tmp_path: Path) -> None:
    from ragline.testing.store_conformance import rec

    s = QdrantEdgeStore(QdrantEdgeConfig(path=tmp_path))
    s.create_shard("k", 8)
    s.upsert("k", [rec(i, {"g": f"v{i % 4}"}) for i in range(40)])
    s.close()
    s2 = QdrantEdgeStore(QdrantEdgeConfig(path=tmp_path))
    assert s2.count("k", "default", None) == 40
    assert s2.distinct("k", "default", "g") == ["v0", "v1", "v2", "v3"]
    s2.close()
