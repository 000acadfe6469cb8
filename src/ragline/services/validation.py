"""Validation of incoming documents, done in full before anything is written.

Qdrant Edge can leave part of a failed batch behind, so "all or nothing" is
only possible if every document is checked first. The messages of the four
spec-000 cases are fixed by the spec and must not change.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from ragline.core.types import Metadata
from ragline.errors import InvalidInput

MSG_REQUIRED = "Documents array is required"
MSG_NO_EMBEDDINGS = "All documents must include pre-computed embeddings"

_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$")


def check_collection_name(name: str) -> None:
    if not isinstance(name, str) or not _NAME.match(name) or ".." in name:
        raise InvalidInput(
            f"Invalid collection name {name!r}: use 1-63 characters from letters, digits, "
            "'.', '_' and '-', starting and ending with a letter or digit"
        )


def check_metadata(meta: Any, where: str) -> Metadata:
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise InvalidInput(f"Invalid metadata for {where}: must be an object")
    for key, value in meta.items():
        if not isinstance(key, str) or not key or key.startswith("$"):
            raise InvalidInput(
                f"Invalid metadata for {where}: key {key!r} must be a non-empty string "
                "not starting with '$'"
            )
        if isinstance(value, list):
            for v in value:
                if not _scalar(v):
                    raise InvalidInput(
                        f"Invalid metadata for {where}: field '{key}' is a list that holds "
                        "something other than strings, numbers or booleans"
                    )
        elif value is not None and not _scalar(value):
            raise InvalidInput(
                f"Invalid metadata for {where}: field '{key}' must be a string, number, "
                "boolean, null or a list of those"
            )
    return meta


def _scalar(v: Any) -> bool:
    if isinstance(v, bool | str):
        return True
    return isinstance(v, int | float) and math.isfinite(v)


def check_vector(raw: Any, where: str) -> np.ndarray:
    """An embedding must be a non-empty list of finite numbers, not all zero."""
    if not isinstance(raw, list | tuple) or not raw:
        raise InvalidInput(
            f"Invalid embedding format for {where}: embedding must be a non-empty array "
            "of numbers"
        )
    for v in raw:
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise InvalidInput(
                f"Invalid embedding format for {where}: embedding must be an array of "
                f"numbers, found {type(v).__name__}"
            )
    vec = np.asarray(raw, dtype=np.float64)
    if not np.all(np.isfinite(vec)):
        raise InvalidInput(
            f"Invalid embedding format for {where}: embedding contains NaN or infinite values"
        )
    if not np.any(vec):
        raise InvalidInput(
            f"Invalid embedding format for {where}: embedding is all zeros, which has no "
            "direction for cosine similarity"
        )
    return vec.astype(np.float32)


def check_dimension(got: int, expected: int | None, where: str, collection: str) -> None:
    if expected is not None and got != expected:
        raise InvalidInput(
            f"Embedding dimension mismatch for {where}: collection '{collection}' expects "
            f"{expected} dimensions, got {got}"
        )
