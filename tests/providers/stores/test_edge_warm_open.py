"""Generations open warm (issue 18): their built segments' files are read in order
before Edge loads them and their payload indexes stay mapped while they are open
(:mod:`ragline.providers.stores.qdrant_edge.resident`); and the swap's count check
no longer walks every id."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from ragline.core.filters import Eq
from ragline.core.types import Record, SearchMode, StoreQuery
from ragline.errors import StoreError
from ragline.providers.stores.qdrant_edge import builder, resident
from ragline.providers.stores.qdrant_edge.generations import current
from ragline.providers.stores.qdrant_edge.host import open_generation
from ragline.providers.stores.qdrant_edge.provider import QdrantEdgeConfig, QdrantEdgeStore

DIM = 32
N = 3000


def _store(path: Path, **over: object) -> QdrantEdgeStore:
    cfg = {"path": path, "hnsw_full_scan_threshold_kb": 2, "indexing_threshold_kb": 20,
           "exact_search_max_matches": 50, **over}
    return QdrantEdgeStore(QdrantEdgeConfig(**cfg))  # type: ignore[arg-type]


def _records(n: int, start: int = 0, seed: int = 0) -> list[Record]:
    rng = np.random.default_rng(seed)
    vecs = rng.normal(size=(n, DIM)).astype(np.float32)
    return [Record(f"d{start + i}", f"text {start + i}", {"cat": f"c{(start + i) % 7}"},
                   vecs[i]) for i in range(n)]


def _built(path: Path, **over: object) -> QdrantEdgeStore:
    store = _store(path, **over)
    store.create_shard("k", DIM)
    recs = _records(N)
    for lo in range(0, N, 1000):
        store.upsert("k", recs[lo:lo + 1000])
    store.upsert("k", [Record("late", "late text", {"cat": "c1"}, recs[0].embedding)])
    assert store.build_index("k") is True
    store.upsert("k", [Record("after", "after text", {"cat": "c2"}, recs[1].embedding)])
    return store


def _segments(gen_dir: Path) -> tuple[set[Path], set[Path]]:
    """(built, appendable) segment directories of a generation."""
    segs = [s for s in (gen_dir / "segments").iterdir() if s.is_dir()]
    built = {s for s in segs if any(s.glob("vector_index-*"))}
    return built, set(segs) - built


@pytest.fixture(scope="module")
def here(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    store = _built(tmp_path_factory.mktemp("warm-here"))
    yield store
    store.close()


def test_only_the_built_segments_files_that_searches_read_are_chosen(here) -> None:  # type: ignore[no-untyped-def]
    path = current(here.root / "k")
    built, appendable = _segments(path)
    assert built and appendable  # the build's segment, and the one "after" went to
    index = resident.index_files(path)
    every = resident.search_files(path)
    assert index and every[-len(index):] == index  # vectors and links first
    for f in every:
        rel = f.relative_to(path)
        assert rel.parts[0] == "segments" and path / "segments" / rel.parts[1] in built
        assert rel.parts[2].startswith(("vector_storage-", "vector_index-", "payload_index",
                                        "id_tracker")), rel
    for f in index:
        assert f.relative_to(path).parts[2].startswith(("payload_index", "id_tracker"))
    # the filter field's index is among them
    assert any("metadata" in str(f) for f in index)
    assert any(f.relative_to(path).parts[2].startswith("vector_storage-") for f in every)


def test_hold_maps_the_index_files_as_they_are_and_keeps_to_its_budget(here) -> None:  # type: ignore[no-untyped-def]
    path = current(here.root / "k")
    files = [f for f in resident.index_files(path) if f.stat().st_size]
    held, total = resident.hold(path, budget=1 << 40)
    try:
        assert len(held) == len(files)
        assert total == sum(f.stat().st_size for f in files)
        for m, f in zip(held, files, strict=True):
            assert m[:] == f.read_bytes()  # a mapping of that very file
    finally:
        resident.release(held)
    assert held == []
    assert resident.hold(path, budget=0) == ([], 0)
    first = files[0].stat().st_size
    some, total = resident.hold(path, budget=first)
    try:
        assert total <= first and len(some) >= 1
    finally:
        resident.release(some)


def test_a_generation_lets_its_mappings_go_when_closed(tmp_path: Path) -> None:
    """Opened cold, nothing is held; held mappings end with the generation."""
    store = _built(tmp_path)
    path = current(store.root / "k")
    store.close()
    gen = open_generation("open", path, DIM, QdrantEdgeConfig(path=tmp_path, warm_open=False))
    assert gen._resident == []
    held = gen.keep_resident(str(path))
    mappings = list(gen._resident)
    assert mappings and held == sum(len(m) for m in mappings) == sum(
        f.stat().st_size for f in resident.index_files(path))
    gen.close()
    assert all(m.closed for m in mappings)


@pytest.mark.parametrize("warm", [True, False])
def test_a_host_keeps_its_generations_indexes_mapped(tmp_path: Path, warm: bool) -> None:
    store = _built(tmp_path, warm_open=warm)
    try:
        host = store.table.host("k")
        assert host is not None
        maps = Path(f"/proc/{host.pid}/maps").read_text()
        index = [f for f in resident.index_files(current(store.root / "k"))
                 if f.stat().st_size]
        assert index
        # Edge maps some of them itself (cold indexes): with warm_open off, not all
        assert all(str(f) in maps for f in index) is warm
        hits = store.query_batch("k", [StoreQuery("default", SearchMode.DENSE, 3,
                                                  vector=_records(1)[0].embedding,
                                                  where=Eq("cat", "c0"))])[0]
        assert hits and all(h.metadata["cat"] == "c0" for h in hits)
    finally:
        store.close()


@pytest.mark.skipif(shutil.which("fincore") is None, reason="needs util-linux's fincore")
def test_read_ahead_brings_the_files_back_into_the_page_cache(tmp_path: Path) -> None:
    store = _built(tmp_path)
    path = current(store.root / "k")
    before = store.query_batch("k", [StoreQuery("default", SearchMode.DENSE, 5,
                                                vector=_records(1)[0].embedding)])[0]
    store.close()  # nothing maps the files now
    files = resident.search_files(path)

    def resident_bytes() -> int:
        out = subprocess.run(["fincore", "-nb", "-o", "RES", *map(str, files)],
                             capture_output=True, text=True, check=True).stdout
        return sum(int(x) for x in out.split())

    for f in files:
        fd = os.open(f, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    size = sum(f.stat().st_size for f in files)
    assert resident_bytes() < size
    assert resident.read_ahead(path) == size
    assert resident_bytes() >= size - 4096 * len(files)  # page rounding of the tails
    assert resident.read_ahead(path, budget=0) == 0
    again = _store(tmp_path)
    try:
        after = again.query_batch("k", [StoreQuery("default", SearchMode.DENSE, 5,
                                                   vector=_records(1)[0].embedding)])[0]
        assert [(h.id, round(h.score, 5)) for h in after] == [
            (h.id, round(h.score, 5)) for h in before]
    finally:
        again.close()


def test_a_build_that_lost_a_write_is_not_swapped_in(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The swap compares Edge's point counters of both generations: a replay that
    dropped a write fails the build and the live generation keeps serving."""
    store = _store(tmp_path)
    try:
        store.create_shard("k", DIM)
        store.upsert("k", _records(1500))
        monkeypatch.setattr(builder, "replay", lambda host, entries: None)
        wrote: list[bool] = []

        def write_once() -> bool:  # polled while the build process runs
            if not wrote:
                wrote.append(True)
                store.upsert("k", _records(1, start=5000, seed=9))
            return False

        with pytest.raises(StoreError, match="holds 1500 points, not 1501"):
            store.build_index("k", write_once)
        assert wrote
        assert [r.id for r in store.get("k", "default", ["d5000"], False)] == ["d5000"]
        assert store.count("k", "default", None) == 1501
        assert store.index_status("k") == (1501, 0)  # the old generation still serves
    finally:
        store.close()


def test_a_generation_opens_when_the_read_ahead_cannot_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The read-ahead only saves time: without a ``cat`` to run, it reads nothing and
    the generation opens and answers as usual."""
    store = _built(tmp_path)
    path = current(store.root / "k")
    store.close()

    def no_cat(*args: object, **kwargs: object) -> None:
        raise FileNotFoundError("cat")

    monkeypatch.setattr(subprocess, "run", no_cat)
    assert resident.read_ahead(path) == 0
    gen = open_generation("open", path, DIM, QdrantEdgeConfig(path=tmp_path))  # as a host
    try:
        assert gen.count("default", None) == N + 2
    finally:
        gen.close()
