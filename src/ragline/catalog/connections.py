"""Named connections added over the API, stored in the catalog.

A row holds the provider name, its non-secret options (JSON) and its secret
options in a column of their own, so no listing query can return them by
accident. Secrets are stored as given (the catalog file is the data
directory's, readable by its owner only; encrypting them would need a key kept
somewhere else): they leave this table only to build the provider.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from ragline.catalog.sqlite import Catalog, now_iso
from ragline.errors import ConnectionExists


@dataclass(frozen=True)
class StoredConnection:
    id: str
    kind: str
    provider: str
    options: dict[str, Any]
    secrets: dict[str, Any] = field(repr=False)
    created_at: str


class ConnectionTable:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog  # ``connections`` is created by the catalog's migrations

    @staticmethod
    def _row(row: sqlite3.Row) -> StoredConnection:
        return StoredConnection(row["id"], row["kind"], row["provider"],
                                json.loads(row["options"]), json.loads(row["secrets"]),
                                row["created_at"])

    def add(self, cid: str, kind: str, provider: str, options: dict[str, Any],
            secrets: dict[str, Any]) -> StoredConnection:
        try:
            with self.catalog.tx() as db:
                db.execute("INSERT INTO connections VALUES (?,?,?,?,?,?)",
                           (cid, kind, provider, json.dumps(options), json.dumps(secrets),
                            now_iso()))
        except sqlite3.IntegrityError:
            raise ConnectionExists(f"Connection '{cid}' already exists") from None
        found = self.get(cid)
        assert found is not None
        return found

    def get(self, cid: str) -> StoredConnection | None:
        row = self.catalog.read().execute("SELECT * FROM connections WHERE id=?",
                                          (cid,)).fetchone()
        return self._row(row) if row else None

    def all(self) -> list[StoredConnection]:
        rows = self.catalog.read().execute("SELECT * FROM connections ORDER BY id").fetchall()
        return [self._row(r) for r in rows]

    def delete(self, cid: str) -> bool:
        with self.catalog.tx() as db:
            return db.execute("DELETE FROM connections WHERE id=?", (cid,)).rowcount > 0
