"""Metadata boosts (spec 003): tag overlap, glob patterns, normalised numeric fields."""

from __future__ import annotations

from typing import Any

import pytest

from ragline.errors import InvalidInput
from ragline.services.search.boosts import (
    BoostConfig,
    apply_boosts,
    compute_boosts,
    glob_match,
    merge_boost_config,
    tag_matches,
)


def r(id_: str, score: float, **metadata: Any) -> dict[str, Any]:
    return {"id": id_, "score": score, "text": f"text {id_}", "metadata": metadata}


def ids(results: list[dict[str, Any]]) -> list[str]:
    return [x["id"] for x in results]


def test_more_matching_tags_rank_higher() -> None:
    results = [
        r("none", 0.80, tags=["disk"]),
        r("one", 0.78, tags=["cpu"]),
        r("two", 0.76, tags=["cpu", "linux"]),
    ]
    out = apply_boosts(results, BoostConfig(query_tags=["cpu", "linux"], tag_weight=0.1))
    assert ids(out) == ["two", "one", "none"]
    assert [x["boost"] for x in out] == pytest.approx([0.2, 0.1, 0.0])
    assert [x["score"] for x in out] == pytest.approx([0.96, 0.88, 0.80])
    assert out[0]["text"] == "text two" and out[0]["metadata"] == {"tags": ["cpu", "linux"]}


def test_tags_match_case_insensitively_and_count_once() -> None:
    assert tag_matches({"tags": ["CPU", "cpu", "Linux"]}, "tags", ["cpu", "CPU", "linux"]) == 2
    assert tag_matches({"tags": "cpu"}, "tags", ["cpu"]) == 1  # a scalar tag field
    assert tag_matches({}, "tags", ["cpu"]) == 0
    assert tag_matches({"labels": ["cpu"]}, "labels", ["cpu"]) == 1


def test_shape_glob_boost() -> None:
    """spec 003: a chunk with applicableShapes ["VM.*"] is boosted for VM.Standard.E4.Flex."""
    config = BoostConfig(
        glob_fields={"applicable_shapes": "shape"},
        glob_weight=0.15,
        query_values={"shape": "VM.Standard.E4.Flex"},
    )
    results = [
        r("bm", 0.70, applicable_shapes=["BM.*"]),
        r("vm", 0.60, applicable_shapes=["BM.*", "VM.*"]),
        r("none", 0.65),
    ]
    out = apply_boosts(results, config)
    assert ids(out) == ["vm", "bm", "none"]
    assert [x["boost"] for x in out] == pytest.approx([0.15, 0.0, 0.0])


def test_glob_is_case_sensitive_and_any_of_many_values() -> None:
    assert glob_match(["VM.*"], "VM.Standard.E4.Flex")
    assert not glob_match(["vm.*"], "VM.Standard.E4.Flex")
    assert glob_match("VM.Standard.E?.Flex", ["BM.GPU4.8", "VM.Standard.E5.Flex"])
    assert not glob_match([], "VM.Standard.E4.Flex")
    assert not glob_match(["VM.*"], [])


def test_numeric_field_is_normalised_over_the_candidates() -> None:
    config = BoostConfig(numeric_fields={"updated_at_epoch": 0.1})
    results = [
        r("old", 0.50, updated_at_epoch=1_000),
        r("new", 0.45, updated_at_epoch=3_000),
        r("mid", 0.46, updated_at_epoch=2_000),
        r("unknown", 0.47),
        r("bool", 0.44, updated_at_epoch=True),  # not a number
    ]
    out = apply_boosts(results, config)
    boosts = {x["id"]: x["boost"] for x in out}
    assert boosts == pytest.approx({"old": 0.0, "mid": 0.05, "new": 0.1, "unknown": 0, "bool": 0})
    assert ids(out) == ["new", "mid", "old", "unknown", "bool"]


def test_numeric_field_with_one_distinct_value_adds_nothing() -> None:
    config = BoostConfig(numeric_fields={"n": 1.0})
    assert compute_boosts([r("a", 0, n=5), r("b", 0, n=5)], config) == [0.0, 0.0]


def test_all_boosts_add_up() -> None:
    config = BoostConfig(
        query_tags=["cpu"],
        tag_weight=0.1,
        glob_fields={"applicable_shapes": "shape"},
        glob_weight=0.2,
        query_values={"shape": "VM.Standard.E4.Flex"},
        numeric_fields={"updated_at_epoch": 0.3},
    )
    results = [
        r("all", 0.1, tags=["cpu"], applicable_shapes=["VM.*"], updated_at_epoch=20),
        r("nothing", 0.6, tags=["gpu"], applicable_shapes=["BM.*"], updated_at_epoch=10),
    ]
    out = apply_boosts(results, config)
    assert ids(out) == ["all", "nothing"]
    assert out[0]["boost"] == pytest.approx(0.6) and out[0]["score"] == pytest.approx(0.7)


def test_ties_keep_incoming_order_and_input_is_not_mutated() -> None:
    results = [r("a", 0.5, tags=["x"]), r("b", 0.5, tags=["x"]), r("c", 0.5)]
    out = apply_boosts(results, BoostConfig(query_tags=["x"]))
    assert ids(out) == ["a", "b", "c"]
    assert "boost" not in results[0] and results[0]["score"] == 0.5


def test_no_config_or_nothing_to_match_keeps_order_with_zero_boost() -> None:
    results = [r("low", 0.1, tags=["cpu"]), r("high", 0.9)]
    for config in (None, BoostConfig(), BoostConfig(tag_weight=0, query_tags=["cpu"])):
        out = apply_boosts(results, config)
        assert ids(out) == ["low", "high"]  # no re-sort: boosts never apply
        assert [x["boost"] for x in out] == [0.0, 0.0]


def test_merge_collection_config_with_request_override() -> None:
    collection = {
        "title": "runbooks",
        "boost": {
            "tag_weight": 0.05,
            "glob_fields": {"applicable_shapes": "shape"},
            "numeric_fields": {"updated_at_epoch": 0.1},
        },
    }
    override = {
        "tag_weight": 0.2,
        "query_tags": ["cpu"],
        "numeric_fields": {"priority": 0.3},
        "query_values": {"shape": "VM.Standard.E4.Flex"},
    }
    merged = merge_boost_config(collection, override)
    assert merged == BoostConfig(
        tag_weight=0.2,
        glob_fields={"applicable_shapes": "shape"},
        numeric_fields={"updated_at_epoch": 0.1, "priority": 0.3},
        query_tags=["cpu"],
        query_values={"shape": "VM.Standard.E4.Flex"},
    )


def test_merge_sources() -> None:
    assert merge_boost_config({"title": "x"}, None) is None
    assert merge_boost_config(None, {}) is None
    from_json = merge_boost_config({"boost": '{"tag_field": "labels"}'}, None)
    assert from_json is not None and from_json.tag_field == "labels"
    typed = merge_boost_config({"boost": {"tag_weight": 1}}, BoostConfig(query_tags=["a"]))
    assert typed == BoostConfig(tag_weight=1, query_tags=["a"])  # unset fields don't override


@pytest.mark.parametrize(
    ("meta", "override", "message"),
    [
        ({"boost": {"tag_wieght": 1}}, None, "Invalid boost config: tag_wieght: Extra inputs"),
        ({"boost": "not json"}, None, "collection metadata 'boost' is not valid JSON"),
        ({"boost": [1]}, None, "collection metadata 'boost' must be an object"),
        (None, {"glob_weight": "lots"}, "Invalid boost config: glob_weight:"),
    ],
)
def test_merge_rejects_bad_config(meta: Any, override: Any, message: str) -> None:
    with pytest.raises(InvalidInput) as info:
        merge_boost_config(meta, override)
    assert info.value.message.startswith(message)
