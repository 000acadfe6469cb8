"""Background index builds and filter-aware HNSW on Qdrant Edge (issue 18).

The collections are small, so the size-dependent parameters are scaled with
them: Edge's full-scan threshold (KB of vectors) and the exact-search bound are
set to the same fraction of the collection as the production defaults are of a
1M-point one; m, ef_construct, ef and the plan are the production ones.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest

from ragline.core.filters import Eq, In, Node, Range
from ragline.core.ids import point_id
from ragline.core.types import Metadata, Record, SearchMode, StoreQuery
from ragline.providers.stores.qdrant_edge.generation import Generation
from ragline.providers.stores.qdrant_edge.generations import current
from ragline.providers.stores.qdrant_edge.host import open_generation
from ragline.providers.stores.qdrant_edge.provider import QdrantEdgeConfig, QdrantEdgeStore

DIM = 32
N = 4000
CATS = 20


def _data(n: int, seed: int = 0) -> tuple[np.ndarray, list[Metadata]]:
    """Clustered vectors (like real embeddings) and metadata: cat (20 values), tier (4)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(50, DIM)).astype(np.float32)
    vecs = centres[rng.integers(0, 50, n)] + 0.35 * rng.normal(size=(n, DIM)).astype(np.float32)
    metas: list[Metadata] = [{"cat": f"c{int(c)}", "tier": int(t)}
             for c, t in zip(rng.integers(0, CATS, n), rng.integers(0, 4, n), strict=True)]
    return vecs.astype(np.float32), metas


def _store(path: Path, **over: object) -> QdrantEdgeStore:
    cfg = {"path": path, "exact_search_max_matches": N // 40,  # 25k at 1M
           "hnsw_full_scan_threshold_kb": 2,
           "indexing_threshold_kb": 20, **over}
    return QdrantEdgeStore(QdrantEdgeConfig(**cfg))  # type: ignore[arg-type]


def _fill(store: QdrantEdgeStore, vecs: np.ndarray, metas: list[Metadata],
          start: int = 0) -> None:
    for lo in range(0, len(vecs), 1000):
        store.upsert("k", [Record(f"d{start + i}", "t", metas[i], vecs[i])
                           for i in range(lo, min(lo + 1000, len(vecs)))])


SHAPES: dict[str, Node | None] = {
    "unfiltered": None,
    "cat = one value (5%)": Eq("cat", "c3"),
    "cat $in 3 values (15%)": In("cat", ("c1", "c2", "c7")),
    "tier $lte 1 (50%)": Range("tier", "$lte", 1),
    "tier = one value (25%)": Eq("tier", 0),
}
PLANS = {  # the plan each shape gets on the built test collection (queries.dense_plan)
    "unfiltered": "links",
    "cat = one value (5%)": "links",
    "cat $in 3 values (15%)": "links",  # every value has its own links: one walk
    "tier $lte 1 (50%)": "broad",
    "tier = one value (25%)": "acorn",  # integer values' links do not keep a walk's recall
}


def _matches(meta: Metadata, where: Node | None) -> bool:
    from ragline.core.filter_eval import matches

    return where is None or matches(where, meta)


def _exact_top(vecs: np.ndarray, metas: list[Metadata], qv: np.ndarray,
               where: Node | None, k: int = 10) -> list[str]:
    unit = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    scores = unit @ (qv / np.linalg.norm(qv))
    ok = np.array([_matches(m, where) for m in metas])
    scores[~ok] = -np.inf
    top = np.argsort(-scores)[:k]
    return [f"d{i}" for i in top if np.isfinite(scores[i])]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    path = tmp_path_factory.mktemp("edge-index")
    store = _store(path)
    store.create_shard("k", DIM)
    vecs, metas = _data(N)
    _fill(store, vecs, metas)
    assert store.index_status("k") == (N, 0)
    assert store.build_index("k") is True
    yield store, vecs, metas
    store.close()


def test_build_indexes_everything_and_links_the_filter_fields(built) -> None:  # type: ignore[no-untyped-def]
    store, _, _ = built
    points, indexed = store.index_status("k")
    assert points == N and indexed == N
    gen = store.table.host("k")
    schema = gen.schema()
    assert schema["metadata.cat"][1] and schema["metadata.tier"][1]  # both get links
    assert gen.linked() == {"cat"}  # walkable per value: keyword fields only
    assert current(store.root / "k").name == "g2"  # the build's generation is the live one
    assert not (store.root / "k" / "g1").exists()


@pytest.mark.parametrize("shape", list(SHAPES))
def test_recall_per_filter_shape_after_a_build(built, shape: str) -> None:  # type: ignore[no-untyped-def]
    store, vecs, metas = built
    where = SHAPES[shape]
    plan = store.plan("k", StoreQuery("default", SearchMode.DENSE, 10, vector=vecs[0],
                                      where=where))
    assert plan is not None and plan.kind == PLANS[shape]  # the production plan is tested
    rng = np.random.default_rng(7)
    found = total = 0
    for _ in range(40):
        qv = vecs[rng.integers(0, N)] + 0.2 * rng.normal(size=DIM).astype(np.float32)
        truth = _exact_top(vecs, metas, qv, where)
        hits = store.query_batch("k", [StoreQuery("default", SearchMode.DENSE, 10, vector=qv,
                                                  where=where)])[0]
        assert len(hits) == len(truth)  # never short
        assert all(_matches(h.metadata, where) for h in hits)
        found += len({h.id for h in hits} & set(truth))
        total += len(truth)
    assert found / total >= 0.99, f"{shape}: recall {found / total:.3f}"


def test_only_single_string_values_of_linked_fields_walk_their_links() -> None:
    from ragline.core.filters import And
    from ragline.providers.stores.qdrant_edge.queries import linked_fields_only

    linked = frozenset({"cat", "tier"})
    assert linked_fields_only(Eq("cat", "c1"), linked)
    assert linked_fields_only(And((Eq("cat", "c1"), Eq("tier", "2"))), linked)
    assert linked_fields_only(In("cat", ("c1",)), linked)
    assert not linked_fields_only(Eq("cat", 1), linked)  # a number: a range condition
    assert not linked_fields_only(In("cat", ("c1", "c2")), linked)  # 0.698 at 100k
    assert not linked_fields_only(Range("tier", "$lte", 1), linked)
    assert not linked_fields_only(Eq("other", "x"), linked)


def test_short_graph_answers_are_redone_exactly(tmp_path: Path) -> None:
    """A filter matching fewer points than asked for still returns all of them."""
    store = _store(tmp_path, exact_search_max_matches=0)
    store.create_shard("k", DIM)
    vecs, metas = _data(N, seed=3)
    metas[5]["rare"] = "yes"
    metas[17]["rare"] = "yes"
    _fill(store, vecs, metas)
    store.build_index("k")
    hits = store.query_batch("k", [StoreQuery("default", SearchMode.DENSE, 10, vector=vecs[0],
                                              where=Eq("rare", "yes"))])[0]
    assert sorted(h.id for h in hits) == ["d17", "d5"]
    store.close()


def test_searches_and_writes_during_a_build_stay_correct(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.create_shard("k", DIM)
    vecs, metas = _data(N + 1500, seed=1)
    _fill(store, vecs[:N], metas[:N])
    errors: list[str] = []
    written = [N]
    done = threading.Event()

    def writer() -> None:
        while not done.is_set() and written[0] < N + 1500:
            lo = written[0]
            _fill(store, vecs[lo:lo + 100], metas[lo:lo + 100], start=lo)
            written[0] = lo + 100

    def searcher() -> None:
        rng = np.random.default_rng(2)
        while not done.is_set():
            where = list(SHAPES.values())[int(rng.integers(0, len(SHAPES)))]
            qi = int(rng.integers(0, N))
            known = written[0]
            hits = store.query_batch("k", [StoreQuery("default", SearchMode.DENSE, 10,
                                                      vector=vecs[qi], where=where)])[0]
            truth = _exact_top(vecs[:known], metas[:known], vecs[qi], where)
            if truth and truth[0] not in {h.id for h in hits}:
                errors.append(f"nearest {truth[0]} missing for {where}")
            if len(hits) < len(truth):
                errors.append(f"short answer for {where}: {len(hits)}")
            if not all(_matches(h.metadata, where) for h in hits):
                errors.append(f"hit outside filter {where}")

    threads = [threading.Thread(target=writer), threading.Thread(target=searcher)]
    for t in threads:
        t.start()
    try:
        assert store.build_index("k") is True
    finally:
        done.set()
        for t in threads:
            t.join()
    assert errors == []
    n = written[0]
    assert store.count("k", "default", None) == n
    ids = [f"d{i}" for i in range(n)]
    assert len(store.get("k", "default", ids)) == n  # every acknowledged write survived
    store.close()
    reopened = _store(tmp_path)
    assert reopened.count("k", "default", None) == n
    assert sorted(p.name for p in (tmp_path / "k").iterdir() if p.is_dir()) == ["g2"]
    reopened.close()


def test_updates_and_deletes_during_builds_end_as_acknowledged(tmp_path: Path) -> None:
    """The build copies the live generation without flushing it (the files written
    during the copy are copied again under the write lock) and replays the journal:
    documents overwritten or deleted while builds run end exactly as last written."""
    store = _store(tmp_path, indexing_threshold_kb=1)
    store.create_shard("k", DIM)
    vecs, metas = _data(3000, seed=8)
    _fill(store, vecs, metas)
    want = {f"d{i}": (dict(metas[i]), vecs[i]) for i in range(3000)}
    done = threading.Event()
    rng = np.random.default_rng(9)

    def writer() -> None:
        k = 0
        while not done.is_set():
            k += 1
            ids = [int(i) for i in rng.choice(3000, 50, replace=False)]
            if k % 4 == 0:
                store.delete_ids("k", "default", [f"d{i}" for i in ids])
                for i in ids:
                    want.pop(f"d{i}", None)
                continue
            new = rng.normal(size=(50, DIM)).astype(np.float32)
            recs = [Record(f"d{i}", "t", {"cat": f"u{k}", "tier": k % 4}, new[j])
                    for j, i in enumerate(ids)]
            store.upsert("k", recs)
            for r in recs:
                want[r.id] = (dict(r.metadata), r.embedding)

    t = threading.Thread(target=writer)
    t.start()
    try:
        for _ in range(2):
            assert store.build_index("k") is True
    finally:
        done.set()
        t.join()
    for s in (store, None):
        s = s or _store(tmp_path)  # and after a restart
        got = {r.id: r for r in s.get("k", "default", [f"d{i}" for i in range(3000)],
                                      with_vectors=True)}
        assert set(got) == set(want)
        for i, (meta, vec) in want.items():
            assert got[i].metadata == meta, i
            assert got[i].embedding is not None
            assert np.allclose(got[i].embedding, vec, atol=1e-3), i
        s.close()


def test_writes_made_while_the_copy_is_taken_leave_every_point_reachable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Operations journaled before the copy is taken are in the copy; applied again
    after the build they would delete most of the fresh HNSW segment's points, and
    Edge's walk does not cross deleted points: the few left (written before the
    journal started) became unreachable by any ef (seen: 49 of 50 under SIGKILL
    chaos). The build process applies them before it optimizes instead."""
    from ragline.providers.stores.qdrant_edge import builder as rb

    store = _store(tmp_path)
    store.create_shard("k", DIM)
    vecs, metas = _data(2300, seed=5)
    _fill(store, vecs[:50], metas[:50])  # before the build: not in its journal
    copy = rb._copy

    def write_then_copy(src: Path, dst: Path, nice: int = 0) -> None:
        for lo in range(50, 2300, 50):  # journaled, and in the copy
            _fill(store, vecs[lo:lo + 50], metas[lo:lo + 50], start=lo)
        copy(src, dst, nice)

    monkeypatch.setattr(rb, "_copy", write_then_copy)
    assert store.build_index("k") is True
    assert store.index_status("k") == (2300, 2300)
    hits = store.query_batch("k", [StoreQuery("default", SearchMode.DENSE, 1, vector=vecs[i])
                                   for i in range(2300)])
    lost = [i for i, h in enumerate(hits) if not h or h[0].id != f"d{i}"]
    assert lost == []
    store.close()


_CHILD = r"""
import sys, threading
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from test_edge_indexing import _data, _fill, _store, DIM
store = _store(Path(sys.argv[1]))
start = int(sys.argv[2])
if not store.has_shard("k"):
    store.create_shard("k", DIM)
vecs, metas = _data(start + 4000, seed=5)

def builds():
    while True:
        store.build_index("k")

threading.Thread(target=builds, daemon=True).start()
print("ready", flush=True)
i = start
while i < start + 4000:
    _fill(store, vecs[i:i + 50], metas[i:i + 50], start=i)
    i += 50
    print("ack", i, flush=True)
threading.Event().wait()
"""


@pytest.mark.slow
def test_sigkill_during_background_builds_loses_no_acknowledged_write(tmp_path: Path) -> None:
    import random
    import signal
    import subprocess
    import sys
    import time

    here = str(Path(__file__).parent)
    rng = random.Random(18)
    acked = builds = 0
    for trial in range(10):  # ten kills at random moments of back-to-back builds
        proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(tmp_path), str(acked), here],
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + rng.uniform(1.0, 8.0)
        lines: list[str] = []
        reader = threading.Thread(target=lines.extend,
                                  args=(iter(proc.stdout.readline, ""),))
        reader.start()
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        reader.join()
        time.sleep(0.5)  # its build processes (cp, optimize) get SIGKILL via PDEATHSIG
        acks = [int(x.split()[1]) for x in lines if x.startswith("ack")]
        acked = max(acks, default=acked)
        builds += sum(1 for p in (tmp_path / "k").iterdir() if p.name.startswith("g"))
        store = _store(tmp_path)  # readable, with every acknowledged write
        ids = [f"d{i}" for i in range(acked)]
        assert len(store.get("k", "default", ids)) == acked, f"trial {trial}"
        first = store.get("k", "default", ["d0"], with_vectors=True)[0]
        hits = store.query_batch("k", [StoreQuery("default", SearchMode.DENSE, 3,
                                                  vector=first.embedding)])[0]
        assert hits and hits[0].id == "d0"
        live = [p.name for p in (tmp_path / "k").iterdir() if p.is_dir()]
        assert len(live) == 1, live  # unfinished or replaced generations are gone
        store.close()


def test_in_of_linked_values_splits_into_one_walk_per_value() -> None:
    from ragline.core.filters import And, Or
    from ragline.providers.stores.qdrant_edge.queries import MAX_SPLIT, split_by_value

    linked = frozenset({"cat", "tier"})
    assert split_by_value(In("cat", ("c1", "c2", "c1")), linked) == [Eq("cat", "c1"),
                                                                      Eq("cat", "c2")]
    assert split_by_value(And((Eq("tier", "1"), In("cat", ("a", "b")))), linked) == [
        And((Eq("tier", "1"), Eq("cat", "a"))), And((Eq("tier", "1"), Eq("cat", "b")))]
    assert split_by_value(In("cat", ("c1", 2)), linked) is None  # numbers are ranges
    assert split_by_value(In("cat", ("c1",)), linked) is None  # one value: walked as is
    assert split_by_value(In("other", ("a", "b")), linked) is None  # no links
    assert split_by_value(In("cat", tuple(f"c{i}" for i in range(MAX_SPLIT + 1))),
                          linked) is None
    assert split_by_value(And((Range("tier", "$lte", 1), In("cat", ("a", "b")))),
                          linked) is None
    assert split_by_value(Or((Eq("cat", "a"), Eq("cat", "b"))), linked) is None
    assert split_by_value(Range("tier", "$lte", 1), linked) is None  # 0.935-0.963 per value


def test_split_walks_merge_by_score_and_return_each_point_once(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.create_shard("k", DIM)
    vecs, metas = _data(2000, seed=5)
    metas[0]["cat"] = ["c1", "c2"]  # a list-valued field: under both values
    _fill(store, vecs, metas)
    assert store.build_index("k")
    where = In("cat", ("c1", "c2"))
    hits = store.query_batch("k", [StoreQuery("default", SearchMode.DENSE, 10,
                                              vector=vecs[0], where=where)])[0]
    assert [h.id for h in hits].count("d0") == 1 and hits[0].id == "d0"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert {h.id for h in hits} == set(_exact_top(vecs, metas, vecs[0], where))
    store.close()


def test_a_build_moves_indexes_to_the_configured_memory(tmp_path: Path) -> None:
    pinned = _store(tmp_path, index_memory="pinned")
    pinned.create_shard("k", DIM)
    vecs, metas = _data(1000, seed=6)
    _fill(pinned, vecs, metas)
    pinned.upsert("k", [Record(f"river{i}", "a boat on the river", {}, vecs[i])
                        for i in range(3)])
    schema = pinned.table.host("k").schema()  # path -> (type, links, cold)
    assert not any(cold for _, _, cold in schema.values())
    pinned.close()
    store = _store(tmp_path)  # the default: cold
    assert store.build_index("k")
    schema = store.table.host("k").schema()
    assert {"tenant", "doc_id", "text", "metadata.cat", "metadata.tier"} <= set(schema)
    assert not schema["tenant"][2]  # pinned: checked at every graph step
    assert all(cold for f, (_, _, cold) in schema.items() if f != "tenant")
    assert store.table.host("k").linked() == {"cat"}
    assert store.count("k", "default", Eq("cat", "c3")) == sum(
        m["cat"] == "c3" for m in metas)
    hits = store.query_batch("k", [StoreQuery("default", SearchMode.SPARSE, 5,
                                              text="rivers")])[0]
    assert sorted(h.id for h in hits) == ["river0", "river1", "river2"]  # BM25 rebuilt
    store.close()



# With a full-scan threshold of 30 KB (240 points of 32-d), no ``cat`` value (~200 points)
# gets links of its own, so the ``$in`` is walked one value at a time.
TENANT_PLANS = {**PLANS, "cat $in 3 values (15%)": "split"}


@pytest.fixture(scope="module")
def two_tenants(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """Tenant ``a``: the test collection; tenant ``b``: exact copies (vector and metadata)
    of a's first 100 points, so a plan that dropped the tenant condition would answer
    a's queries with b's copies (they tie with a's originals)."""
    store = _store(tmp_path_factory.mktemp("edge-tenants"), hnsw_full_scan_threshold_kb=30)
    store.create_shard("k", DIM)
    vecs, metas = _data(N, seed=11)
    for lo in range(0, N, 1000):
        store.upsert("k", [Record(f"a{i}", "t", metas[i], vecs[i], tenant="a")
                           for i in range(lo, lo + 1000)])
    store.upsert("k", [Record(f"b{i}", "t", metas[i], vecs[i], tenant="b") for i in range(100)])
    assert store.build_index("k")
    yield store, vecs, metas
    store.close()


@pytest.mark.parametrize("shape", list(SHAPES))
def test_each_plan_returns_the_exact_hits_of_the_tenant(two_tenants, shape: str) -> None:  # type: ignore[no-untyped-def]
    """Every plan (links, split, broad, ACORN, exact) gives the same hits as exact search
    over the tenant's own matching points, and none of another tenant's."""
    store, vecs, metas = two_tenants
    where = SHAPES[shape]
    picks = [i for i in range(100) if _matches(metas[i], where)][:8]
    assert picks
    for over in ({}, {"exact_search_max_matches": 10 * N}):  # the shape's plan, then exact
        store.config = store.config.model_copy(update=over)
        store.close()  # the generation takes its search settings when it opens (lazily)
        for i in picks:
            sq = StoreQuery("a", SearchMode.DENSE, 10, vector=vecs[i], where=where)
            plan = store.plan("k", sq)
            assert plan is not None
            # one value of a linked field walks its links whatever the count
            expect = TENANT_PLANS[shape]
            assert plan.kind == ("exact" if over and expect != "links" else expect)
            hits = store.query_batch("k", [sq])[0]
            assert all(h.id.startswith("a") for h in hits), [h.id for h in hits]
            truth = {f"a{j[1:]}" for j in _exact_top(vecs, metas, vecs[i], where)}
            assert {h.id for h in hits} == truth, (shape, plan.kind)
    store.config = store.config.model_copy(update={"exact_search_max_matches": N // 40})
    store.close()


F = TypeVar("F")


@contextlib.contextmanager
def _in_front(gen: Any, fake: F) -> Iterator[F]:
    """``fake`` as the Edge shard of generation ``gen`` (in this process) meanwhile."""
    real = gen.shard
    gen.shard = fake
    try:
        yield fake
    finally:
        gen.shard = real


class _ShortGraph:
    """An Edge shard whose graph searches drop all but 3 hits (an index that fails)."""

    def __init__(self, shard: object) -> None:
        self.shard = shard
        self.exact_runs = 0

    def _cut(self, req: object, pts: list[object]) -> list[object]:
        if getattr(getattr(req, "params", None), "exact", False):
            self.exact_runs += 1
            return pts
        return pts[:3]

    def query(self, req: object) -> list[object]:
        return self._cut(req, self.shard.query(req))  # type: ignore[attr-defined]

    def query_batch(self, batch: object) -> list[list[object]]:
        raise AssertionError("single queries only in this test")

    def __getattr__(self, name: str) -> object:
        return getattr(self.shard, name)


def _here(store: QdrantEdgeStore) -> Generation:
    """The store's live generation of ``k``, closed there and opened in this process as a
    host opens it, so that a test can put a fake in front of the Edge shard."""
    path = current(store.root / "k")
    store.close()
    return open_generation("open", path, DIM, store.config)


@pytest.fixture(scope="module")
def built_here(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The test collection's built generation in this process."""
    store = _store(tmp_path_factory.mktemp("edge-here"))
    store.create_shard("k", DIM)
    vecs, metas = _data(N)
    _fill(store, vecs, metas)
    assert store.build_index("k") is True
    gen = _here(store)
    yield gen, vecs, metas
    gen.close()


@pytest.mark.parametrize("shape", [s for s in SHAPES if PLANS[s] != "exact"])
def test_a_graph_plan_that_answers_short_is_redone_exactly(built_here, shape: str) -> None:  # type: ignore[no-untyped-def]
    """The plan's match count is only Edge's estimate, so any graph answer with fewer
    hits than asked for is re-run exactly: a failing index never shortens an answer."""
    gen, vecs, metas = built_here
    where = SHAPES[shape]
    with _in_front(gen, _ShortGraph(gen.shard)) as fake:
        hits = gen.query_batch([StoreQuery("default", SearchMode.DENSE, 10,
                                           vector=vecs[1], where=where)])[0]
    assert fake.exact_runs == 1
    assert {h.id for h in hits} == set(_exact_top(vecs, metas, vecs[1], where))


def test_values_grown_since_the_build_are_not_walked_as_linked(tmp_path: Path) -> None:
    """Links are made at a build for the values large enough then: a collection whose
    values outgrew Edge's full-scan threshold only after its build has no links for them
    in its indexed segment, so an ``$in`` of them is not one walk over the union (it ran
    on the plain graph at recall@10 0.56-0.74 at 100k) and stays exact."""
    store = _store(tmp_path, hnsw_full_scan_threshold_kb=30)  # 240 points of 32-d
    store.create_shard("k", DIM)
    vecs, metas = _data(N + 2000, seed=13)
    _fill(store, vecs[:N], metas[:N])
    assert store.build_index("k")
    where = In("cat", ("c1", "c2", "c7"))
    sq = StoreQuery("default", SearchMode.DENSE, 10, vector=vecs[0], where=where)
    assert store.plan("k", sq).kind == "split"  # type: ignore[union-attr]  # ~200 a value
    _fill(store, vecs[N:], metas[N:], start=N)  # ~300 a value now, 2/3 of them indexed
    assert min(store.count("k", "default", Eq("cat", c)) for c in ("c1", "c2", "c7")) > 240
    plan = store.plan("k", sq)
    assert plan is not None and plan.kind != "links"
    hits = store.query_batch("k", [sq])[0]
    assert {h.id for h in hits} == set(_exact_top(vecs, metas, vecs[0], where))
    store.close()


def test_writes_send_points_prepared_before_the_write_lock(tmp_path: Path) -> None:
    """An upsert's points are made before the write lock (``Generation.prepare``) and
    the generation gets only their token under it; the journal of a build still gets
    the upsert itself. A write that fails under the lock leaves nothing prepared."""
    store = _store(tmp_path)
    store.create_shard("k", DIM)
    vecs, metas = _data(300, seed=21)
    host = store.table.host("k")
    assert host is not None
    sent: list[str] = []
    real = host.begin

    def spy(method: str, *args: Any) -> Any:
        if method == "write":
            sent.extend(op[0] for op in args[0])
        return real(method, *args)

    host.begin = spy  # type: ignore[method-assign]
    entry = store.table.start_journal("k")
    assert entry is not None
    _fill(store, vecs[:200], metas[:200])
    assert "upsert_prepared" in sent and "upsert" not in sent
    upserts = [op for op in store.table.journal(entry) if op[0].startswith("upsert")]
    assert [op[0] for op in upserts] == ["upsert"] and len(upserts[0][1]) == 200
    store.table.end_journal(entry)
    assert store.count("k", "default", None) == 200
    assert host.prepared_count() == 0

    def refuse(metadatas):  # type: ignore[no-untyped-def]
        raise RuntimeError("refused under the lock")

    real_observe = entry.fields.observe
    entry.fields.observe = refuse
    with pytest.raises(RuntimeError, match="refused under the lock"):
        _fill(store, vecs[200:300], metas[200:300], start=200)
    entry.fields.observe = real_observe
    assert host.prepared_count() == 0  # forgotten, not leaked
    assert store.count("k", "default", None) == 200
    store.close()


def test_points_are_not_made_while_another_write_runs_in_edge(tmp_path: Path) -> None:
    """Point making and Edge's updates take turns in a generation (two threads doing
    both at once cost more CPU than one after the other: Generation.prepare). A
    prepare that arrives during a write waits for it, then makes the same points."""
    cfg = QdrantEdgeConfig(path=tmp_path)
    gen = open_generation("create", tmp_path / "g1", DIM, cfg)
    shard = gen.shard
    events: list[str] = []
    entered, release = threading.Event(), threading.Event()

    class SlowShard:  # Edge's shard with an update that holds on until released
        def update(self, op: object) -> None:
            events.append("update begins")
            entered.set()
            assert release.wait(10)
            shard.update(op)
            events.append("update ends")

        def __getattr__(self, name: str) -> object:
            return getattr(shard, name)

    gen.shard = SlowShard()
    vecs, _ = _data(2, seed=5)
    payload = {"doc_id": "a", "text": "a", "tenant": "default", "metadata": {}, "norm": 1.0}
    writer = threading.Thread(target=gen.write, args=([(
        "upsert", [point_id("default", "a")], vecs[:1], [payload])],))
    writer.start()
    assert entered.wait(10)
    tokens: list[int] = []
    preparer = threading.Thread(target=lambda: tokens.append(gen.prepare(
        [point_id("default", "b")], vecs[1:], [{**payload, "doc_id": "b"}])))
    preparer.start()
    preparer.join(0.3)
    assert preparer.is_alive() and not tokens  # waiting for the update
    release.set()
    writer.join(10)
    preparer.join(10)
    assert events == ["update begins", "update ends"] and len(tokens) == 1
    gen.write([("upsert_prepared", tokens[0])])
    gen.shard = shard
    assert gen.count("default", None) == 2
    gen.close()


def test_a_write_prepared_before_a_swap_lands_in_the_new_generation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Points prepared in a generation that a build replaces before the write takes its
    lock are not written there: the new generation gets the upsert itself."""
    store = _store(tmp_path)
    store.create_shard("k", DIM)
    vecs, metas = _data(N + 100, seed=22)
    _fill(store, vecs[:N], metas[:N])
    old = store.table.host("k")
    writing = store.table.writing
    swapped: list[bool | None] = []

    def build_first(key: str):  # type: ignore[no-untyped-def]
        if not swapped:  # the upsert's first call (the build takes the lock too)
            swapped.append(None)
            swapped[0] = store.build_index("k")
        return writing(key)

    monkeypatch.setattr(store.table, "writing", build_first)
    moved = [dict(metas[i], tier=9) for i in range(10)]  # ten updates, 100 new points
    store.upsert("k", [Record(f"d{i}", "t", moved[i], vecs[i]) for i in range(10)]
                 + [Record(f"d{i}", "t", metas[i], vecs[i]) for i in range(N, N + 100)])
    assert swapped == [True] and store.table.host("k") is not old
    assert store.count("k", "default", None) == N + 100
    assert store.count("k", "default", Eq("tier", 9)) == 10
    got = {r.id: r.metadata["tier"] for r in store.get("k", "default", ["d0", f"d{N}"])}
    assert got == {"d0": 9, f"d{N}": metas[N]["tier"]}
    store.close()


class _Requests:
    """An Edge shard that records the filters of the searches it runs."""

    def __init__(self, shard: object) -> None:
        self.shard = shard
        self.filters: list[str] = []

    def query(self, req: object) -> list[object]:
        self.filters.append(repr(getattr(req, "filter", None)))
        return self.shard.query(req)  # type: ignore[attr-defined,no-any-return]

    def query_batch(self, batch: object) -> list[list[object]]:
        raise AssertionError("single queries only in this test")

    def __getattr__(self, name: str) -> object:
        return getattr(self.shard, name)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_shard_of_one_tenant_is_searched_without_the_tenant_condition(
        built_here, shape: str) -> None:  # type: ignore[no-untyped-def]
    """Edge checks a search's tenant condition at every point its walk visits; where
    every point is the tenant's it selects them all, so it is left out (x0.5 the time
    of a ``cat`` search at 100k), and the hits are still the exact ones. Another
    tenant's searches keep it (and find nothing)."""
    gen, vecs, metas = built_here
    assert gen.alone("default") and not gen.alone("someone-else")
    where = SHAPES[shape]
    with _in_front(gen, _Requests(gen.shard)) as rec:
        hits = gen.query_batch([StoreQuery("default", SearchMode.DENSE, 10,
                                           vector=vecs[2], where=where)])[0]
        mine = list(rec.filters)
        none = gen.query_batch([StoreQuery("someone-else", SearchMode.DENSE, 10,
                                           vector=vecs[2], where=where)])[0]
    assert mine and not any('key="tenant"' in f for f in mine), mine
    assert [h.id for h in hits] == _exact_top(vecs, metas, vecs[2], where)
    assert none == []
    assert 'key="tenant"' in rec.filters[-1]


@pytest.fixture(scope="module")
def two_tenants_here(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """:func:`two_tenants` with the generation in this process."""
    store = _store(tmp_path_factory.mktemp("edge-tenants-here"), hnsw_full_scan_threshold_kb=30)
    store.create_shard("k", DIM)
    vecs, metas = _data(N, seed=11)
    for lo in range(0, N, 1000):
        store.upsert("k", [Record(f"a{i}", "some words", metas[i], vecs[i], tenant="a")
                           for i in range(lo, lo + 1000)])
    store.upsert("k", [Record(f"b{i}", "some words", metas[i], vecs[i], tenant="b")
                       for i in range(100)])
    assert store.build_index("k")
    gen = _here(store)
    yield gen, vecs, metas
    gen.close()


@pytest.mark.parametrize("mode", [SearchMode.DENSE, SearchMode.HYBRID, SearchMode.SPARSE])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_hit_of_another_tenant_runs_the_search_again_with_the_tenant_condition(
        two_tenants_here, shape: str, mode: SearchMode) -> None:  # type: ignore[no-untyped-def]
    """Whatever the count behind :meth:`Generation.alone` says (here it is made to say
    "alone" on a shard where tenant ``b`` holds exact copies of 100 of ``a``'s points, as a
    write of ``b`` racing the plan would make it), no hit of another tenant comes back,
    and the answer is the full, exact one."""
    gen, vecs, metas = two_tenants_here
    assert not gen.alone("a")
    where = SHAPES[shape]
    i = next(j for j in range(100) if _matches(metas[j], where))  # b has a copy of it
    gen.alone = lambda tenant, info=None: True  # type: ignore[method-assign]
    try:
        hits = gen.query_batch([StoreQuery("a", mode, 10, vector=vecs[i], text="words",
                                           where=where)])[0]
    finally:
        del gen.alone
    assert hits and all(h.id.startswith("a") for h in hits), [h.id for h in hits]
    if mode == SearchMode.DENSE:
        assert {h.id for h in hits} == {f"a{j[1:]}" for j in
                                       _exact_top(vecs, metas, vecs[i], where)}
    else:
        assert len(hits) == 10


def test_a_shard_is_one_tenants_again_once_the_others_points_are_deleted(
        tmp_path: Path) -> None:
    """The count behind :meth:`Generation.alone` follows deletes, in the built segment
    and in the one written since."""
    store = _store(tmp_path)
    store.create_shard("k", DIM)
    vecs, metas = _data(1200, seed=5)
    store.upsert("k", [Record(f"a{i}", "t", metas[i], vecs[i], tenant="a") for i in range(1000)])
    store.upsert("k", [Record(f"b{i}", "t", metas[i], vecs[i], tenant="b") for i in range(100)])
    assert store.build_index("k")
    store.upsert("k", [Record(f"b{i}", "t", metas[i], vecs[i], tenant="b")
                       for i in range(1000, 1100)])
    gen = store.table.host("k")
    assert not gen.alone("a")
    assert store.delete_ids("k", "b", [f"b{i}" for i in range(100)]) == 100
    assert not gen.alone("a")  # b's points written since the build
    assert store.delete_where("k", "b", None) == 100
    assert gen.alone("a") and not gen.alone("b")
    store.close()


def test_counts_stay_exact_through_overwrites_deletes_and_builds(tmp_path: Path) -> None:
    """An unfiltered count on a one-tenant shard is the shard's point count (no walk over
    every point): it must equal the exact count, and the true one, after every kind of
    write, before and after a build, and while another tenant has points there."""
    store = _store(tmp_path)
    store.create_shard("k", DIM)
    vecs, metas = _data(1500, seed=9)
    rng = np.random.default_rng(9)
    have: dict[str, set[str]] = {"a": set(), "b": set()}

    def write(tenant: str, ids: list[int]) -> None:
        store.upsert("k", [Record(f"{tenant}{i}", "t", metas[i], vecs[i], tenant=tenant)
                           for i in ids])
        have[tenant] |= {f"{tenant}{i}" for i in ids}

    def check() -> None:
        for tenant in have:  # every point has a tier: Edge's exact count of the filter
            exact = store.count("k", tenant, Range("tier", "$gte", 0))
            assert store.count("k", tenant, None) == exact == len(have[tenant])
            assert store.list_page("k", tenant, None, 5, 0).total == len(have[tenant])

    write("a", list(range(1000)))
    check()
    write("a", [int(i) for i in rng.integers(0, 1000, 300)])  # overwrites
    check()
    assert store.build_index("k")
    write("a", list(range(900, 1200)))  # overwrites of built points, and new ones
    check()
    gone = [f"a{i}" for i in range(0, 1200, 7)]
    assert store.delete_ids("k", "a", gone) == len(gone)
    have["a"] -= set(gone)
    check()
    write("b", list(range(50)))  # another tenant: the exact count answers
    check()
    assert store.delete_where("k", "b", None) == 50
    have["b"].clear()
    check()
    assert store.build_index("k")
    check()
    gen = store.table.host("k")  # a build swapped the generation
    assert gen.alone("a") and not gen.alone("b")
    store.close()


def test_a_readers_scope_keeps_the_one_tenant_shortcut_and_the_hit_check(
        tmp_path: Path) -> None:
    """A reader's scope ``(tenant, '*')`` (issue 33): a shard holding only that tenant's and
    the shared corpus's points is searched without the tenant condition and answers both;
    another reader's scope keeps the condition and finds the shared points only; a plan
    wrongly told "alone" still returns no point outside the scope."""
    store = _store(tmp_path)
    store.create_shard("k", DIM)
    vecs, metas = _data(1100, seed=7)
    store.upsert("k", [Record(f"a{i}", "some words", metas[i], vecs[i], tenant="a")
                       for i in range(1000)])
    store.upsert("k", [Record(f"s{i}", "some words", metas[i], vecs[i], tenant="*")
                       for i in range(1000, 1100)])
    assert store.build_index("k")
    gen = _here(store)
    assert gen.alone(("a", "*")) and not gen.alone("a")
    assert not gen.alone(("b", "*")) and gen.alone(("a", "*", "b"))
    near_shared = vecs[1050]
    with _in_front(gen, _Requests(gen.shard)) as rec:
        hits = gen.query_batch([StoreQuery(("a", "*"), SearchMode.DENSE, 5,
                                           vector=near_shared)])[0]
        assert not any('key="tenant"' in f for f in rec.filters), rec.filters
    assert hits[0].id == "s1050" and hits[0].tenant == "*"
    assert gen.count(("a", "*"), None) == 1100
    other = gen.query_batch([StoreQuery(("b", "*"), SearchMode.DENSE, 200,
                                        vector=vecs[3])])[0]
    assert other and all(h.id.startswith("s") for h in other)
    assert len(other) == 100
    gen.alone = lambda tenant, info=None: True  # type: ignore[method-assign]
    try:
        for mode in (SearchMode.DENSE, SearchMode.HYBRID, SearchMode.SPARSE):
            again = gen.query_batch([StoreQuery(("b", "*"), mode, 10, vector=vecs[3],
                                                text="words")])[0]
            assert again and all(h.tenant == "*" for h in again), mode
    finally:
        del gen.alone
    gen.close()
