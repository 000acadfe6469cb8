"""The data directory's format version: written, migrated forward, newer refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragline.datadir import FORMAT_FILE, FORMAT_VERSION, ensure_format, read_version
from ragline.errors import DataFormatError
from ragline.facade import Ragline
from ragline.settings import Settings


def _settings(path: Path) -> Settings:
    return Settings(data_dir=path, _env_file=None)  # type: ignore[call-arg]


def test_new_directory_gets_the_current_version(tmp_path: Path) -> None:
    with Ragline(_settings(tmp_path / "d")):
        pass
    body = json.loads((tmp_path / "d" / FORMAT_FILE).read_text())
    assert body["format_version"] == FORMAT_VERSION


def test_unversioned_directory_with_data_is_migrated_forward(tmp_path: Path) -> None:
    d = tmp_path / "old"
    with Ragline(_settings(d)):
        pass
    (d / FORMAT_FILE).unlink()  # what a directory written before versioning looks like
    assert read_version(d) == 0
    assert ensure_format(d) == FORMAT_VERSION
    assert read_version(d) == FORMAT_VERSION


def test_newer_format_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    d = tmp_path / "new"
    d.mkdir()
    (d / FORMAT_FILE).write_text(json.dumps({"format_version": FORMAT_VERSION + 1}))
    with pytest.raises(DataFormatError) as err:
        Ragline(_settings(d)).start()
    msg = str(err.value)
    assert f"format version {FORMAT_VERSION + 1}" in msg and "newer ragline" in msg
    assert str(tmp_path) not in msg  # no filesystem paths in errors
    assert json.loads((d / FORMAT_FILE).read_text())["format_version"] == FORMAT_VERSION + 1
    (d / FORMAT_FILE).unlink()  # the refusal released the directory: it opens now
    with Ragline(_settings(d)):
        pass
