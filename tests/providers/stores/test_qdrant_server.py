"""The Qdrant server store, run against qdrant-client's LOCAL MODE.

No Qdrant server can be started offline here (it ships as a binary or a container,
not a PyPI wheel), so qdrant-client's in-process engine stands in for it: same
client API and request models, but no payload indexes, sharding, replication or
stemming. A real server run needs RAGLINE_TEST_QDRANT_URL (see README).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ragline.core.filters import parse_where
from ragline.core.types import Record, SearchMode, StoreQuery
from ragline.providers.registry import Registry
from ragline.providers.stores.base import VectorStore
from ragline.providers.stores.qdrant_common.filters import tenant_filter
from ragline.providers.stores.qdrant_server.provider import QdrantServerConfig, QdrantServerStore
from ragline.testing.store_conformance import DIM, StoreConformance, dense, rec, vec

LOCAL_ONLY = ("Qdrant: qdrant-client LOCAL MODE (':memory:'), the only Qdrant available "
              "offline here; no Qdrant server was tested")


def _config() -> QdrantServerConfig:
    url = os.environ.get("RAGLINE_TEST_QDRANT_URL")
    if url:  # a real server, where one is reachable
        import uuid

        return QdrantServerConfig(url=url, collection_prefix=f"t{uuid.uuid4().hex[:8]}_")
    return QdrantServerConfig(location=":memory:")


@pytest.mark.skipif(not os.environ.get("RAGLINE_TEST_QDRANT_URL"), reason=LOCAL_ONLY)
def test_which_qdrant_ran() -> None:
    """Skipped (with the reason in the summary) unless a real server was configured."""
    assert QdrantServerStore(_config()).health().details["mode"] == "server"


class TestQdrantServerStore(StoreConformance):
    @pytest.fixture
    def broken(self) -> Iterator[QdrantServerStore]:
        """A store whose Qdrant server is not there (a free port nobody listens on)."""
        from ragline.testing.server import free_port

        s = QdrantServerStore(QdrantServerConfig(url=f"http://127.0.0.1:{free_port()}",
                                                 timeout_s=2))
        yield s
        s.close()

    @pytest.fixture
    def store(self) -> Iterator[QdrantServerStore]:
        s = QdrantServerStore(_config())
        yield s
        for k in s.shard_keys():
            s.drop_shard(k)
        s.close()


@pytest.fixture
def qs() -> Iterator[QdrantServerStore]:
    s = QdrantServerStore(_config())
    yield s
    s.close()


def test_registered_under_qdrant_and_protocol(qs: QdrantServerStore) -> None:
    assert Registry().get("stores", "qdrant") is QdrantServerStore
    assert isinstance(qs, VectorStore)
    h = qs.health()
    assert h.status == "ok" and h.details["mode"] in ("local", "server")


def test_config_needs_exactly_one_target_and_hides_the_key() -> None:
    from pydantic import SecretStr, ValidationError

    with pytest.raises(ValidationError, match="exactly one"):
        QdrantServerConfig()
    with pytest.raises(ValidationError, match="exactly one"):
        QdrantServerConfig(url="http://q:6333", location=":memory:")
    with pytest.raises(ValidationError, match="plain"):
        QdrantServerConfig(location=":memory:", text_analysis="english")
    cfg = QdrantServerConfig(url="http://q:6333", api_key=SecretStr("sekret"), shard_number=3,
                             replication_factor=2, prefer_grpc=True)
    assert "sekret" not in repr(cfg) and "sekret" not in cfg.model_dump_json()


def test_filters_are_the_embedded_stores_translation() -> None:
    """Both Qdrant providers take their filter from one JSON translation."""
    import qdrant_edge as q
    from qdrant_client import models as m

    from ragline.providers.stores.qdrant_edge.translate import to_edge

    node = parse_where({"a": {"$in": ["x", 2, True]}, "$not": {"n": {"$gte": 1.5}}})
    js = tenant_filter("t1", node)
    client_flt = m.Filter.model_validate(js)
    assert client_flt.model_dump(exclude_none=True) == js
    assert isinstance(to_edge(js), q.Filter)


def test_payload_indexes_follow_the_value_kinds(qs: QdrantServerStore) -> None:
    """Index decisions persist in the collection's metadata (shared by processes)."""
    qs.create_shard("k", DIM)
    qs.upsert("k", [rec(1, {"g": "a", "n": 1, "flag": True})])
    qs.upsert("k", [rec(2, {"n": "mixed now"})])
    other = QdrantServerStore(qs.config)  # a second process's view: same metadata
    if qs.local:
        other.client = qs.client  # local mode: the engine lives in this process only
    meta = other._metadata("k")
    assert meta is not None
    assert meta["ragline_fields"] == {"g": "keyword", "n": "mixed", "flag": "bool"}
    assert qs.distinct("k", "default", "g") == ["a"]


def test_sparse_and_hybrid_rank_by_bm25(qs: QdrantServerStore) -> None:
    qs.create_shard("k", DIM)
    qs.upsert("k", [
        Record("a", "robot robot robot arms", {}, vec(1)),
        Record("b", "a quiet garden", {}, vec(2)),
        Record("c", "robot in the garden of many other words", {}, vec(3)),
    ])
    [sparse] = qs.query_batch("k", [StoreQuery("default", SearchMode.SPARSE, 10, text="robot")])
    assert [h.id for h in sparse] == ["a", "c"]
    [hyb] = qs.query_batch("k", [StoreQuery("default", SearchMode.HYBRID, 3, vector=vec(2),
                                            text="robot", rrf_k=10)])
    scores = {h.id: h.score for h in hyb}
    q = vec(2)
    cos = {i: float(vec(n) @ q / (np.linalg.norm(vec(n)) * np.linalg.norm(q)))
           for i, n in (("a", 1), ("b", 2), ("c", 3))}
    dense_rank = {i: r for r, i in enumerate(sorted(cos, key=lambda i: -cos[i]))}
    # RRF, ranks from 0: b is dense rank 0 with no text match; a is BM25 rank 0
    assert scores["b"] == pytest.approx(1 / 10)
    assert scores["a"] == pytest.approx(1 / (10 + dense_rank["a"]) + 1 / 10)
    assert scores["c"] == pytest.approx(1 / (10 + dense_rank["c"]) + 1 / 11)
    found = dense(qs, "k", "default", np.asarray(vec(3)), parse_where({"$not": {"x": 1}}), 1)
    assert [h.id for h in found] == ["c"]


def test_unreachable_server_is_store_unavailable() -> None:
    from pydantic import SecretStr

    from ragline.errors import StoreUnavailable

    s = QdrantServerStore(QdrantServerConfig(url="https://127.0.0.1:1", timeout_s=2,
                                             api_key=SecretStr("sekret")))
    with pytest.raises(StoreUnavailable) as info:
        s.has_shard("k")
    assert "sekret" not in str(info.value) and "127.0.0.1" not in str(info.value)
    assert s.health().status == "down"


def test_local_mode_on_disk_keeps_data(tmp_path: Path) -> None:
    s = QdrantServerStore(QdrantServerConfig(location=str(tmp_path / "q")))
    s.create_shard("k", DIM)
    s.upsert("k", [rec(i) for i in range(5)])
    s.close()
    s2 = QdrantServerStore(QdrantServerConfig(location=str(tmp_path / "q")))
    assert s2.count("k", "default", None) == 5 and s2.shard_keys() == ["k"]
    s2.close()
