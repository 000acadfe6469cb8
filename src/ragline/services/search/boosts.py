"""Metadata boosts: nudge search results whose metadata matches the query context (spec 003).

Vector similarity alone does not know that a runbook tagged ``cpu`` is about
the alert labelled ``cpu``, or that a chunk for shapes ``VM.*`` applies to a
``VM.Standard.E4.Flex`` instance. Boosts add small, explainable amounts to the
score for such matches, then re-sort. Everything here is a pure function of
the results and the config (no I/O), so retrieval can apply it after fusion or
reranking and tests can check exact numbers.

Kinds of boost, summed per result and recorded as ``result["boost"]``:

* **tags** — ``tag_weight`` per query tag found in ``metadata[tag_field]``
  (case-insensitive), so more matching tags rank higher;
* **glob** — for each ``metadata field -> query value key`` in ``glob_fields``,
  ``glob_weight`` once if any query value matches any of the result's patterns
  (``fnmatch``, case-sensitive: ``VM.*`` matches ``VM.Standard.E4.Flex``);
* **numeric** — ``weight * (v - min) / (max - min)`` for each field in
  ``numeric_fields``, min/max taken over the candidate set (e.g. recency).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ragline.errors import InvalidInput

_MAPPING_FIELDS = ("glob_fields", "numeric_fields", "query_values")


class BoostConfig(BaseModel):
    """How to boost; stored under a collection's metadata key ``boost`` or sent per request."""

    # NaN or infinite weights would turn every score into null (issue 10)
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    tag_field: str = "tags"
    tag_weight: float = 0.1
    glob_fields: dict[str, str] = Field(
        default_factory=dict,
        description="Metadata field holding glob patterns -> key in query_values to match.",
    )
    glob_weight: float = 0.1
    numeric_fields: dict[str, float] = Field(
        default_factory=dict,
        description="Metadata field -> weight of its min-max normalised value.",
    )
    query_tags: list[str] = Field(default_factory=list)
    query_values: dict[str, str | list[str]] = Field(default_factory=dict)

    def is_noop(self) -> bool:
        """True when no boost can apply, so callers can skip the pass entirely."""
        return not (
            (self.query_tags and self.tag_weight)
            or (self.glob_fields and self.query_values and self.glob_weight)
            or any(self.numeric_fields.values())
        )


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, list | tuple | set | frozenset):
        return list(value)
    return [value]


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def tag_matches(metadata: Mapping[str, Any], field: str, query_tags: Iterable[str]) -> int:
    """How many distinct query tags appear in ``metadata[field]`` (case-insensitive)."""
    have = {str(t).casefold() for t in _as_list(metadata.get(field))}
    return len({t.casefold() for t in query_tags} & have)


def glob_match(patterns: Any, values: Any) -> bool:
    """True if any value matches any pattern (``fnmatchcase``)."""
    pats = [str(p) for p in _as_list(patterns)]
    return any(fnmatchcase(str(v), p) for v in _as_list(values) for p in pats)


def compute_boosts(results: Sequence[Mapping[str, Any]], config: BoostConfig) -> list[float]:
    """The boost of each result, in input order."""
    metas: list[Mapping[str, Any]] = [r.get("metadata") or {} for r in results]
    boosts = [0.0] * len(results)
    for i, meta in enumerate(metas):
        if config.query_tags and config.tag_weight:
            boosts[i] += config.tag_weight * tag_matches(meta, config.tag_field, config.query_tags)
        for field, key in config.glob_fields.items():
            if key in config.query_values and glob_match(meta.get(field), config.query_values[key]):
                boosts[i] += config.glob_weight
    for field, weight in config.numeric_fields.items():
        values = [_number(m.get(field)) for m in metas]
        present = [v for v in values if v is not None]
        if not weight or len(present) < 2 or max(present) == min(present):
            continue  # nothing to tell the candidates apart
        low, span = min(present), max(present) - min(present)
        for i, v in enumerate(values):
            if v is not None:
                boosts[i] += weight * (v - low) / span
    return boosts


def apply_boosts(
    results: Sequence[Mapping[str, Any]], config: BoostConfig | None
) -> list[dict[str, Any]]:
    """New result dicts with ``score += boost`` and ``boost`` recorded, stably re-sorted.

    Results are mappings with ``score`` and ``metadata``; other keys are kept.
    Equal scores keep their incoming order, so an earlier ranking stage still
    breaks ties.
    """
    if config is None or config.is_noop():
        return [{**r, "boost": 0.0} for r in results]
    boosts = compute_boosts(results, config)
    boosted = [
        {**r, "score": float(r.get("score") or 0.0) + b, "boost": b}
        for r, b in zip(results, boosts, strict=True)
    ]
    return sorted(boosted, key=lambda r: -r["score"])  # sorted() is stable


def _as_dict(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, BoostConfig):
        return value.model_dump(exclude_unset=True)
    if isinstance(value, str):  # stores that keep metadata values as strings
        try:
            value = json.loads(value)
        except ValueError:
            raise InvalidInput(f"{what} is not valid JSON") from None
    if not isinstance(value, Mapping):
        raise InvalidInput(f"{what} must be an object")
    return dict(value)


def merge_boost_config(
    collection_meta: Mapping[str, Any] | None,
    request_override: Mapping[str, Any] | BoostConfig | None,
) -> BoostConfig | None:
    """The collection's ``boost`` metadata with the request's override on top.

    Scalars and lists in the override replace the collection's; the mapping
    fields (``glob_fields``, ``numeric_fields``, ``query_values``) are merged key
    by key, so a request can add its ``query_values`` to the collection's
    ``glob_fields``. ``None`` when neither sets anything.
    """
    base = _as_dict((collection_meta or {}).get("boost"), "collection metadata 'boost'")
    override = _as_dict(request_override, "boost")
    if not base and not override:
        return None
    merged = {**base, **override}
    for key in _MAPPING_FIELDS:
        if isinstance(base.get(key), Mapping) and isinstance(override.get(key), Mapping):
            merged[key] = {**base[key], **override[key]}
    try:
        return BoostConfig.model_validate(merged)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'boost'}: {e['msg']}" for e in exc.errors()
        )
        raise InvalidInput(f"Invalid boost config: {problems}") from None
