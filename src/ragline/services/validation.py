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


_NUMBER_TYPES = frozenset({float, int})


def check_vectors(raws: list[Any]) -> np.ndarray | None:
    """All embeddings of a request at once, as a float32 matrix; None when any of them
    fails a check (or their lengths differ), so the caller runs :func:`check_vector`
    document by document and raises the same message, for the same document, as ever.

    The per-number Python loop of :func:`check_vector` cost ~0.3 ms per 384-d vector
    (most of a bulk write); here the only per-document Python work is collecting the
    element types in C (``set(map(type, raw))``: exactly ``float`` and ``int``, so
    ``bool`` and numeric strings are refused as before), and the finiteness and
    zero checks are two numpy reductions over the matrix.
    """
    if not raws:
        return None
    width = None
    for raw in raws:
        if type(raw) is not list or not raw:
            return None
        if width is None:
            width = len(raw)
        elif len(raw) != width:
            return None
        if not set(map(type, raw)) <= _NUMBER_TYPES:
            return None
    try:
        mat = np.array(raws, dtype=np.float64)
    except (ValueError, OverflowError):  # an int too large for a float: slow path says so
        return None
    if not np.isfinite(mat).all() or not mat.any(axis=1).all():
        return None
    return mat.astype(np.float32)


def check_dimension(got: int, expected: int | None, where: str, collection: str) -> None:
    if expected is not None and got != expected:
        raise InvalidInput(
            f"Embedding dimension mismatch for {where}: collection '{collection}' expects "
            f"{expected} dimensions, got {got}"
        )
