"""The search path's shortcuts give the same answers as the plain code they replaced.

``relevance_to`` hoists the query's norm and float64 copy out of the per-hit loop;
``check_vector`` checks the types of a query embedding as a set before walking it.
Both must be invisible: the same relevance bit for bit, and the same acceptance and
messages for every input.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ragline.errors import InvalidInput
from ragline.services.corpus.validation import check_vector
from ragline.services.search.retrieval import relevance_of, relevance_to


def _reference(query: np.ndarray, vector: Any) -> float:
    """relevance_of as it was written before the hoist."""
    v = np.asarray(vector, dtype=np.float64)
    qn, vn = float(np.linalg.norm(query)), float(np.linalg.norm(v))
    if qn == 0 or vn == 0 or v.shape != query.shape:
        return 0.5
    cos = float(np.dot(query, v) / (qn * vn))
    return min(1.0, max(0.0, 0.5 + cos / 2))


def test_relevance_is_bit_for_bit_the_reference() -> None:
    rng = np.random.default_rng(7)
    for i in range(2000):
        query = (rng.normal(size=48) * rng.uniform(1e-3, 1e3)).astype(np.float32)
        rel = relevance_to(query)
        for _ in range(3):
            v: Any = rng.normal(size=48).astype(np.float32) * np.float32(rng.uniform(0.1, 10))
            if i % 3 == 0:
                v = v.tolist()  # lists, as some callers hold them
            assert rel(v) == _reference(query, v) == relevance_of(query, v)


def test_relevance_edge_cases_match_the_reference() -> None:
    q = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    cases: list[Any] = [
        np.zeros(3, dtype=np.float32),        # no direction: 0.5
        [1.0, 2.0],                           # another dimension: 0.5
        [1.0, 2.0, 3.0],                      # the same direction: 1.0
        [-1.0, -2.0, -3.0],                   # opposite: 0.0
        np.array([[1.0, 2.0, 3.0]]),          # a matrix, not a vector: 0.5
    ]
    rel = relevance_to(q)
    got = [rel(c) for c in cases]
    assert got == [_reference(q, c) for c in cases]
    assert got[:4] == pytest.approx([0.5, 0.5, 1.0, 0.0], abs=1e-6)
    assert relevance_to(np.zeros(3, dtype=np.float32))([1.0, 2.0, 3.0]) == 0.5


def test_check_vector_accepts_number_subclasses_and_refuses_the_rest() -> None:
    # numpy scalars are float/int subclasses: accepted, as by the per-value walk
    assert check_vector([np.float64(0.5), 1, 2.0], "q").tolist() == [0.5, 1.0, 2.0]
    with pytest.raises(InvalidInput, match="found bool"):
        check_vector([1.0, True, 0.5], "the query embedding")
    with pytest.raises(InvalidInput, match="found str"):
        check_vector([1.0, "2.0", 0.5], "the query embedding")
    with pytest.raises(InvalidInput, match="found NoneType"):
        check_vector([None, 1.0], "the query embedding")
    with pytest.raises(InvalidInput, match="NaN or infinite"):
        check_vector([1.0, float("nan")], "the query embedding")


def _reference_check(raw: list[Any], where: str) -> np.ndarray:
    """check_vector's numeric checks as they were written before they were fused."""
    f32max = float(np.finfo(np.float32).max)
    vec = np.asarray(raw, dtype=np.float64)
    if not np.all(np.isfinite(vec)):
        raise InvalidInput(f"Invalid embedding format for {where}: embedding contains NaN "
                           "or infinite values")
    if np.any(np.abs(vec) > f32max):
        raise InvalidInput(f"Invalid embedding format for {where}: a value is outside the "
                           f"float32 range (largest magnitude {f32max:.6g})")
    if not np.any(vec):
        raise InvalidInput(f"Invalid embedding format for {where}: embedding is all zeros, "
                           "which has no direction for cosine similarity")
    vec32 = vec.astype(np.float32)
    norm = float(np.linalg.norm(vec32))
    if not np.any(vec32) or norm == 0.0 or not np.isfinite(norm):
        raise InvalidInput(f"Invalid embedding format for {where}: its values are too small "
                           "or too large to be stored as float32 with a usable length (they "
                           "round to zero or overflow); scale the vector")
    return vec32


def _outcome(fn: Any, raw: list[Any]) -> tuple[str, Any]:
    try:
        return "ok", fn(raw, "the query embedding").tobytes()
    except InvalidInput as exc:
        return "refused", exc.message


def test_the_fused_vector_checks_accept_and_refuse_as_the_separate_ones_did() -> None:
    inf, nan, big = float("inf"), float("nan"), 3.0e38
    cases: list[list[Any]] = [
        [0.1, -0.2, 0.3], [1, 2, 3], [0.0, 0.0, 1e-3], [big, 1.0], [-big, 0.0],
        [nan, 1.0], [1.0, inf], [-inf, 0.0], [nan, inf], [1e39, 1.0], [1e39, nan],
        [0.0, 0.0, 0.0], [0, 0], [-0.0, 0.0], [1e-50, 1e-50], [1e-30, 1e-30, 0.0],
        [big, big, big], [1e-45, 0.0], [1e-300, 1.0], [1e308, 1.0],
    ]
    rng = np.random.default_rng(3)
    for _ in range(300):  # random vectors across the float32 range, some spoiled
        v = (rng.normal(size=8) * 10.0 ** rng.integers(-50, 40)).tolist()
        if rng.random() < 0.2:
            v[int(rng.integers(8))] = rng.choice([nan, inf, -inf, 0.0, 1e39])
        cases.append(v)
    for raw in cases:
        assert _outcome(check_vector, raw) == _outcome(_reference_check, raw), raw
