"""Hypothesis strategies for metadata and ``where`` filters.

Kept small on purpose (few fields, few values) so random filters actually hit
records, and so collisions like ``1`` vs ``1.0`` vs ``true`` happen often.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

FIELDS = ["a", "b", "tags", "n"]
STRINGS = ["x", "y", "z", "1"]
scalars = st.one_of(
    st.sampled_from(STRINGS),
    st.integers(min_value=-2, max_value=3),
    st.sampled_from([0.5, 1.0, 2.5, -1.5]),
    st.booleans(),
)


@st.composite
def metadata(draw: st.DrawFn) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    if draw(st.booleans()):
        meta["a"] = draw(scalars)
    if draw(st.booleans()):
        meta["b"] = draw(st.sampled_from(STRINGS))
    if draw(st.booleans()):
        meta["tags"] = draw(st.lists(st.sampled_from(STRINGS), max_size=3))
    if draw(st.booleans()):
        meta["n"] = draw(st.one_of(st.integers(-3, 5), st.sampled_from([0.5, 2.5]), st.none()))
    return meta


def _leaf() -> st.SearchStrategy[dict[str, Any]]:
    field = st.sampled_from(FIELDS)
    num = st.one_of(st.integers(-3, 5), st.sampled_from([0.5, 1.0, 2.5]))
    ops = st.one_of(
        st.builds(lambda v: v, scalars),
        st.builds(lambda v: {"$eq": v}, scalars),
        st.builds(lambda v: {"$ne": v}, scalars),
        st.builds(lambda v: {"$in": v}, st.lists(scalars, min_size=1, max_size=4)),
        st.builds(lambda v: {"$nin": v}, st.lists(scalars, min_size=1, max_size=4)),
        st.builds(lambda v: {"$contains": v}, scalars),
        st.builds(lambda op, v: {op: v}, st.sampled_from(["$gt", "$gte", "$lt", "$lte"]), num),
        st.builds(lambda lo, hi: {"$gte": lo, "$lte": hi}, num, num),
    )
    return st.builds(lambda f, o: {f: o}, field, ops)


filters = st.recursive(
    _leaf(),
    lambda inner: st.one_of(
        st.builds(lambda xs: {"$and": xs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda xs: {"$or": xs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda x: {"$not": x}, inner),
        st.builds(lambda x, y: {**x, **y}, inner, inner),
    ),
    max_leaves=6,
)
