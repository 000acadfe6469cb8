"""Which metadata fields get a payload index, and of what type.

Qdrant filters without an index by scanning payloads, which is correct but
slow at scale; an index of the wrong type is worse than none. So a field is
indexed only while every value seen has one kind (keyword, integer, float or
bool); the first conflicting value drops the index again. The kinds seen are
persisted so a restart keeps the decision: beside the shard for Qdrant Edge
(``path``), in the collection's metadata for a Qdrant server (``path=None``,
the provider saves :attr:`FieldKinds.kinds` itself).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MAX_INDEXED_FIELDS = 64
MAX_TRACKED_VALUES = 32
"""Distinct values of an integer field remembered (for splitting range filters into one
graph walk per value); past this many the field's values are 'many' (None)."""


def value_kind(value: Any) -> str | None:
    """The index kind a value needs, or None for values that need none (null)."""
    if value is None:
        return None
    if isinstance(value, list):
        kinds = {value_kind(v) for v in value} - {None}
        if len(kinds) == 1:
            return kinds.pop()
        return "mixed" if kinds else None
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    return "keyword"


class FieldKinds:
    """Persistent map field -> kind ("keyword" | "integer" | "float" | "bool" | "mixed")."""

    def __init__(self, path: Path | None, kinds: dict[str, str] | None = None) -> None:
        self.path = path
        self.kinds: dict[str, str] = dict(kinds or {})
        if path is not None and path.exists():
            self.kinds = json.loads(path.read_text())
        # every value each integer field ever had (None: unknown or more than
        # MAX_TRACKED_VALUES); kept beside the kinds when there is a path. Fields that
        # existed before values were tracked are unknown for good.
        self.values_path = path.with_name("ragline_int_values.json") if path else None
        self.int_values: dict[str, list[int] | None] = {f: None for f in self.kinds}
        if self.values_path is not None and self.values_path.exists():
            self.int_values.update(json.loads(self.values_path.read_text()))
        self.values_changed = False

    def observe(
        self, metas: list[dict[str, Any]]
    ) -> tuple[dict[str, str], list[tuple[str, str]]]:
        """Record the kinds in a batch; return (fields to index, (field, kind) to un-index)."""
        seen: dict[str, set[str]] = {}
        ints: dict[str, set[int]] = {}
        for meta in metas:
            for k, v in meta.items():
                kind = value_kind(v)
                if kind is not None:
                    seen.setdefault(k, set()).add(kind)
                    if kind == "integer":
                        ints.setdefault(k, set()).update(v if isinstance(v, list) else [v])
        self._track(ints)
        to_index: dict[str, str] = {}
        to_drop: list[tuple[str, str]] = []
        for field, kinds in seen.items():
            old = self.kinds.get(field)
            merged = kinds | ({old} if old else set())
            if merged <= {"integer", "float"} and len(merged) == 2:
                new = "mixed-number"
            else:
                new = merged.pop() if len(merged) == 1 else "mixed"
            if new == old:
                continue
            if old is None:
                indexed = sum(1 for k in self.kinds.values() if not k.startswith("mixed"))
                if not new.startswith("mixed") and indexed < MAX_INDEXED_FIELDS:
                    to_index[field] = new
            elif not old.startswith("mixed"):
                to_drop.append((field, old))
            self.kinds[field] = new
        return to_index, to_drop

    def _track(self, ints: dict[str, set[int]]) -> None:
        if self.values_path is None:
            return
        for field, vals in ints.items():
            known = self.int_values.get(field, [])
            if known is None or vals <= set(known):
                continue
            merged = sorted(set(known) | vals)
            self.int_values[field] = merged if len(merged) <= MAX_TRACKED_VALUES else None
            self.values_changed = True

    def integer_values(self, field: str) -> list[int] | None:
        """Every value the integer field ``field`` has had (a superset of what it holds
        now), or None when unknown or too many."""
        if self.kinds.get(field) != "integer":
            return None
        return self.int_values.get(field)

    def save_values(self) -> None:
        """Persist the tracked values; called *before* the write that brings new ones,
        so after a crash the file holds at least every value the shard has."""
        if self.values_path is None or not self.values_changed:
            return
        tmp = self.values_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.int_values, sort_keys=True))
        tmp.replace(self.values_path)
        self.values_changed = False

    def indexed(self, field: str) -> str | None:
        kind = self.kinds.get(field)
        return kind if kind and not kind.startswith("mixed") else None

    def save(self) -> None:
        if self.path is None:
            return
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.kinds, sort_keys=True))
        tmp.replace(self.path)
