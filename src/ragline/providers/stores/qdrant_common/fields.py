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

    def observe(
        self, metas: list[dict[str, Any]]
    ) -> tuple[dict[str, str], list[tuple[str, str]]]:
        """Record the kinds in a batch; return (fields to index, (field, kind) to un-index)."""
        seen: dict[str, set[str]] = {}
        for meta in metas:
            for k, v in meta.items():
                kind = value_kind(v)
                if kind is not None:
                    seen.setdefault(k, set()).add(kind)
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

    def indexed(self, field: str) -> str | None:
        kind = self.kinds.get(field)
        return kind if kind and not kind.startswith("mixed") else None

    def save(self) -> None:
        if self.path is None:
            return
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.kinds, sort_keys=True))
        tmp.replace(self.path)
