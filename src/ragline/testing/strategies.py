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


ALL_OPERATORS: frozenset[str] = frozenset({
    "$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$contains", "$not",
    "$and", "$or",
})
"""Every operator of the ``where`` language (``{"f": v}`` is ``$eq``)."""


def _leaf(ops: frozenset[str]) -> st.SearchStrategy[dict[str, Any]]:
    field = st.sampled_from(FIELDS)
    num = st.one_of(st.integers(-3, 5), st.sampled_from([0.5, 1.0, 2.5]))
    ranges = sorted(ops & {"$gt", "$gte", "$lt", "$lte"})
    candidates: list[tuple[set[str], st.SearchStrategy[Any]]] = [
        ({"$eq"}, st.builds(lambda v: v, scalars)),
        ({"$eq"}, st.builds(lambda v: {"$eq": v}, scalars)),
        ({"$ne"}, st.builds(lambda v: {"$ne": v}, scalars)),
        ({"$in"}, st.builds(lambda v: {"$in": v}, st.lists(scalars, min_size=1, max_size=4))),
        ({"$nin"}, st.builds(lambda v: {"$nin": v}, st.lists(scalars, min_size=1, max_size=4))),
        ({"$contains"}, st.builds(lambda v: {"$contains": v}, scalars)),
        ({"$gte", "$lte"}, st.builds(lambda lo, hi: {"$gte": lo, "$lte": hi}, num, num)),
    ]
    if ranges:
        candidates.append((set(ranges), st.builds(lambda op, v: {op: v},
                                                  st.sampled_from(ranges), num)))
    chosen = [strategy for needs, strategy in candidates if needs <= ops]
    if not chosen:
        raise ValueError(f"no leaf operator among {sorted(ops)}")
    return st.builds(lambda f, o: {f: o}, field, st.one_of(*chosen))


def filter_strategy(
    operators: frozenset[str] | None = None,
) -> st.SearchStrategy[dict[str, Any]]:
    """Random ``where`` filters using only ``operators`` (all of them by default), so a
    store that supports part of the language is property-tested on that part."""
    ops = ALL_OPERATORS if operators is None else frozenset(operators)
    unknown = ops - ALL_OPERATORS
    if unknown:
        raise ValueError(f"unknown operators {sorted(unknown)}")
    branches: list[Any] = []
    if "$and" in ops:
        branches.append(lambda inner: st.builds(lambda xs: {"$and": xs},
                                                st.lists(inner, min_size=1, max_size=3)))
        branches.append(lambda inner: st.builds(lambda x, y: {**x, **y}, inner, inner))
    if "$or" in ops:
        branches.append(lambda inner: st.builds(lambda xs: {"$or": xs},
                                                st.lists(inner, min_size=1, max_size=3)))
    if "$not" in ops:
        branches.append(lambda inner: st.builds(lambda x: {"$not": x}, inner))
    leaf = _leaf(ops)
    if not branches:
        return leaf
    return st.recursive(leaf, lambda inner: st.one_of(*(b(inner) for b in branches)),
                        max_leaves=6)


filters = filter_strategy()
