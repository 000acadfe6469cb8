"""Small helpers every embedder shares, so they validate and normalise the same way."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ragline.core.types import Vector
from ragline.errors import InvalidInput

INPUT_TYPES = ("query", "document")


def check_inputs(texts: object, input_type: object) -> None:
    """Refuse bad input with a 400 before it reaches a model or a paid API."""
    if input_type not in INPUT_TYPES:
        raise InvalidInput(f"input_type must be 'query' or 'document', got {input_type!r}")
    if not isinstance(texts, list | tuple):
        raise InvalidInput("texts must be a list of strings")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise InvalidInput(f"texts[{i}] is {type(t).__name__}, expected a string")


def l2_normalise(vectors: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """Row-wise L2 normalisation to float32; an all-zero row stays zero (no NaN)."""
    arr = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    out: Vector = (arr / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)
    return out
