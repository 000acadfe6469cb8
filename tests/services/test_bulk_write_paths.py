"""The fast paths of bulk writes (issue 18) agree with the exact checks they skip.

Each fast path only ever says "certainly fine"; anything else goes through the exact
per-document checks, so these tests pin that the two never disagree on what passes,
and that what a store is handed is what it would have been handed before.
"""

from __future__ import annotations

import gc
import json
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragline.core.ids import POINT_NAMESPACE, point_id
from ragline.core.types import Record
from ragline.errors import RaglineError
from ragline.observability.memory import tune_gc_for_serving
from ragline.providers.stores.qdrant_edge.provider import QdrantEdgeConfig, QdrantEdgeStore
from ragline.services.corpus.validation import (
    InputLimits,
    check_metadata,
    check_metadata_size,
    check_vectors,
    metadata_fits,
)


@pytest.mark.parametrize(("tenant", "doc_id"), [
    ("default", "d1"), ("t", "é✓🙂"), ("", ""), ("a" * 300, "x\x1fy"), ("t", "0" * 5000)])
def test_point_id_is_uuid5_of_tenant_and_id(tenant: str, doc_id: str) -> None:
    assert point_id(tenant, doc_id) == str(uuid.uuid5(POINT_NAMESPACE, f"{tenant}\x1f{doc_id}"))


def test_point_id_refuses_what_uuid5_refuses() -> None:
    with pytest.raises(UnicodeEncodeError):
        uuid.uuid5(POINT_NAMESPACE, "t\x1f\ud800")
    with pytest.raises(UnicodeEncodeError):
        point_id("t", "\ud800")


METAS: list[Any] = [
    None, {}, {"a": "x"}, {"n": 3, "f": 0.5, "b": True, "z": None},
    {"big": 2**63 - 1}, {"small": -(2**63)}, {"over": 2**63}, {"under": -(2**63) - 1},
    {"nan": float("nan")}, {"inf": float("inf")}, {"ninf": float("-inf")},
    {"list": [1, "a", True]}, {"badlist": [1, [2]]}, {"obj": {"x": 1}},
    {"$op": 1}, {"": 1}, {'q"uote': 1}, {"back\\slash": 1}, {1: "int key"},
    "not a dict", [1, 2], {"surrogate": "\ud800"},
    {"e": 1e16, "g": 1e-05, "h": 1.5e300},
    {f"k{i}": 1e-300 for i in range(40)},
    {"s": "ü" * 60}, {"s": "\n\t\x01" * 30},
]


@pytest.mark.parametrize("meta", METAS, ids=range(len(METAS)))
@pytest.mark.parametrize("limit", [40, 200, 1000, 65_536])
def test_metadata_fast_path_never_passes_what_the_exact_checks_refuse(
        meta: Any, limit: int) -> None:
    limits = InputLimits(max_metadata_bytes=limit)
    try:
        check_metadata_size(check_metadata(meta, "document at index 0"), limits,
                            "document at index 0")
        exact_ok = True
    except (RaglineError, UnicodeEncodeError):
        exact_ok = False
    if metadata_fits(meta, limits):
        assert exact_ok
    if exact_ok and meta is not None and isinstance(meta, dict) and all(
            type(v) in (str, int, float, bool, type(None)) for v in meta.values()):
        size = len(json.dumps(meta, ensure_ascii=False).encode())
        # the bound is loose by at most 3x: far below the limit it never sends work back
        if size * 3 <= limit // 2 and "surrogate" not in meta:
            assert metadata_fits(meta, limits)


ROWS: list[Any] = [
    [0.5, -1.0, 3.0], [1, 2, 3], [0.0, 0.0, 0.0], [1e39, 1.0, 1.0], [1e-50, 1e-50, 1e-50],
    [float("nan"), 1.0, 1.0], [float("inf"), 1.0, 1.0], [3.4e38, 3.4e38, 3.4e38],
]


@pytest.mark.parametrize("row", ROWS, ids=range(len(ROWS)))
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_numpy_rows_pass_the_checks_lists_pass(row: list[Any], dtype: Any) -> None:
    """Rows that arrive as numpy arrays (bulk bodies read by ``api/bulk_json``, library
    callers) give the matrix their lists give, and are refused where the lists are."""
    with np.errstate(all="ignore"):
        arr = np.asarray(row, dtype=np.float64).astype(dtype)
    ok = np.array([0.25, 0.5, 1.0])
    got = check_vectors([ok, arr], 4096)
    want = check_vectors([ok.tolist(), arr.tolist()], 4096)
    if want is None:
        assert got is None
    else:
        assert got is not None and got.tobytes() == want.tobytes()
    assert check_vectors([ok, arr.astype(bool)], 4096) is None  # booleans: the slow way
    assert check_vectors([ok, np.stack([arr, arr])], 4096) is None  # not one row
    assert check_vectors([ok, arr[:2]], 4096) is None  # lengths differ
    assert check_vectors([ok], 2) is None  # over the dimension limit


def test_edge_stores_the_same_vectors_from_the_callers_lists(tmp_path: Path) -> None:
    """A record with ``Record.values`` (the lists the caller sent, validated) and one
    without get bit for bit the same vectors: the host gets the float32 rows of both."""
    rng = np.random.default_rng(3)
    raws = [[float(x) for x in rng.normal(size=8) * 10.0 ** rng.integers(-15, 15)]
            for _ in range(60)]  # doubles: each rounds to float32 on the way in
    raws += [[1, 2, 3, 4, 5, 6, 7, 2**60 + 1], [1e18, 1e-45, 7e-46, 1, 0.1, 0.3, -2.5, 1e-39]]
    mat = check_vectors(raws, 4096)
    assert mat is not None
    store = QdrantEdgeStore(QdrantEdgeConfig(path=tmp_path))
    try:
        store.create_shard("k", 8)
        store.upsert("k", [Record(f"v{i}", "", {}, mat[i], "a", raws[i])
                           for i in range(len(raws))])
        store.upsert("k", [Record(f"v{i}", "", {}, mat[i], "b") for i in range(len(raws))])
        ids = [f"v{i}" for i in range(len(raws))]
        a = store.get("k", "a", ids, with_vectors=True)
        b = store.get("k", "b", ids, with_vectors=True)
        assert len(a) == len(b) == len(raws)
        for x, y in zip(a, b, strict=True):
            assert x.embedding is not None and y.embedding is not None
            assert x.embedding.tobytes() == y.embedding.tobytes()
    finally:
        store.close()


def test_serving_gc_tuning_raises_the_threshold_and_freezes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
    before = gc.get_threshold()
    try:
        tune_gc_for_serving(0)
        assert gc.get_threshold() == before and calls == []
        tune_gc_for_serving(50_000)
        assert gc.get_threshold() == (50_000, before[1], before[2])
        assert calls == ["freeze"]
    finally:
        gc.set_threshold(*before)
