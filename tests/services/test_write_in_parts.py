"""Large batches of pre-computed vectors are written in parts (issue 18, item 3).

``DocumentService`` checks such a batch's vectors part by part while the store makes
the points of the parts before (``VectorStore.upsert_parts``); one write stores them
all. These tests pin what must not change with that: what is stored, the error (and
the document it names) for a bad batch, nothing written on any error, and no points
left behind in the generation for a write that did not happen.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragline.errors import InsufficientStorage, InvalidInput
from ragline.facade import Ragline
from ragline.library import Library
from ragline.providers.stores.qdrant_edge.provider import QdrantEdgeStore
from ragline.services.corpus import documents
from ragline.services.corpus.documents import WRITE_PART
from tests.ingestion_support import fake_settings

DIM = 8
N = 3 * WRITE_PART + 10  # three parts, the last one longer (no short last part)


def chunks(n: int, seed: int = 0, prefix: str = "d") -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    return [{"id": f"{prefix}{i}", "text": f"chunk {i}",
             "embedding": [float(x) for x in rng.normal(size=DIM)],
             "metadata": {"cat": f"c{i % 5}", "n": i}} for i in range(n)]


@pytest.fixture
def rl(tmp_path: Path) -> Iterator[Ragline]:
    settings = fake_settings(tmp_path, background_indexing=False)
    r = Ragline(settings).start()
    r.collections.create(r.owner(), "c")
    # the shard exists and its dimension is known
    write(r, chunks(3, seed=99, prefix="first-"))
    try:
        yield r
    finally:
        r.close()


@pytest.fixture
def parts_made(rl: Ragline, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the parts whose points the Edge store was asked to make."""
    sizes: list[int] = []
    store = rl.services.store
    assert isinstance(store, QdrantEdgeStore)
    real = store._point_args

    def spy(records: list[Any]) -> Any:
        sizes.append(len(records))
        return real(records)

    monkeypatch.setattr(store, "_point_args", spy)
    return sizes


def write(rl: Ragline, batch: list[dict[str, Any]]) -> list[str]:
    chunks: list[Mapping[str, Any]] = list(batch)
    return Library(rl, rl.owner()).store_batch("c", chunks)


def count(rl: Ragline) -> int:
    return rl.services.documents.count("c", "default")


def prepared_left(rl: Ragline) -> int:
    """Parts whose points were made and neither written nor forgotten, in the
    generation's host process."""
    store = rl.services.store
    assert isinstance(store, QdrantEdgeStore)
    host = store.table.host(rl.services.collections.get("c").shard)
    assert host is not None
    count: int = host.prepared_count()
    return count


def test_a_batch_in_parts_is_stored_as_sent(rl: Ragline, parts_made: list[int]) -> None:
    batch = chunks(N, seed=1)
    ids = write(rl, batch)
    assert ids == [c["id"] for c in batch]
    assert parts_made == [WRITE_PART, WRITE_PART, N - 2 * WRITE_PART]
    assert count(rl) == N + 3
    got = rl.services.store.get(rl.services.collections.get("c").shard, "default", ids,
                                with_vectors=True)
    assert [r.id for r in got] == ids
    for rec, sent in zip(got, batch, strict=True):
        assert rec.text == sent["text"] and rec.metadata == sent["metadata"]
        assert rec.embedding is not None
        want = np.asarray(sent["embedding"], dtype=np.float32)
        assert np.allclose(rec.embedding, want, rtol=1e-6, atol=0)
    assert prepared_left(rl) == 0


def test_a_small_batch_is_one_part(rl: Ragline, parts_made: list[int]) -> None:
    write(rl, chunks(2 * WRITE_PART - 1, seed=2))
    assert parts_made == [2 * WRITE_PART - 1]


def test_a_bad_vector_in_the_last_part_names_it_and_writes_nothing(
        rl: Ragline, parts_made: list[int]) -> None:
    batch = chunks(N, seed=3)
    batch[N - 2]["embedding"][4] = "0.5"
    with pytest.raises(InvalidInput) as err:
        write(rl, batch)
    assert str(err.value) == (f"Invalid embedding format for document at index {N - 2}: "
                              "embedding must be an array of numbers, found str")
    assert parts_made == [WRITE_PART, WRITE_PART]  # the third failed its check: not sent
    assert count(rl) == 3
    assert prepared_left(rl) == 0
    assert rl.services.documents.get("c", "default", "d0") is None


def test_a_dimension_change_in_a_later_part_names_the_same_documents(rl: Ragline) -> None:
    batch = chunks(N, seed=4)
    batch[WRITE_PART + 7]["embedding"] = batch[WRITE_PART + 7]["embedding"][:DIM - 1]
    with pytest.raises(InvalidInput) as err:
        write(rl, batch)
    assert str(err.value) == (
        f"Embedding dimension mismatch: document at index {WRITE_PART + 7} has {DIM - 1} "
        f"dimensions, but document at index 0 has {DIM}")
    assert count(rl) == 3


def test_the_collections_dimension_is_checked_as_before(rl: Ragline) -> None:
    batch = chunks(N, seed=5)
    for c in batch:
        c["embedding"] = c["embedding"] + [1.0]
    with pytest.raises(InvalidInput) as err:
        write(rl, batch)
    assert str(err.value) == ("Embedding dimension mismatch for the documents: collection "
                              f"'c' expects {DIM} dimensions, got {DIM + 1}")
    assert count(rl) == 3


def test_a_full_disk_refuses_the_batch_before_it_is_written(rl: Ragline,
                                                           parts_made: list[int]) -> None:
    guard = rl.services.documents.disk
    guard.reserve, guard.free = 1, lambda _p: 1_000  # far less than the batch needs
    with pytest.raises(InsufficientStorage):
        write(rl, chunks(N, seed=6))
    assert len(parts_made) == 2  # the last part is checked before the write, not sent
    assert count(rl) == 3
    assert prepared_left(rl) == 0


def test_rewriting_the_same_ids_in_parts_replaces_them(rl: Ragline) -> None:
    write(rl, chunks(N, seed=7))
    again = chunks(N, seed=8)
    for c in again:
        c["text"] = "new " + c["text"]
    write(rl, again)
    assert count(rl) == N + 3
    got = rl.services.documents.get("c", "default", f"d{N - 1}")
    assert got is not None and got.text == f"new chunk {N - 1}"


def test_many_parts_hold_at_most_two_connections_to_the_host_process(
        rl: Ragline, parts_made: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(documents, "WRITE_PART", 10)
    write(rl, chunks(205, seed=9))
    assert parts_made == [10] * 19 + [15]
    assert count(rl) == 205 + 3
    assert prepared_left(rl) == 0
    store = rl.services.store
    assert isinstance(store, QdrantEdgeStore)
    host = store.table.host(rl.services.collections.get("c").shard)
    assert host is not None  # one socket per call in flight
    assert 1 <= host.sockets <= 2  # PREPARES_IN_FLIGHT; not one per part (20)


def test_numpy_rows_are_one_part(rl: Ragline, parts_made: list[int]) -> None:
    """Rows already in a matrix (what the HTTP body reader makes) cost next to nothing to
    check: nothing to overlap, so no parts."""
    batch = chunks(N, seed=10)
    for c in batch:
        c["embedding"] = np.asarray(c["embedding"])
    write(rl, batch)
    assert parts_made == [N]
    assert count(rl) == N + 3


def test_an_empty_upsert_is_a_no_op_even_without_a_shard(rl: Ragline) -> None:
    store = rl.services.store
    store.upsert("no-such-shard", [])
    assert not store.has_shard("no-such-shard")
