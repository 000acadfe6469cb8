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
import re
from collections.abc import Mapping
from typing import Any

from ragline.core.filters import INT64_MAX, INT64_MIN, key_problem
from ragline.errors import InvalidInput
from ragline.ingest.budgets import METADATA_MAX_BYTES, METADATA_MAX_DEPTH, METADATA_MAX_KEYS
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

SPEC_FRONTMATTER_DEFAULTS: dict[str, Scalar] = {"proficiency_level": "A2", "hardware_tier": 1}
"""Spec 004: what a lesson without (or with a malformed) value of these fields gets."""

MAX_KEY_LENGTH = 128
_UNSAFE_KEY_CHARS = re.compile(r"[^\w-]+")


def storable_key(key: object) -> str | None:
    """``key`` as a metadata field name under the one key grammar
    (:func:`ragline.core.filters.key_problem`): kept as written when it is storable
    (``og:title``, ``reading time``, ``a.b`` all are); a leading ``$`` is dropped and
    a double quote or backslash becomes ``_``. ``None`` when nothing usable is left
    or the key is longer than :data:`MAX_KEY_LENGTH`.
    """
    text = str(key).strip()
    if key_problem(text) is not None:
        text = text.lstrip("$").replace('"', "_").replace("\\", "_").strip()
    if not text or len(text) > MAX_KEY_LENGTH or key_problem(text) is not None:
        return None
    return text


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


class _Budget:
    """What one source's flattening may still produce (:mod:`ragline.ingest.budgets`)."""

    def __init__(self, name: str) -> None:
        self.name = name or "<source>"
        self.keys = METADATA_MAX_KEYS
        self.chars = METADATA_MAX_BYTES
        self.visits = 10 * METADATA_MAX_KEYS  # mapping entries walked, skipped ones too
        self.open: set[int] = set()  # mappings being flattened (a cycle's ancestors)

    def visit(self) -> None:
        self.visits -= 1
        if self.visits < 0:
            raise InvalidInput(f"{self.name}: metadata refused: more than "
                               f"{10 * METADATA_MAX_KEYS} entries (limit 10 x METADATA_MAX_KEYS)")

    def spend(self, key: str, value: MetadataValue) -> None:
        self.keys -= 1
        if isinstance(value, list):
            self.chars -= sum(len(v) if isinstance(v, str) else 8 for v in value)
        self.chars -= len(key) + (len(value) if isinstance(value, str) else 8)
        if self.keys < 0:
            raise InvalidInput(f"{self.name}: metadata refused: more than "
                               f"{METADATA_MAX_KEYS} fields (limit METADATA_MAX_KEYS)")
        if self.chars < 0:
            raise InvalidInput(f"{self.name}: metadata refused: more than "
                               f"{METADATA_MAX_BYTES} characters (limit METADATA_MAX_BYTES)")


def _nested_text(item: Any, budget: _Budget) -> str:
    """A list item that is itself a list or mapping, as JSON text, within the budget.

    The item is sized first, building nothing: a node shared through YAML aliases is
    counted each time it is met, so the count reaches the budget and stops where an
    expansion would have grown; only an item within the budget is serialised. A
    structure that contains itself is kept as its (truncated) ``str``."""
    room = [budget.chars]
    circular = [False]

    def size(value: Any, ancestors: set[int], depth: int) -> None:
        room[0] -= 8 + (len(value) if isinstance(value, str) else 0)
        if room[0] < 0 or depth > 2 * METADATA_MAX_DEPTH:
            raise InvalidInput(f"{budget.name}: metadata refused: more than "
                               f"{METADATA_MAX_BYTES} characters (limit METADATA_MAX_BYTES)")
        if not isinstance(value, Mapping | list | tuple):
            return
        if id(value) in ancestors:
            circular[0] = True
            return
        ancestors.add(id(value))
        for sub in ([*map(str, value), *value.values()] if isinstance(value, Mapping)
                    else value):
            size(sub, ancestors, depth + 1)
        ancestors.discard(id(value))

    size(item, set(), 0)
    if circular[0]:
        return str(item)[:1000]
    try:
        return json.dumps(item, default=str, sort_keys=True)
    except (ValueError, TypeError):  # unsortable keys
        return str(item)[:1000]


def _flatten(prefix: str, value: Any, out: dict[str, MetadataValue], budget: _Budget,
             depth: int = 0) -> None:
    name = budget.name
    if depth > METADATA_MAX_DEPTH:  # YAML aliases can even make a structure contain itself
        log.warning("%s: metadata field %r is nested deeper than %d levels "
                    "(METADATA_MAX_DEPTH); skipped", name, prefix, METADATA_MAX_DEPTH)
        return
    if isinstance(value, Mapping):
        if id(value) in budget.open:  # a YAML alias made it contain itself
            log.warning("%s: metadata field %r contains itself; skipped", name, prefix)
            return
        budget.open.add(id(value))
        for key, sub in value.items():
            budget.visit()
            safe = storable_key(key)
            if safe is None:
                log.warning("%s: metadata key %r cannot be stored; skipped", name,
                            str(key)[:80])
                continue
            if safe != str(key):
                log.warning("%s: metadata key %r stored as %r", name, str(key)[:80], safe)
            _flatten(f"{prefix}_{safe}" if prefix else safe, sub, out, budget, depth + 1)
        budget.open.discard(id(value))
        return
    if isinstance(value, list | tuple | set | frozenset):
        items: list[Scalar] = []
        for item in value:
            if isinstance(item, Mapping | list | tuple):
                # Lists of objects cannot be filtered on anyway; keep them readable.
                items.append(_nested_text(item, budget))
            elif (s := _scalar(item)) is not None:
                items.append(s)
            if len(items) > METADATA_MAX_KEYS:
                raise InvalidInput(f"{name}: metadata refused: field {prefix!r} holds more "
                                   f"than {METADATA_MAX_KEYS} items (limit METADATA_MAX_KEYS)")
        budget.spend(prefix, items)
        out[prefix] = items
        return
    scalar = _scalar(value)
    if scalar is not None:
        budget.spend(prefix, scalar)
        out[prefix] = scalar


def normalize_metadata(raw: Mapping[Any, Any], name: str = "") -> Metadata:
    """Flatten nested mappings with ``_`` and coerce values to JSON scalars.

    ``{"cognitive_load": {"new_concepts": 2}}`` becomes
    ``{"cognitive_load_new_concepts": 2}``; dates become ISO strings; ``None``
    values are dropped so that defaults can fill them; items of a list that are
    themselves objects are kept as JSON strings. Keys in :data:`RESERVED_KEYS`
    are renamed ``fm_<key>``. A key that cannot be stored is renamed or
    skipped by :func:`storable_key`, with a warning naming ``name``: a stray
    frontmatter key never fails an ingestion. Metadata over the budget of
    :mod:`ragline.ingest.budgets` (keys, characters) raises :class:`InvalidInput`
    naming the limit.
    """
    out: dict[str, MetadataValue] = {}
    _flatten("", raw, out, _Budget(name))
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


def _conform(value: MetadataValue, default: Scalar) -> MetadataValue | None:
    """``value`` if it is a well-formed stand-in for ``default``'s type, else ``None``."""
    if isinstance(value, list):
        return None
    if isinstance(default, bool):
        return value if isinstance(value, bool) else None
    if isinstance(default, int | float):
        if isinstance(value, bool):
            return None
        if isinstance(value, int | float):
            return value
        try:
            number = float(str(value).strip())
        except ValueError:
            return None
        return int(number) if isinstance(default, int) and number.is_integer() else number
    return value if isinstance(value, str) and value.strip() else None


def apply_frontmatter_defaults(
    metadata: Metadata, defaults: Mapping[str, Scalar], name: str = ""
) -> Metadata:
    """Fill missing or malformed fields from ``defaults``, with a warning naming the file.

    Spec 004: a lesson without ``hardware_tier`` or ``proficiency_level`` (or
    with one that is the wrong type, e.g. ``hardware_tier: high``) gets the
    default, so that a filter such as ``hardware_tier <= 1`` keeps
    tier-agnostic pages (overviews, a preface) instead of silently dropping
    them. Returns a new mapping; ``metadata`` is not changed.
    """
    out = dict(metadata)
    missing: list[str] = []
    for key, default in defaults.items():
        if key not in out:
            missing.append(key)
            out[key] = default
            continue
        conformed = _conform(out[key], default)
        if conformed is None:
            log.warning("%s: frontmatter %s=%r is malformed; using %r",
                        name or "<source>", key, out[key], default)
            out[key] = default
        else:
            out[key] = conformed
    if missing:
        log.warning("%s: no %s in the frontmatter; using %s", name or "<source>",
                    ", ".join(missing), ", ".join(f"{k}={defaults[k]!r}" for k in missing))
    return out
