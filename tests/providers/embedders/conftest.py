"""Shared fixtures: the built default model (scripts/build_onnx_model.py, run by install.sh)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragline.errors import ModelNotLoaded
from ragline.providers.embedders.local_onnx import LocalOnnxEmbedder, resolve_model_dir


@pytest.fixture(scope="session")
def minilm_dir() -> Path:
    try:
        return resolve_model_dir("all-MiniLM-L6-v2")
    except ModelNotLoaded as exc:  # a missing default model is a broken install, not a skip
        pytest.fail(f"{exc} (make install builds it)")


@pytest.fixture(scope="session")
def local_embedder(minilm_dir: Path) -> LocalOnnxEmbedder:
    return LocalOnnxEmbedder(model="all-MiniLM-L6-v2")
