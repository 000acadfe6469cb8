"""Frontmatter, titles and MDX handling (spec 004 FR-002 and its malformed-frontmatter rule)."""

from __future__ import annotations

import datetime as dt
import logging

from ingest_support import BOOK, BROKEN, MDX, SENSING, SPEC_DEFAULTS

from ragline.ingest.markdown import parse_markdown, split_frontmatter, strip_mdx
from ragline.ingest.metadata import merge_metadata, normalize_metadata


def test_frontmatter_becomes_flat_typed_metadata() -> None:
    parsed = parse_markdown((BOOK / SENSING).read_bytes(), SENSING, SPEC_DEFAULTS)
    meta = parsed.metadata
    assert parsed.title == "Lesson 1.1: How Robots Sense"
    assert parsed.text_format == "markdown"
    assert meta["proficiency_level"] == "B1"  # frontmatter beats the defaults
    assert meta["hardware_tier"] == 2
    assert meta["created"] == "2025-11-29"  # an unquoted YAML date → ISO string
    assert meta["learning_objectives"] == [
        "Name three kinds of robot sensors",
        "Explain why sensor fusion matters",
    ]
    assert meta["cognitive_load_new_concepts"] == 3  # nested dicts flattened with "_"
    assert meta["cognitive_load_reviews_spaced"] is True
    assert meta["fm_id"] == "lesson-1-1-how-robots-sense"  # "id" is a record field
    assert "id" not in meta and "title" not in meta
    assert not parsed.text.startswith("---")
    assert parsed.text.startswith("# Lesson 1.1: How Robots Sense")


def test_malformed_frontmatter_warns_with_file_name_and_uses_defaults(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="ragline.ingest"):
        parsed = parse_markdown((BOOK / BROKEN).read_bytes(), BROKEN, SPEC_DEFAULTS)
    assert any(BROKEN in r.getMessage() and "frontmatter" in r.getMessage() for r in caplog.records)
    assert parsed.metadata == SPEC_DEFAULTS
    assert parsed.title == "Lesson 1.2: Actuators"  # from the first # heading
    assert "Actuators turn commands into motion" in parsed.text


def test_frontmatter_that_is_not_a_mapping_or_unterminated(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="ragline.ingest"):
        listed = parse_markdown(b"---\n- a\n- b\n---\nBody text.", "x.md", SPEC_DEFAULTS)
        open_ended = parse_markdown(b"---\ntitle: x\nBody without end.", "y.md")
    assert listed.metadata == SPEC_DEFAULTS and listed.text == "Body text."
    assert "Body without end." in open_ended.text
    assert [r.getMessage().split(":")[0] for r in caplog.records] == ["x.md", "y.md"]


def test_title_falls_back_to_the_first_h1_outside_code_then_to_none() -> None:
    text = b"```bash\n# not a title\n```\n\n# Real Title\n\nBody."
    assert parse_markdown(text, "a.md").title == "Real Title"
    assert parse_markdown(b"Just text, no heading.", "a.md").title is None  # loader uses stem


def test_wrong_typed_frontmatter_value_keeps_default_and_warns(caplog) -> None:
    raw = b"---\nhardware_tier: high\nduration_minutes: '45'\n---\nBody."
    with caplog.at_level(logging.WARNING, logger="ragline.ingest"):
        meta = parse_markdown(raw, "t.md", {"hardware_tier": 1, "duration_minutes": 0}).metadata
    assert meta == {"hardware_tier": 1, "duration_minutes": 45}
    assert "t.md" in caplog.text and "hardware_tier" in caplog.text


def test_normalize_metadata_handles_odd_values() -> None:
    meta = normalize_metadata(
        {
            "when": dt.datetime(2025, 1, 2, 3, 4, 5),
            "empty": None,
            "nan": float("nan"),
            "items": [1, {"a": 1}, None, dt.date(2025, 1, 2)],
            "chunk_index": 7,
        }
    )
    assert meta == {
        "when": "2025-01-02T03:04:05",
        "items": [1, '{"a": 1}', "2025-01-02"],
        "fm_chunk_index": 7,
    }
    assert merge_metadata({"a": 1}, {"a": "2", "b": True}) == {"a": 2, "b": True}


def test_mdx_imports_exports_jsx_and_comments_are_removed() -> None:
    parsed = parse_markdown((BOOK / MDX).read_bytes(), MDX)
    text = parsed.text
    assert parsed.title == "Lesson 2.2: Components"
    for gone in ("import Tabs", "export const", "difficulty", "<Tabs>", "<TabItem", "Authors:"):
        assert gone not in text
    assert "Write nodes in Python with rclpy." in text
    assert "Write nodes in C++ with rclcpp." in text
    assert "import rclpy  # this import stays" in text  # code is untouched
    assert "<summary>Why two languages?</summary>" in text  # plain HTML stays
    assert "\n\n\n" not in text


def test_mdx_stripping_only_applies_to_mdx_files() -> None:
    raw = b"import x from 'y';\n\nText <Tabs> stays.\n"
    assert "import x" in parse_markdown(raw, "a.md").text
    assert strip_mdx("import x from 'y';\n\nText.") == "Text."


def test_split_frontmatter_without_frontmatter() -> None:
    assert split_frontmatter("# Title\n---\n") == (None, "# Title\n---\n")
    assert split_frontmatter("---\n---\nBody") == ("", "Body")
