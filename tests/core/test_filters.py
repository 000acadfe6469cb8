"""The where parser: what it accepts, what it refuses, and the AST it builds."""

import pytest

from ragline.core.filter_eval import matches
from ragline.core.filters import And, Eq, In, Limits, Not, Or, Range, parse_where, parse_where_json
from ragline.errors import FilterError


def test_shapes() -> None:
    assert parse_where({"a": 1}) == Eq("a", 1)
    assert parse_where({"a": 1, "b": "x"}) == And((Eq("a", 1), Eq("b", "x")))
    assert parse_where({"a": {"$ne": 1}}) == Not(Eq("a", 1))
    assert parse_where({"a": {"$nin": [1, 2]}}) == Not(In("a", (1, 2)))
    assert parse_where({"a": {"$gte": 1, "$lt": 3}}) == And((Range("a", "$gte", 1.0),
                                                               Range("a", "$lt", 3.0)))
    assert parse_where({"$or": [{"a": 1}, {"$not": {"b": 2}}]}) == Or((Eq("a", 1),
                                                                     Not(Eq("b", 2))))
    assert parse_where({"a": {"$not": {"$gt": 2}}}) == Not(Range("a", "$gt", 2.0))
    assert parse_where(None) is None and parse_where({}) is None
    assert parse_where_json("  ") is None


@pytest.mark.parametrize("where,msg", [
    ({"a": {"$gt": True}}, "needs a number, got a boolean"),
    ({"a": {"$in": []}}, "non-empty list"),
    ({"$and": {"a": 1}}, "non-empty list of filters"),
    ({"a": {}}, "empty condition for field 'a'"),
    ({"a": [1, 2]}, "got a list"),
    ({"a": {"$not": 3}}, "needs an operator object"),
    ({'a"b': 1}, "must not contain"),
])
def test_refusals_name_the_problem(where: dict, msg: str) -> None:
    with pytest.raises(FilterError, match="Invalid 'where' filter") as e:
        parse_where(where)
    assert msg in e.value.message


def test_limits() -> None:
    with pytest.raises(FilterError, match="more than 3 conditions"):
        parse_where({"$or": [{"a": i} for i in range(4)]}, Limits(max_conditions=3))
    with pytest.raises(FilterError, match="more than 2 values"):
        parse_where({"a": {"$in": [1, 2, 3]}}, Limits(max_in_values=2))


def test_reference_semantics() -> None:
    meta = {"tags": ["x", "y"], "n": 2, "f": 2.0, "b": True}
    assert matches(parse_where({"tags": "x"}), meta)
    assert matches(parse_where({"tags": {"$contains": "y"}}), meta)
    assert matches(parse_where({"n": 2.0}), meta) and matches(parse_where({"f": 2}), meta)
    assert not matches(parse_where({"b": 1}), meta)
    assert matches(parse_where({"missing": {"$ne": 1}}), meta)
    assert matches(parse_where({"missing": {"$nin": [1]}}), meta)
    assert not matches(parse_where({"missing": {"$lt": 100}}), meta)
    assert not matches(parse_where({"tags": {"$gt": 0}}), meta)
