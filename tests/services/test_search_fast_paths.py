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
from ragline.services.retrieval import relevance_of, relevance_to
from ragline.services.validation import check_vector


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
