"""The local model's cache: outside the venv, keyed by recipe, overridable."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ragline.providers.embedders import model_cache
from ragline.providers.embedders.model_cache import RECIPE, default_models_dir, recipe_hash


def test_cache_dir_is_keyed_by_recipe_and_outside_the_venv(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    got = default_models_dir()
    assert got == tmp_path / ".cache" / "ragline" / "models" / recipe_hash()
    assert not str(got).startswith(sys.prefix)


def test_recipe_hash_changes_with_the_recipe(monkeypatch: pytest.MonkeyPatch) -> None:
    before = recipe_hash()
    assert len(before) == 12 and before == recipe_hash()  # stable
    monkeypatch.setitem(model_cache.RECIPE, "recipe", int(str(RECIPE["recipe"])) + 1)
    assert recipe_hash() != before


def test_legacy_venv_location(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "empty-home"))
    legacy = tmp_path / "venv" / "share" / "ragline" / "models"
    legacy.mkdir(parents=True)
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    # a venv built before the cache existed keeps working until the cache is filled
    assert default_models_dir() == legacy
