"""Module/chapter/lesson from the RoboLearn layout, custom patterns, parent_doc_id."""

from __future__ import annotations

from pathlib import PureWindowsPath

import pytest

from ragline.errors import InvalidInput
from ragline.ingest.path_metadata import extract_path_metadata, parent_doc_id


def test_robolearn_layout() -> None:
    meta = extract_path_metadata("module-1-ros2/chapter-4-first-code/02-writing-publisher.md")
    assert meta == {
        "module": 1,
        "module_name": "module-1-ros2",
        "chapter": 4,
        "chapter_name": "chapter-4-first-code",
        "lesson": 2,
    }


def test_partial_paths() -> None:
    assert extract_path_metadata("docs/module-12-vla/README.md") == {
        "module": 12,
        "module_name": "module-12-vla",
    }
    assert extract_path_metadata("preface.md") == {}
    assert extract_path_metadata("module-1x/notes.md") == {}  # not "module-N..."


def test_custom_pattern_converts_digit_groups() -> None:
    pattern = r"^(?P<book>[a-z]+)/part(?P<part>\d+)/(?P<slug>[^/]+)\.md$"
    assert extract_path_metadata("robots/part3/intro.md", pattern) == {
        "book": "robots",
        "part": 3,
        "slug": "intro",
    }
    assert extract_path_metadata("other/layout.md", pattern) == {}


def test_parent_doc_id_is_relative_path_without_extension() -> None:
    assert parent_doc_id("module-1/chapter-2/03-x.md") == "module-1/chapter-2/03-x"
    windows = PureWindowsPath("module-1\\chapter-2\\03-x.mdx")
    assert parent_doc_id(windows) == "module-1/chapter-2/03-x"
    assert parent_doc_id("notes") == "notes"
    with pytest.raises(InvalidInput):
        parent_doc_id("../escape.md")
