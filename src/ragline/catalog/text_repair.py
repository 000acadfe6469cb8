"""Catalog rows holding text no store can hold, found and repaired (``ragline verify``).

Before requests were checked (issue 32) a lone surrogate (``"\\ud800"``) or NUL could
reach the embedded catalog inside its JSON columns (an ingestion job's ``paths``, its
warnings, a collection's metadata): SQLite keeps the JSON escape, and every read that
decodes it got a string that cannot be encoded, so the tenant's job list answered 500.
:func:`unstorable_rows` finds them; with ``repair`` each such value is rewritten with
U+FFFD in place of a lone surrogate and NUL dropped (:func:`ragline.core.text.repaired`).
A shared catalog (PostgreSQL's ``jsonb``) never accepted them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ragline.catalog.sqlite import Catalog
from ragline.core.text import find_unstorable, repair_value

JSON_COLUMNS: dict[str, tuple[str, tuple[str, ...]]] = {
    "jobs": ("id", ("payload", "warnings", "result")),
    "collections": ("name", ("metadata",)),
    "ingest_sources": ("source_id", ("chunk_ids",)),
}
"""Table -> (the column naming a row, the JSON columns read back as text)."""


@dataclass(frozen=True)
class BadText:
    table: str
    row: str
    column: str
    field: str
    what: str


def unstorable_rows(catalog: Catalog, *, repair: bool = False) -> list[BadText]:
    """Every JSON value in :data:`JSON_COLUMNS` holding unstorable text; rewritten when
    ``repair`` (in one transaction)."""
    found: list[BadText] = []
    fixes: list[tuple[str, str, str, str]] = []  # table, column, new JSON, rowid
    db = catalog.read()
    for table, (key, columns) in JSON_COLUMNS.items():
        cols = ", ".join(columns)
        for row in db.execute(f"SELECT rowid, {key}, {cols} FROM {table}"):
            for i, column in enumerate(columns):
                raw = row[i + 2]
                if not raw or ("\\u" not in raw and "\x00" not in raw):
                    continue
                value = json.loads(raw)
                bad = find_unstorable(value)
                if bad is None:
                    continue
                name = str(row[1]).encode("utf-8", "replace").decode()
                found.append(BadText(table, name, column, bad[0], bad[1]))  # field quoted
                fixes.append((table, column, json.dumps(repair_value(value)), str(row[0])))
    if repair and fixes:
        with catalog.tx() as tx:
            for table, column, text, rowid in fixes:
                tx.execute(f"UPDATE {table} SET {column}=? WHERE rowid=?",
                           (text, int(rowid)))
    return found
