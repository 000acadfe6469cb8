"""Turning arbitrary YAML/JSON-ish values into store-friendly metadata.

Stores index and filter JSON scalars and flat lists of scalars only, so every
source's metadata (frontmatter, path fields, PDF info, defaults) goes through
:func:`normalize_metadata` and is combined with :func:`merge_metadata`.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
from collections.abc import Mapping
from typing import Any

from ragline.core.filters import INT64_MAX, INT64_MIN, key_problem
from ragline.ingest.types import Metadata, MetadataValue, Scalar

log = logging.getLogger(__name__)

RESERVED_KEYS: frozenset[str] = frozenset(
    {
        "id", "text", "embedding", "tenant", "metadata", "document",
        "source_id", "parent_doc_id", "source_path", "source_type", "source_hash",
        "title", "section_id", "section_title", "heading_path", "chunk_index",
        "prev_chunk_id", "next_chunk_id", "content_hash", "token_count",
        "page_number", "created_at", "updated_at",
    }
)  # fmt: skip
"""Fields a chunk record sets itself. A source's own key with one of these
names is kept under ``fm_<name>`` so it can never overwrite a record field."""

RESERVED_PREFIX = "fm_"


def _scalar(value: Any) -> Scalar | None:
    """One value as a JSON scalar; dates become ISO strings, NaN/None vanish."""
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, dt.date | dt.time):  # datetime is a date
        return value.isoformat()
    if value is None:
        return None
    return str(value)


def _flatten(prefix: str, value: Any, out: dict[str, MetadataValue]) -> None:
    if isinstance(value, Mapping):
        for key, sub in value.items():
            _flatten(f"{prefix}_{key}" if prefix else str(key), sub, out)
        return
    if isinstance(value, list | tuple | set | frozenset):
        items: list[Scalar] = []
        for item in value:
            if isinstance(item, Mapping | list | tuple):
                # Lists of objects cannot be filtered on anyway; keep them readable.
                items.append(json.dumps(item, default=str, sort_keys=True))
            elif (s := _scalar(item)) is not None:
                items.append(s)
        out[prefix] = items
        return
    scalar = _scalar(value)
    if scalar is not None:
        out[prefix] = scalar


def normalize_metadata(raw: Mapping[str, Any]) -> Metadata:
    """Flatten nested mappings with ``_`` and coerce values to JSON scalars.

    ``{"cognitive_load": {"new_concepts": 2}}`` becomes
    ``{"cognitive_load_new_concepts": 2}``; dates become ISO strings; ``None``
    values are dropped so that defaults can fill them; items of a list that are
    themselves objects are kept as JSON strings. Keys in :data:`RESERVED_KEYS`
    are renamed ``fm_<key>``.
    """
    out: dict[str, MetadataValue] = {}
    for key, value in raw.items():
        _flatten(str(key), value, out)
    return {(RESERVED_PREFIX + k if k in RESERVED_KEYS else k): v for k, v in out.items()}


def _coerce_like(value: MetadataValue, like: MetadataValue) -> MetadataValue | None:
    """``value`` converted to the type of ``like`` when that is unambiguous.

    Returns ``None`` when ``value`` cannot stand in for ``like`` (e.g. the text
    ``"two"`` where an int is expected): a filter such as ``hardware_tier <= 1``
    needs an int, and a wrong type would silently exclude the document.
    """
    if isinstance(like, (bool, list)) or isinstance(value, list):
        return value
    if isinstance(like, int | float) and not isinstance(value, bool):
        if isinstance(value, int | float):
            return value
        try:
            return type(like)(str(value).strip())
        except ValueError:
            return None
    if isinstance(like, str) and not isinstance(value, str):
        return str(value).lower() if isinstance(value, bool) else str(value)
    return value


def _int64_ok(value: Any) -> bool:
    if isinstance(value, list):
        return all(_int64_ok(v) for v in value)
    return not isinstance(value, int) or isinstance(value, bool) or (
        INT64_MIN <= value <= INT64_MAX)


def merge_metadata(*layers: Mapping[str, MetadataValue], name: str = "") -> Metadata:
    """Combine metadata layers, later ones winning, with types kept stable.

    The loader merges ``defaults < path fields < the source's own metadata``.
    When a later layer gives a value whose type cannot match the earlier one
    (``hardware_tier: "high"`` over a default of ``1``), the earlier value is
    kept and a warning names the file, mirroring spec 004's rule for malformed
    frontmatter. Numeric strings are converted (``"2"`` → ``2``).
    """
    merged: dict[str, MetadataValue] = {}
    for layer in layers:
        for key, value in layer.items():
            problem = key_problem(key)
            if problem is not None:  # never a failed job for an odd frontmatter key
                log.warning("%s: metadata key %r skipped: it %s", name or "<source>", key,
                            problem)
                continue
            if not _int64_ok(value):
                log.warning("%s: metadata field %r holds an integer beyond 64 bits; kept "
                            "as text", name or "<source>", key)
                value = ([str(v) if isinstance(v, int) and not _int64_ok(v) else v
                          for v in value] if isinstance(value, list) else str(value))
            if key not in merged:
                merged[key] = value
                continue
            coerced = _coerce_like(value, merged[key])
            if coerced is None:
                log.warning(
                    "%s: metadata field %r has value %r of the wrong type; keeping %r",
                    name or "<source>", key, value, merged[key],
                )
                continue
            merged[key] = coerced
    return merged
