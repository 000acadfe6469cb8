"""Stored records holding values no write accepts any more, and their repair (issue 32).

Before requests were checked, a record could reach a store with a lone surrogate or
NUL in its text, a metadata key or value (:mod:`ragline.core.text`), or with metadata
nested deeper than a write takes (a value must be a scalar or a flat list of scalars:
:func:`ragline.services.corpus.validation.check_metadata`). ``ragline verify`` reports each
such record; ``--repair`` rewrites or removes it, one decision per case:

* a lone surrogate or NUL in the text, a metadata key or a metadata value: **rewritten**
  in place, U+FFFD for a lone surrogate, NUL dropped (same id, tenant and vector);
* a metadata field nested too deep: **rewritten**, the field flattened the way ingestion
  flattens frontmatter (``{"a": {"b": 1}}`` → ``a_b: 1``, objects inside lists as JSON
  text, parts deeper than the flattening's budget dropped); a flattened key that an
  existing field already holds is left out (the existing field wins); a field the
  flattening refuses (over its key or size budget) is removed;
* an id holding a lone surrogate or NUL: **removed**: a record's id is its address (other
  records, state rows and clients refer to it), so it cannot be rewritten in place.

:func:`examine` decides; :class:`~ragline.services.ingestion.verify.VerifyService` writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ragline.core.text import find_unstorable, repair_value, unstorable
from ragline.core.types import Record
from ragline.errors import InvalidInput
from ragline.ingest.metadata import normalize_metadata


@dataclass(frozen=True)
class RecordFix:
    """What is wrong with one stored record and what ``--repair`` does about it."""

    record: Record
    problems: list[str]
    actions: list[str]
    replacement: Record | None
    """The record to write in its place; ``None``: the record is removed."""

    @property
    def removes(self) -> bool:
        return self.replacement is None


def _flat(value: Any) -> bool:
    """A value a write takes: a scalar, null, or a list of scalars."""
    if isinstance(value, dict):
        return False
    if isinstance(value, list):
        return not any(isinstance(v, dict | list) for v in value)
    return True


def _depth(value: Any) -> int:
    """Levels of lists and mappings in ``value`` (a scalar is 0), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            stack.extend((v, level + 1) for v in (item.values() if isinstance(item, dict)
                                                  else item))
    return deepest


def examine(record: Record) -> RecordFix | None:
    """The repair ``record`` needs, or ``None`` when a write would take it as it is."""
    bad_id = unstorable(record.id)
    if bad_id is not None:
        return RecordFix(record, [f"its id holds {bad_id}"],
                         ["removed (an id is the record's address: it cannot be rewritten)"],
                         None)
    problems: list[str] = []
    actions: list[str] = []
    text = record.text
    found = unstorable(text)
    if found is not None:
        problems.append(f"'text' holds {found}")
        text = str(repair_value(text))
    metadata: dict[str, Any] = dict(record.metadata)
    found_meta = find_unstorable(metadata, "metadata")
    if found_meta is not None:
        problems.append(f"{found_meta[0]} holds {found_meta[1]}")
        metadata = repair_value(metadata)
    if problems:
        actions.append("U+FFFD in place of each lone surrogate, NUL dropped")
    nested = sorted(k for k, v in metadata.items() if not _flat(v))
    for key in nested:
        value = metadata.pop(key)
        shape = "a mapping" if isinstance(value, dict) else "a list holding lists or mappings"
        problems.append(f"metadata field {key!r} holds {shape} {_depth(value)} level(s) deep "
                        "(a write takes a scalar or a flat list)")
        try:
            flattened = normalize_metadata({key: value}, f"record {record.id!r}")
        except InvalidInput as exc:
            actions.append(f"field {key!r} removed ({exc.message})")
            continue
        kept = {k: v for k, v in flattened.items() if k not in metadata}
        metadata.update(kept)
        actions.append(f"field {key!r} flattened into {len(kept)} field(s)"
                       if kept else f"field {key!r} removed (nothing left once flattened)")
    if not problems:
        return None
    return RecordFix(record, problems, actions,
                     Record(record.id, text, metadata, record.embedding, record.tenant))
