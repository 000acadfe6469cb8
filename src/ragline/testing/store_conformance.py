"""Conformance suite every VectorStore provider runs.

Use it by subclassing in a provider's test module and supplying a ``store``
fixture that returns a fresh, empty store::

    class TestMyStore(StoreConformance):
        @pytest.fixture
        def store(self, tmp_path): return MyStore(MyStore.Config(path=tmp_path))

The filter property test compares the store with the reference evaluator in
:mod:`ragline.core.filter_eval`, which defines the ``where`` semantics. A store
that supports only part of the ``where`` language sets ``FILTER_OPERATORS`` on its
test class (the random filters then use only those; the others must be refused
with ``InvalidInput`` naming them). Tests that need BM25 run only on stores whose
``capabilities()`` include ``hybrid``; the others must refuse sparse and hybrid
queries with ``InvalidInput``.
"""

from __future__ import annotations

import re
import uuid
from typing import Any, ClassVar

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragline.core.filter_eval import matches
from ragline.core.filters import Node, parse_where
from ragline.core.tenancy import TenantScope
from ragline.core.types import Fusion, Record, ScoredRecord, SearchMode, StoreQuery
from ragline.errors import InvalidInput
from ragline.providers.stores.base import VectorStore
from ragline.testing.provider_conformance import ProviderContract
from ragline.testing.strategies import ALL_OPERATORS, filter_strategy, metadata

DIM = 8


def vec(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=DIM).astype(np.float32)
    return v


def ranking(hits: list[ScoredRecord]) -> list[tuple[float, str]]:
    """A result list as (-score, id) pairs with ties in id order, leaving out the ids of
    hits tied with the last one (which of those made the cut is arbitrary): two
    searches rank alike exactly when their rankings are equal."""
    if not hits:
        return []
    last = round(hits[-1].score, 4)
    return sorted((-round(h.score, 4), h.id if round(h.score, 4) > last else "")
                  for h in hits)


def dense(store: VectorStore, key: str, tenant: TenantScope, vector: np.ndarray, where: Node | None,
          limit: int, with_vectors: bool = False,
          score_threshold: float | None = None) -> list[ScoredRecord]:
    """One dense search (a batch of one: ``query_batch`` is the protocol's only search)."""
    return store.query_batch(key, [StoreQuery(tenant, SearchMode.DENSE, limit, vector=vector,
                                              where=where, with_vectors=with_vectors,
                                              score_threshold=score_threshold)])[0]


def rec(i: int, meta: dict[str, Any] | None = None, tenant: str = "default") -> Record:
    return Record(f"doc-{i}", f"text {i}", meta or {}, vec(i), tenant)


class StoreConformance(ProviderContract):
    """Behaviour every store must show; subclasses provide the ``store`` fixture (and may
    provide ``broken``: a store whose backend is gone, for the failing-health test)."""

    KIND: ClassVar[str] = "stores"
    # a search answers one hit per id, the caller's own before a shared one (a store that
    # is itself a ragline search, ragline-remote); others return both records
    SEARCH_ONE_PER_ID: ClassVar[bool] = False

    @pytest.fixture
    def provider(self, store: VectorStore) -> VectorStore:
        return store

    def check_health_details(self, provider: Any, details: dict[str, Any]) -> None:
        assert isinstance(details.get("collection_count"), int)

    FILTER_OPERATORS: ClassVar[frozenset[str] | None] = None
    """The ``where`` operators the store supports (None: all of them)."""

    @staticmethod
    def has_bm25(store: VectorStore) -> bool:
        return "hybrid" in store.capabilities()

    @pytest.fixture
    def key(self, store: VectorStore) -> str:
        k = uuid.uuid4().hex
        store.create_shard(k, DIM)
        return k

    def test_create_is_idempotent_and_dimension_checked(self, store: VectorStore) -> None:
        k = uuid.uuid4().hex
        assert not store.has_shard(k)
        store.create_shard(k, DIM)
        store.create_shard(k, DIM)
        assert store.has_shard(k)
        with pytest.raises(Exception, match="dimension"):
            store.create_shard(k, DIM + 1)

    def test_upsert_get_roundtrip_and_overwrite(self, store: VectorStore, key: str) -> None:
        store.upsert(key, [rec(1, {"a": "x", "tags": ["p", "q"], "n": 2.5})])
        [got] = store.get(key, "default", ["doc-1"])
        assert (got.id, got.text, got.metadata) == ("doc-1", "text 1",
                                                    {"a": "x", "tags": ["p", "q"], "n": 2.5})
        store.upsert(key, [Record("doc-1", "new", {"a": "y"}, vec(5))])
        [got] = store.get(key, "default", ["doc-1"])
        assert (got.text, got.metadata) == ("new", {"a": "y"})
        assert store.count(key, "default", None) == 1
        assert store.get(key, "default", ["missing"]) == []

    def test_upsert_parts_is_one_write_and_a_failing_part_writes_nothing(
            self, store: VectorStore, key: str) -> None:
        store.upsert_parts(key, iter([[rec(1), rec(2)], [], [rec(3, {"n": 3})]]))
        got = store.get(key, "default", ["doc-1", "doc-2", "doc-3"])
        assert [(r.id, r.text, r.metadata) for r in got] == [
            ("doc-1", "text 1", {}), ("doc-2", "text 2", {}), ("doc-3", "text 3", {"n": 3})]
        [hit] = dense(store, key, "default", vec(3), None, 1, with_vectors=True)
        assert hit.id == "doc-3" and hit.embedding is not None
        np.testing.assert_allclose(np.asarray(hit.embedding, dtype=np.float64),
                                   np.asarray(vec(3), dtype=np.float64), rtol=1e-4)

        def failing() -> Any:
            yield [rec(10), rec(1, {"changed": True})]
            raise InvalidInput("the second part is bad")

        with pytest.raises(InvalidInput, match="second part"):
            store.upsert_parts(key, failing())
        assert store.get(key, "default", ["doc-10"]) == []
        assert store.get(key, "default", ["doc-1"])[0].metadata == {}
        assert store.count(key, "default", None) == 3
        store.upsert_parts(key, iter([]))  # nothing to write
        assert store.count(key, "default", None) == 3

    def test_search_orders_by_cosine_and_returns_original_vectors(
        self, store: VectorStore, key: str
    ) -> None:
        recs = [rec(i) for i in range(20)]
        recs[3].embedding = vec(3) * np.float32(7)  # cosine ignores scale
        store.upsert(key, recs)
        q = vec(3)
        hits = dense(store, key, "default", q, None, 5, with_vectors=True)
        assert hits[0].id == "doc-3"
        assert hits[0].score == pytest.approx(1.0, abs=1e-4)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        mat = np.stack([r.embedding for r in recs if r.embedding is not None])
        cos = mat @ q / (np.linalg.norm(mat, axis=1) * np.linalg.norm(q))
        assert [h.id for h in hits] == [f"doc-{i}" for i in np.argsort(-cos)[:5]]
        assert hits[0].embedding is not None
        np.testing.assert_allclose(np.asarray(hits[0].embedding, dtype=np.float64),
                                   np.asarray(recs[3].embedding, dtype=np.float64), rtol=1e-4)
        above = dense(store, key, "default", q, None, 20, score_threshold=0.5)
        assert all(h.score >= 0.5 for h in above)
        assert len(above) == int((cos >= 0.5).sum())

    def test_query_batch_equals_single_queries(self, store: VectorStore, key: str) -> None:
        words = ["alpha", "beta", "gamma", "delta"]
        # lengths vary so BM25 scores differ (ties may come back in any order)
        recs = [Record(f"doc-{i}", f"{words[i % 4]} item {i}" + " zeta" * ((i // 4) % 4),
                       {"g": i % 3}, vec(i), "t1" if i % 5 else "t2") for i in range(30)]
        store.upsert(key, recs)
        where = parse_where({"g": {"$in": [0, 1]}})
        queries = [
            StoreQuery("t1", SearchMode.DENSE, 5, vector=vec(3)),
            StoreQuery("t2", SearchMode.DENSE, 5, vector=vec(3)),  # another tenant, same batch
            StoreQuery("t1", SearchMode.DENSE, 30, vector=vec(7), where=where, score_threshold=0.2),
            StoreQuery("t1", SearchMode.DENSE, 5, vector=vec(4)),  # same shape as the first
        ]
        if self.has_bm25(store):
            queries += [
                StoreQuery("t1", SearchMode.SPARSE, 5, text="beta"),
                StoreQuery("t1", SearchMode.SPARSE, 5, text="   "),  # no words: nothing
                StoreQuery("t1", SearchMode.HYBRID, 4, vector=vec(2), text="gamma", where=where),
                StoreQuery("t1", SearchMode.HYBRID, 4, vector=vec(2), text="gamma",
                           fusion=Fusion.DBSF),
            ]
        singles = [store.query_batch(key, [sq])[0] for sq in queries]
        batch = store.query_batch(key, queries)
        assert [ranking(r) for r in batch] == [ranking(r) for r in singles]
        assert all(h.id != "doc-0" and h.id != "doc-5" for h in batch[0])  # t2's records
        assert {h.id for h in batch[1]} <= {f"doc-{i}" for i in range(0, 30, 5)}
        assert batch[2] and all(h.score >= 0.2 for h in batch[2])
        assert batch[3][0].id == "doc-4"
        if self.has_bm25(store):
            assert sum(1 for _, i in ranking(batch[4]) if i) >= 2  # BM25 order really compared
            assert batch[4] and not batch[5]
            assert all("beta" in h.text for h in batch[4])
        assert store.query_batch(key, []) == []
        assert store.query_batch(uuid.uuid4().hex, queries[:2]) == [[], []]  # no such shard

    def test_text_modes_need_the_hybrid_capability(self, store: VectorStore, key: str) -> None:
        """A store without BM25 says so in capabilities() and refuses text modes clearly."""
        if self.has_bm25(store):
            pytest.skip("the store has BM25")
        store.upsert(key, [rec(i) for i in range(3)])
        assert not store.has_text_index(key)
        for sq in (StoreQuery("default", SearchMode.SPARSE, 5, text="text"),
                   StoreQuery("default", SearchMode.HYBRID, 5, vector=vec(1), text="text")):
            with pytest.raises(InvalidInput, match=f"'{sq.mode.value}'.*hybrid"):
                store.query_batch(key, [sq])

    def test_unsupported_filter_operators_are_refused(
        self, store: VectorStore, key: str
    ) -> None:
        unsupported = sorted(ALL_OPERATORS - (self.FILTER_OPERATORS or ALL_OPERATORS))
        if not unsupported:
            pytest.skip("the store supports every operator")
        store.upsert(key, [rec(1, {"a": 1})])
        for op in unsupported:
            raw: dict[str, Any]
            if op in ("$and", "$or"):
                raw = {op: [{"a": 1}, {"a": 2}]}
            elif op == "$not":
                raw = {"$not": {"a": 1}}
            else:
                raw = {"a": {op: [1] if op in ("$in", "$nin") else 1}}
            with pytest.raises(InvalidInput, match=re.escape(op)):
                store.count(key, "default", parse_where(raw))

    def test_tenants_are_isolated(self, store: VectorStore, key: str) -> None:
        store.upsert(key, [rec(1, {"x": 1}, tenant="t1"), rec(1, {"x": 1}, tenant="t2"),
                           rec(2, {"x": 2}, tenant="t2")])
        assert store.count(key, "t1", None) == 1
        assert store.count(key, "t2", None) == 2
        assert {h.id for h in dense(store, key, "t1", vec(2), None, 10)} == {"doc-1"}
        # no crafted filter reaches another tenant's records: each answers exactly
        # what the reference evaluator finds among t1's own records
        for raw in ({"$or": [{"x": 1}, {"$not": {"x": 1}}]}, {"x": {"$nin": [1]}},
                    {"$not": {"$and": [{"x": 1}, {"x": 2}]}}, {"x": {"$in": [1, 2]}}):
            node = parse_where(raw)
            want = {"doc-1"} if matches(node, {"x": 1}) else set()
            assert store.count(key, "t1", node) == len(want), raw
            assert {r.id for r in store.list_page(key, "t1", node, 10, 0).records} == want
            assert {h.id for h in dense(store, key, "t1", vec(2), node, 10)} == want
        assert [r.id for r in store.get(key, "t1", ["doc-1", "doc-2"])] == ["doc-1"]
        assert store.delete_ids(key, "t1", ["doc-2"]) == 0
        assert store.delete_where(key, "t1", None) == 1
        assert store.count(key, "t2", None) == 2

    def test_a_scope_reads_its_tenants_and_writes_stay_exact(self, store: VectorStore,
                                                              key: str) -> None:
        """A reader's scope ``(tenant, '*')`` (core/tenancy.py): its own records and the
        shared ones, never a third tenant's; a record of the scope's first tenant wins a
        lookup by an id both have; writes and deletes name one tenant and touch only it."""
        store.upsert(key, [rec(1, {"x": 1}, tenant="*"), rec(2, {"x": 2}, tenant="*"),
                           rec(2, {"x": 3}, tenant="t1"), rec(3, {"x": 1}, tenant="t1"),
                           rec(4, {"x": 1}, tenant="t2")])
        scope = ("t1", "*")
        assert store.count(key, scope, None) == 4
        assert store.count(key, "*", None) == 2
        assert store.count(key, scope, parse_where({"x": 1})) == 2
        page = store.list_page(key, scope, None, 10, 0)
        assert page.total == 4
        assert sorted((r.id, r.tenant) for r in page.records) == [
            ("doc-1", "*"), ("doc-2", "*"), ("doc-2", "t1"), ("doc-3", "t1")]
        # pages of a scope cover every record once
        seen = [(r.id, r.tenant) for off in range(0, 4, 3)
                for r in store.list_page(key, scope, None, 3, off).records]
        assert sorted(seen) == sorted((r.id, r.tenant) for r in page.records)
        got = store.get(key, scope, ["doc-4", "doc-2", "doc-1"])
        assert [(r.id, r.tenant, r.metadata) for r in got] == [
            ("doc-2", "t1", {"x": 3}), ("doc-1", "*", {"x": 1})]
        assert [r.tenant for r in store.get(key, ("*", "t1"), ["doc-2"])] == ["*"]
        assert store.distinct(key, scope, "x") == [1, 2, 3]
        hits = dense(store, key, scope, vec(2), None, 10)
        both = 1 if self.SEARCH_ONE_PER_ID else 2  # the caller's own and the shared doc-2
        assert sorted(h.id for h in hits) == ["doc-1", *["doc-2"] * both, "doc-3"]
        assert [h.tenant for h in hits if h.id == "doc-1"] == ["*"]  # hits say it is shared
        assert hits[0].score >= hits[-1].score
        assert {h.id for h in dense(store, key, scope, vec(4), parse_where({"x": 1}), 10)
                } == {"doc-1", "doc-3"}
        if "hybrid" in store.capabilities():
            for mode in (SearchMode.SPARSE, SearchMode.HYBRID):
                found = store.query_batch(key, [StoreQuery(scope, mode, 10, vector=vec(2),
                                                           text="text 2")])[0]
                assert found and all(h.id != "doc-4" for h in found), mode
                assert [h.id for h in found].count("doc-2") == both, mode
        # writes name one tenant: t1's delete leaves the shared records alone
        assert store.delete_ids(key, "t1", ["doc-1", "doc-2"]) == 1
        assert store.delete_where(key, "t1", None) == 1
        assert store.count(key, "*", None) == 2 and store.count(key, "t2", None) == 1
        assert [r.tenant for r in store.get(key, scope, ["doc-2"])] == ["*"]

    def test_delete_by_ids_and_where(self, store: VectorStore, key: str) -> None:
        store.upsert(key, [rec(i, {"g": i % 3}) for i in range(30)])
        assert store.delete_ids(key, "default", ["doc-1", "doc-2", "nope", "doc-1"]) == 2
        assert store.delete_where(key, "default", parse_where({"g": 0})) == 10
        left = store.list_page(key, "default", None, 100, 0)
        assert left.total == 18
        assert all(r.metadata["g"] != 0 for r in left.records)

    def test_paging_is_stable_and_complete(self, store: VectorStore, key: str) -> None:
        store.upsert(key, [rec(i, {"even": i % 2 == 0}) for i in range(57)])
        where = parse_where({"even": True})
        seen: list[str] = []
        for off in range(0, 40, 7):
            page = store.list_page(key, "default", where, 7, off)
            assert page.total == 29
            seen += [r.id for r in page.records]
        assert len(seen) == len(set(seen)) == 29
        again = [r.id for r in store.list_page(key, "default", where, 100, 0).records]
        assert again == seen
        assert store.list_page(key, "default", where, 10, 500).records == []

    def test_distinct_values_sorted_and_deduplicated(self, store: VectorStore, key: str) -> None:
        store.upsert(key, [
            rec(1, {"region": "British Classics", "tags": ["b", "a"]}),
            rec(2, {"region": "Asian & Middle Eastern Sweets", "tags": ["a"]}),
            rec(3, {"region": "British Classics", "n": 2.5}),
            rec(4, {"region": "French Pastries", "n": 1}),
        ])
        assert store.distinct(key, "default", "region") == [
            "Asian & Middle Eastern Sweets", "British Classics", "French Pastries"]
        assert store.distinct(key, "default", "tags") == ["a", "b"]
        assert store.distinct(key, "default", "n") == [1, 2.5]
        assert store.distinct(key, "default", "nonexistent") == []

    def test_drop_shard_removes_everything(self, store: VectorStore, key: str) -> None:
        store.upsert(key, [rec(1)])
        store.drop_shard(key)
        assert not store.has_shard(key)
        store.drop_shard(key)  # idempotent

    # differing_executors: every provider's subclass runs this one method; sharing its
    # example database across stores is intended (a failing filter replays on all)
    @settings(max_examples=40, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture,
                                     HealthCheck.too_slow, HealthCheck.differing_executors])
    @given(metas=st.lists(metadata(), min_size=1, max_size=25), data=st.data())
    def test_filters_match_reference_evaluator(
        self, store: VectorStore, metas: list[dict[str, Any]], data: st.DataObject
    ) -> None:
        wheres = data.draw(st.lists(filter_strategy(self.FILTER_OPERATORS), min_size=1,
                                    max_size=6), label="wheres")
        k = uuid.uuid4().hex
        store.create_shard(k, DIM)
        try:
            store.upsert(k, [rec(i, m) for i, m in enumerate(metas)])
            for raw in wheres:
                node = parse_where(raw)
                expected = {f"doc-{i}" for i, m in enumerate(metas) if matches(node, m)}
                page = store.list_page(k, "default", node, 1000, 0)
                got = {r.id for r in page.records}
                assert got == expected, f"where={raw}"
                assert page.total == len(expected)
                assert store.count(k, "default", node) == len(expected)
                hits = dense(store, k, "default", vec(99), node, 1000)
                assert {h.id for h in hits} == expected, f"search where={raw}"
        finally:
            store.drop_shard(k)
