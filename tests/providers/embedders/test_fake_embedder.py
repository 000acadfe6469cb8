"""The fake embedder: deterministic, word-overlap semantics, counts calls, not registered."""

from __future__ import annotations

from importlib.metadata import entry_points

import numpy as np
import pytest

from ragline.errors import InvalidInput
from ragline.providers.embedders.base import Embedder
from ragline.providers.registry import Registry
from ragline.testing.fake_embedder import FakeEmbedder


def test_deterministic_normalised_and_counted() -> None:
    a, b = FakeEmbedder(dimension=32), FakeEmbedder(dimension=32)
    va = a.embed(["hello world", "other text"])
    np.testing.assert_array_equal(va, b.embed(["hello world", "other text"]))
    assert va.shape == (2, 32) and va.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(va, axis=1), 1.0, atol=1e-6)
    assert (a.calls, a.texts_embedded) == (1, 2)
    assert a.log == [(["hello world", "other text"], "document")]
    assert isinstance(a, Embedder)


def test_shared_words_mean_closer_vectors() -> None:
    f = FakeEmbedder(dimension=64)
    q, near, far = f.embed(["red apples", "fresh red apples for sale", "train timetable monday"])
    assert q @ near > q @ far + 0.3


def test_dimension_and_failure_are_configurable() -> None:
    assert FakeEmbedder(dimension=5).embed(["x"]).shape == (1, 5)
    broken = FakeEmbedder(fail_with=RuntimeError("boom"))
    with pytest.raises(RuntimeError, match="boom"):
        broken.embed(["x"])
    assert broken.health().status == "down"
    with pytest.raises(InvalidInput):
        FakeEmbedder().embed(["x"], "nope")  # type: ignore[arg-type]


def test_cannot_be_selected_in_production_config() -> None:
    names = {ep.name for ep in entry_points(group="ragline.embedders")}
    values = {ep.value for ep in entry_points(group="ragline.embedders")}
    assert {"local", "openai"} <= names
    assert "fake" not in names and not any("testing" in v for v in values)
    fresh = Registry()  # what a production process sees: entry points only
    assert "fake" not in fresh.names("embedders")
    with pytest.raises(InvalidInput, match="Unknown embedder provider 'fake'"):
        fresh.get("embedders", "fake")
