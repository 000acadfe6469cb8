"""API keys in the catalog: stored hashed, never retrievable after creation.

A key reads ``rl_<id>_<secret>``: ``id`` (12 hex characters) finds the row,
and the SHA-256 of the whole key is compared with the stored hash in constant
time. SHA-256 (not a slow password hash) is right here because the secret is 32
random bytes: nothing can be guessed, and a check must cost microseconds, not
milliseconds, on every request.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import sqlite3
from dataclasses import dataclass
from typing import Any

from ragline.catalog.sqlite import Catalog, now_iso

PREFIX = "rl_"


@dataclass(frozen=True)
class KeyRecord:
    """A key as listed: everything but the secret (which is not stored)."""

    id: str
    role: str
    tenant: str
    name: str
    created_at: str
    last_used_at: str | None
    revoked_at: str | None


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def matches(key: str, row: Any) -> bool:
    """``key`` against its stored row (``hash``, ``revoked_at``) in constant time; ``row``
    None (an unknown id) does the same work, so timing tells nothing."""
    if row is None:
        hmac.compare_digest(hash_key(key), "0" * 64)
        return False
    return hmac.compare_digest(hash_key(key), row["hash"]) and not row["revoked_at"]


def key_id(key: str) -> str | None:
    """The id part of a well-formed key, else None."""
    if not key.startswith(PREFIX):
        return None
    kid, sep, secret = key[len(PREFIX):].partition("_")
    if not sep or len(kid) != 12 or not secret:
        return None
    return kid


class KeyTable:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog  # ``api_keys`` is created by the catalog's migrations

    @staticmethod
    def _row(row: sqlite3.Row) -> KeyRecord:
        return KeyRecord(row["id"], row["role"], row["tenant"], row["name"], row["created_at"],
                         row["last_used_at"], row["revoked_at"])

    def create(self, role: str, tenant: str, name: str) -> tuple[KeyRecord, str]:
        """A new key: its record and the key itself (shown once, never stored)."""
        kid = secrets.token_hex(6)
        key = f"{PREFIX}{kid}_{secrets.token_urlsafe(32)}"
        with self.catalog.tx() as db:
            db.execute("INSERT INTO api_keys (id, hash, role, tenant, name, created_at) "
                       "VALUES (?,?,?,?,?,?)", (kid, hash_key(key), role, tenant, name, now_iso()))
        rec = self.get(kid)
        assert rec is not None
        return rec, key

    def get(self, kid: str) -> KeyRecord | None:
        row = self.catalog.read().execute("SELECT * FROM api_keys WHERE id=?", (kid,)).fetchone()
        return self._row(row) if row else None

    def verify(self, key: str) -> KeyRecord | None:
        """The record of a valid, unrevoked key; None otherwise (constant-time compare)."""
        kid = key_id(key)
        if kid is None:
            return None
        row = self.catalog.read().execute(
            "SELECT * FROM api_keys WHERE id=?", (kid,)).fetchone()
        return self._row(row) if matches(key, row) else None

    def touch(self, kid: str) -> None:
        with self.catalog.tx() as db:
            db.execute("UPDATE api_keys SET last_used_at=? WHERE id=?", (now_iso(), kid))

    def list(self, tenant: str | None = None) -> list[KeyRecord]:
        sql, args = "SELECT * FROM api_keys", tuple[str, ...]()
        if tenant is not None:
            sql, args = sql + " WHERE tenant=?", (tenant,)
        rows = self.catalog.read().execute(sql + " ORDER BY created_at, id", args)
        return [self._row(r) for r in rows]

    def revoke(self, kid: str) -> KeyRecord | None:
        with self.catalog.tx() as db:
            db.execute("UPDATE api_keys SET revoked_at=? WHERE id=? AND revoked_at IS NULL",
                       (now_iso(), kid))
        return self.get(kid)

    def any_admin(self) -> bool:
        row = self.catalog.read().execute(
            "SELECT 1 FROM api_keys WHERE role='admin' AND revoked_at IS NULL LIMIT 1").fetchone()
        return row is not None

    def count(self) -> int:
        row = self.catalog.read().execute("SELECT COUNT(*) FROM api_keys").fetchone()
        return int(row[0])
