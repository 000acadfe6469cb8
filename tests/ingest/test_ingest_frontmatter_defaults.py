"""Spec 004 frontmatter defaults (issue 12 item 3) and keys that cannot be stored.

Missing or malformed ``proficiency_level``/``hardware_tier`` become ``A2``/``1`` with
a warning naming the file, so a tier filter keeps tier-agnostic pages (module
overviews, a preface). A collection can change or switch off the defaults.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from tests.ingestion_support import copy_book, ingest_tree

from ragline.facade import Ragline, SearchRequest
from ragline.ingest import load_bytes
from ragline.ingest.metadata import (
    SPEC_FRONTMATTER_DEFAULTS,
    apply_frontmatter_defaults,
    normalize_metadata,
    storable_key,
)

pytestmark = pytest.mark.usefixtures("few_payload_indexes")
SPEC = SPEC_FRONTMATTER_DEFAULTS


def _load(front: str, name: str = "m/c/01-x.md", defaults: dict | None = SPEC) -> dict:
    raw = f"---\n{front}\n---\n# Title\n\nBody text.\n".encode()
    return load_bytes(raw, name, frontmatter_defaults=defaults).metadata


def test_missing_fields_get_the_spec_defaults_with_a_warning_naming_the_file(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="ragline.ingest"):
        meta = _load("title: Overview", "module-1/README.md")
    assert meta["proficiency_level"] == "A2" and meta["hardware_tier"] == 1
    warning = next(r.getMessage() for r in caplog.records)
    assert warning.startswith("module-1/README.md:")
    assert "proficiency_level" in warning and "hardware_tier" in warning


def test_no_frontmatter_at_all_gets_the_defaults() -> None:
    meta = load_bytes(b"# Preface\n\nWhy this book.\n", "preface.md",
                      frontmatter_defaults=SPEC).metadata
    assert meta == {"proficiency_level": "A2", "hardware_tier": 1}


@pytest.mark.parametrize(
    ("front", "expected"),
    [
        ("hardware_tier: high\nproficiency_level: B1", {"hardware_tier": 1,
                                                       "proficiency_level": "B1"}),
        ("hardware_tier: [1, 2]\nproficiency_level: 3", {"hardware_tier": 1,
                                                         "proficiency_level": "A2"}),
        ("hardware_tier: '3'\nproficiency_level: ''", {"hardware_tier": 3,
                                                       "proficiency_level": "A2"}),
        ("hardware_tier: true\nproficiency_level: A2-B1", {"hardware_tier": 1,
                                                           "proficiency_level": "A2-B1"}),
    ],
)  # fmt: skip
def test_malformed_values_are_replaced_and_named(front: str, expected: dict, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="ragline.ingest"):
        meta = _load(front, "bad.md")
    assert {k: meta[k] for k in expected} == expected
    assert all(r.getMessage().startswith("bad.md:") for r in caplog.records)
    assert caplog.records  # every replacement is announced


def test_malformed_yaml_still_gets_defaults_and_body() -> None:
    doc = load_bytes(b"---\nhardware_tier: [3\n---\n# T\n\nBody.\n", "broken.md",
                     frontmatter_defaults=SPEC)
    assert doc.metadata == {"proficiency_level": "A2", "hardware_tier": 1}
    assert "Body." in doc.text


def test_defaults_only_apply_to_markdown_and_when_asked() -> None:
    assert "hardware_tier" not in load_bytes(b"Plain notes.", "notes.txt",
                                             frontmatter_defaults=SPEC).metadata
    assert "hardware_tier" not in _load("title: x", defaults=None)
    custom = _load("title: x", defaults={"hardware_tier": 2, "audience": "all"})
    assert custom["hardware_tier"] == 2 and custom["audience"] == "all"
    assert apply_frontmatter_defaults({"hardware_tier": 2.0}, SPEC)["hardware_tier"] == 2.0


# --- keys that cannot be stored --------------------------------------------------------


def test_unstorable_keys_are_mapped_or_skipped_with_the_file_name(caplog) -> None:
    front = ('"a.b": 1\n"$where": 2\n"with space": 3\n"": 4\n"...": 5\n'
             '"' + "k" * 200 + '": 6\n"ok_key-2": 7\n"名前": 8\nnested: {"x.y": 9}')
    with caplog.at_level(logging.WARNING, logger="ragline.ingest"):
        meta = _load(front, "keys.md")
    assert {k: v for k, v in meta.items() if k not in SPEC} == {
        "a.b": 1, "where": 2, "with space": 3, "...": 5, "ok_key-2": 7, "名前": 8,
        "nested_x.y": 9,
    }
    messages = [r.getMessage() for r in caplog.records]
    assert all(m.startswith("keys.md:") for m in messages)
    assert sum("cannot be stored" in m for m in messages) == 2  # "" and the long one


def test_self_referencing_yaml_does_not_fail() -> None:
    meta = _load("a: &x [1, *x]\nb: &y {c: *y}\nd: ok")
    assert meta["d"] == "ok" and "a" in meta


def test_storable_key_and_odd_yaml_keys() -> None:
    assert storable_key("hardware_tier") == "hardware_tier"
    assert storable_key("_private") == "_private"
    assert storable_key(" a..b ") == "a..b"  # the key grammar stores dots as written
    assert storable_key('say "hi"') == "say _hi_"
    assert storable_key("$") is None
    assert normalize_metadata({1: "one", 2.5: "x", None: "n"}) == {
        "1": "one", "2.5": "x", "None": "n"}


# --- the tier filter keeps tier-agnostic pages ------------------------------------------


def _tier_search(rl: Ragline, collection: str, tier: int) -> set[str]:
    res = rl.search.query_sync(rl.owner(), SearchRequest(
        collection=collection, query="module sensing code", mode="dense",
        where={"hardware_tier": {"$lte": tier}}, limit=100))
    return {str(h.metadata["parent_doc_id"]) for h in res.hits}


def test_tier_filter_keeps_overviews_and_can_be_configured_per_collection(
    rl: Ragline, tmp_path: Path
) -> None:
    book = copy_book(tmp_path)
    stats = ingest_tree(rl, "book", "default", book)
    assert any("README.md" in w and "hardware_tier" in w for w in stats.warnings)
    tier1 = _tier_search(rl, "book", 1)
    assert "README" in tier1 and "module-1-foundations/README" in tier1
    # the lesson that says hardware_tier: 2 is still filtered out at tier 1
    assert "module-1-foundations/chapter-1-sensing/01-how-robots-sense" not in tier1
    assert "module-1-foundations/chapter-1-sensing/01-how-robots-sense" in _tier_search(
        rl, "book", 2)

    # per collection: {} switches the rule off, so READMEs have no tier and drop out
    rl.collections.create(rl.owner(), "strict", {"frontmatter_defaults": {}},
                         embed={"provider": "fake"})
    ingest_tree(rl, "strict", "default", book)
    strict = _tier_search(rl, "strict", 1)
    assert "README" not in strict and "module-1-foundations/README" not in strict
    assert "module-1-foundations/chapter-2-code/01-code-and-tables" in strict
    # other defaults: overviews count as tier 3
    rl.collections.create(rl.owner(), "tier3", {"frontmatter_defaults": {"hardware_tier": 3}},
                         embed={"provider": "fake"})
    ingest_tree(rl, "tier3", "default", book)
    assert "README" not in _tier_search(rl, "tier3", 2)
    assert "README" in _tier_search(rl, "tier3", 3)
