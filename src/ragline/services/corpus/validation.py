"""Validation of incoming documents, done in full before anything is written.

Qdrant Edge can leave part of a failed batch behind, so "all or nothing" is
only possible if every document is checked first. The messages of the four
spec-000 cases are fixed by the spec and must not change.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np
import orjson

from ragline.core.filters import key_problem
from ragline.core.types import Metadata
from ragline.errors import InvalidInput, PayloadTooLarge

if TYPE_CHECKING:
    from ragline.settings import Settings

MSG_REQUIRED = "Documents array is required"
DEFAULT_MAX_DIMENSION = 4096
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
FLOAT32_MAX = float(np.finfo(np.float32).max)
MSG_NO_EMBEDDINGS = "All documents must include pre-computed embeddings"

@dataclass(frozen=True)
class InputLimits:
    """Sizes checked before any work is done (issue 10); defaults match ``Settings``."""

    max_dimension: int = DEFAULT_MAX_DIMENSION
    max_document_chars: int = 1_000_000
    max_metadata_bytes: int = 65_536
    max_query_chars: int = 20_000

    @classmethod
    def from_settings(cls, s: Settings) -> InputLimits:
        return cls(s.max_embedding_dimension, s.max_document_chars, s.max_metadata_bytes,
                   s.max_query_chars)


def check_text_size(text: str, limits: InputLimits, where: str) -> None:
    if len(text) > limits.max_document_chars:
        raise PayloadTooLarge(
            f"Text of {where} too long: {len(text)} characters (limit "
            f"{limits.max_document_chars}, setting max_document_chars)")


def check_metadata_size(meta: Metadata, limits: InputLimits, where: str) -> None:
    if not meta:
        return
    size = len(json.dumps(meta, ensure_ascii=False).encode("utf-8"))
    if size > limits.max_metadata_bytes:
        raise PayloadTooLarge(
            f"Metadata of {where} too large: {size} bytes as JSON (limit "
            f"{limits.max_metadata_bytes}, setting max_metadata_bytes)")


def check_query_size(text: str | None, limits: InputLimits) -> None:
    if text is not None and len(text) > limits.max_query_chars:
        raise PayloadTooLarge(
            f"Query text too long: {len(text)} characters (limit {limits.max_query_chars}, "
            "setting max_query_chars)")


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
        problem = key_problem(key)
        if problem is not None:
            raise InvalidInput(f"Invalid metadata for {where}: key {key!r} {problem}")
        if isinstance(value, list):
            for v in value:
                if not _scalar(v):
                    raise InvalidInput(
                        f"Invalid metadata for {where}: field '{key}' is a list that holds "
                        "something other than strings, numbers or booleans (numbers must be "
                        "finite, integers within the 64-bit range)"
                    )
        elif value is not None and not _scalar(value):
            raise InvalidInput(
                f"Invalid metadata for {where}: field '{key}' must be a string, number, "
                "boolean, null or a list of those (numbers must be finite, integers within "
                "the 64-bit range)"
            )
    return meta


_KEYS_OK: set[str] = set()
"""Metadata keys that passed :func:`~ragline.core.filters.key_problem` (bulk writes
repeat the same few keys on every document). Bounded: cleared when it fills."""
_KEYS_OK_MAX = 4096
_SIZE_BOUND = 3
"""``json.dumps(meta, ensure_ascii=False)`` is at most this many times as long as
orjson's encoding of the same metadata: strings and integers are written alike, and
the standard library only adds a space after each ``,`` and ``:`` (one per element,
each at least one byte) and up to two characters to a float's exponent (``1e+16``,
``1e-05``; no float is written in fewer than three)."""


def metadata_fits(meta: Any, limits: InputLimits) -> bool:
    """True when ``meta`` certainly passes :func:`check_metadata` and
    :func:`check_metadata_size`; False means "run them" (they raise, or pass).

    The per-document checks cost ~4 us a document of a bulk write (a ``key_problem``
    per key, a ``json.dumps`` for the size); this fast path checks flat scalar values
    inline, remembers good keys and bounds the size with orjson (~0.5 us). Lists and
    anything unusual take the exact path, so every error is the same as ever."""
    if meta is None:
        return True
    if type(meta) is not dict:
        return False
    for key, value in meta.items():
        if key not in _KEYS_OK:
            if key_problem(key) is not None:
                return False
            if len(_KEYS_OK) >= _KEYS_OK_MAX:
                _KEYS_OK.clear()
            _KEYS_OK.add(key)
        kind = type(value)
        if kind is str or kind is bool or value is None:
            continue
        if kind is float:
            if value - value == 0.0:  # finite: inf - inf and nan - nan are nan
                continue
            return False
        if kind is int and INT64_MIN <= value <= INT64_MAX:
            continue
        return False
    if not meta:
        return True
    try:
        size = len(orjson.dumps(meta))
    except (TypeError, orjson.JSONEncodeError):
        return False
    return size * _SIZE_BOUND <= limits.max_metadata_bytes


def _scalar(v: Any) -> bool:
    """Strings, booleans, finite floats and integers within int64 (what stores keep).

    A 400-digit integer cannot be stored as a number (and ``math.isfinite``
    of it overflows), so it is refused here, naming the field (issue 10).
    """
    if isinstance(v, bool | str):
        return True
    if isinstance(v, int):
        return INT64_MIN <= v <= INT64_MAX
    return isinstance(v, float) and math.isfinite(v)


def _check_number_types(raw: Any, where: str) -> None:
    """Refuse the first value that is not a number (booleans are not), by its type."""
    for v in raw:
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise InvalidInput(
                f"Invalid embedding format for {where}: embedding must be an array of "
                f"numbers, found {type(v).__name__}"
            )


def check_vector(raw: Any, where: str, max_dimension: int | None = None) -> np.ndarray:
    """An embedding must be a non-empty list of finite numbers, checked as float32.

    Vectors are stored as float32, so the checks are done on the float32 values:
    a value beyond float32's range is refused (it would become infinity), and a
    vector whose values all round to zero (``1e-50``) or whose length cannot be
    computed in float32 (every value tiny or huge) has no direction for cosine
    similarity and is refused too, instead of being stored as zeros (issue 10).
    """
    if not isinstance(raw, list | tuple) or not raw:
        raise InvalidInput(
            f"Invalid embedding format for {where}: embedding must be a non-empty array "
            "of numbers"
        )
    if max_dimension is not None and len(raw) > max_dimension:
        raise InvalidInput(
            f"Invalid embedding format for {where}: {len(raw)} dimensions is more than the "
            f"limit of {max_dimension} (setting max_embedding_dimension)"
        )
    if not set(map(type, raw)) <= _NUMBER_TYPES:  # the per-value walk only to say why
        _check_number_types(raw, where)
    try:
        vec = np.asarray(raw, dtype=np.float64)
    except OverflowError:  # an integer too large even for float64
        raise InvalidInput(
            f"Invalid embedding format for {where}: a value is outside the float32 range"
        ) from None
    # One reduction for the common case (NaN propagates through max, and fails both
    # comparisons); only a refused vector runs the checks one by one, to say why. The
    # separate reductions were ~60 % of this function's ~60 us per search.
    peak = float(np.abs(vec).max())
    if not 0.0 < peak <= FLOAT32_MAX:
        _refuse(vec, where)
    vec32 = vec.astype(np.float32)
    with np.errstate(over="ignore"):  # an overflow is refused just below
        squares = float(vec32.dot(vec32))  # np.linalg.norm's own sum, in float32
    if squares == 0.0 or not math.isfinite(squares):
        raise InvalidInput(
            f"Invalid embedding format for {where}: its values are too small or too large "
            "to be stored as float32 with a usable length (they round to zero or overflow); "
            "scale the vector"
        )
    return vec32


def _refuse(vec: np.ndarray, where: str) -> NoReturn:
    """Why a vector whose largest magnitude is not in (0, float32 max] is refused."""
    if not np.all(np.isfinite(vec)):
        raise InvalidInput(
            f"Invalid embedding format for {where}: embedding contains NaN or infinite values"
        )
    if np.any(np.abs(vec) > FLOAT32_MAX):
        raise InvalidInput(
            f"Invalid embedding format for {where}: a value is outside the float32 range "
            f"(largest magnitude {FLOAT32_MAX:.6g})"
        )
    raise InvalidInput(
        f"Invalid embedding format for {where}: embedding is all zeros, which has no "
        "direction for cosine similarity"
    )


_NUMBER_TYPES = frozenset({float, int})


def check_vectors(raws: list[Any], max_dimension: int | None = None) -> np.ndarray | None:
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
    if all(type(raw) is np.ndarray for raw in raws):
        return _check_rows(raws, max_dimension)
    width = None
    for raw in raws:
        if type(raw) is not list or not raw:
            return None
        if width is None:
            width = len(raw)
            if max_dimension is not None and width > max_dimension:
                return None
        elif len(raw) != width:
            return None
        if not set(map(type, raw)) <= _NUMBER_TYPES:
            return None
    try:
        mat = np.array(raws, dtype=np.float64)
    except (ValueError, OverflowError):  # an int too large for a float: slow path says so
        return None
    return _checked(mat)


def _check_rows(rows: list[Any], max_dimension: int | None) -> np.ndarray | None:
    """Embeddings that arrived as numpy rows (a bulk write's body read by
    :mod:`ragline.api.bulk_json`, or a library caller's arrays): one matrix, the same
    checks. Anything but 1-D rows of numbers (float or integer dtypes; not bool) of one
    length goes the slow way, as lists."""
    width = rows[0].shape[-1] if rows[0].ndim == 1 else -1
    if (width < 1 or (max_dimension is not None and width > max_dimension)
            or any(r.ndim != 1 or r.dtype.kind not in "fiu" or r.shape[0] != width
                   for r in rows)):
        return None
    mat = np.stack(rows).astype(np.float64, copy=False)  # ~1 ms for 1,000 384-d rows
    return _checked(mat)


def _checked(mat: np.ndarray) -> np.ndarray | None:
    if not np.isfinite(mat).all() or not mat.any(axis=1).all():
        return None
    if (np.abs(mat) > FLOAT32_MAX).any():
        return None
    mat32 = mat.astype(np.float32)
    with np.errstate(over="ignore", under="ignore"):  # an infinite norm is refused below
        norms = np.linalg.norm(mat32, axis=1)
    if not np.isfinite(norms).all() or not (norms > 0).all():  # the float32 rules of
        return None  # check_vector: the slow path names the document
    return mat32


def check_dimension(got: int, expected: int | None, where: str, collection: str) -> None:
    if expected is not None and got != expected:
        raise InvalidInput(
            f"Embedding dimension mismatch for {where}: collection '{collection}' expects "
            f"{expected} dimensions, got {got}"
        )
