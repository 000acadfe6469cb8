"""API keys, conversations and webhook deliveries in PostgreSQL.

The same tables and rules as their SQLite twins (``keys.py``,
``conversations.py``, ``deliveries.py``; read those for the why), so every API
process sees a key the moment another created it, and a conversation can
continue on whichever process the next request lands.
"""

from __future__ import annotations

import json
import secrets
import time
import uuid
from typing import Any

from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from ragline.catalog.connections import StoredConnection
from ragline.catalog.conversations import Conversation, Message
from ragline.catalog.keys import PREFIX, KeyRecord, hash_key, key_id, matches
from ragline.catalog.pg_pool import connection
from ragline.catalog.sqlite import now_iso
from ragline.errors import ConnectionExists, NotFound


class _Tables:
    def __init__(self, pool: ConnectionPool[Any], schema: str, *names: str) -> None:
        self.pool = pool
        self.t = {n: sql.Identifier(schema, n) for n in names}

    def _rows(self, stmt: str, params: Any = (), **tables: str) -> list[dict[str, Any]]:
        with connection(self.pool) as conn, conn.cursor(row_factory=dict_row) as cur:
            rows: list[dict[str, Any]] = cur.execute(
                sql.SQL(stmt).format(**{k: self.t[v] for k, v in tables.items()}),
                params).fetchall()
        return rows

    def _exec(self, stmt: str, params: Any = (), **tables: str) -> int:
        with connection(self.pool) as conn:
            cur = conn.execute(sql.SQL(stmt).format(**{k: self.t[v] for k, v in tables.items()}),
                               params)
            return int(cur.rowcount)


class PgKeyTable(_Tables):
    def __init__(self, pool: ConnectionPool[Any], schema: str) -> None:
        super().__init__(pool, schema, "api_keys")

    @staticmethod
    def _rec(row: dict[str, Any]) -> KeyRecord:
        return KeyRecord(row["id"], row["role"], row["tenant"], row["name"], row["created_at"],
                         row["last_used_at"], row["revoked_at"])

    def create(self, role: str, tenant: str, name: str) -> tuple[KeyRecord, str]:
        kid = secrets.token_hex(6)
        key = f"{PREFIX}{kid}_{secrets.token_urlsafe(32)}"
        self._exec("INSERT INTO {k} (id, hash, role, tenant, name, created_at) VALUES "
                   "(%s, %s, %s, %s, %s, %s)", (kid, hash_key(key), role, tenant, name,
                                                now_iso()), k="api_keys")
        rec = self.get(kid)
        assert rec is not None
        return rec, key

    def _row(self, kid: str) -> dict[str, Any] | None:
        rows = self._rows("SELECT * FROM {k} WHERE id = %s", (kid,), k="api_keys")
        return rows[0] if rows else None

    def get(self, kid: str) -> KeyRecord | None:
        row = self._row(kid)
        return self._rec(row) if row else None

    def verify(self, key: str) -> KeyRecord | None:
        kid = key_id(key)
        if kid is None:
            return None
        row = self._row(kid)
        return self._rec(row) if row is not None and matches(key, row) else None

    def touch(self, kid: str) -> None:
        self._exec("UPDATE {k} SET last_used_at = %s WHERE id = %s", (now_iso(), kid),
                   k="api_keys")

    def list(self, tenant: str | None = None) -> list[KeyRecord]:
        if tenant is None:
            rows = self._rows("SELECT * FROM {k} ORDER BY created_at, id", k="api_keys")
        else:
            rows = self._rows("SELECT * FROM {k} WHERE tenant = %s ORDER BY created_at, id",
                              (tenant,), k="api_keys")
        return [self._rec(r) for r in rows]

    def revoke(self, kid: str) -> KeyRecord | None:
        self._exec("UPDATE {k} SET revoked_at = %s WHERE id = %s AND revoked_at IS NULL",
                   (now_iso(), kid), k="api_keys")
        return self.get(kid)

    def count(self) -> int:
        return int(self._rows("SELECT count(*) AS n FROM {k}", k="api_keys")[0]["n"])


def _not_found(conversation_id: str) -> NotFound:
    return NotFound(f"Conversation '{conversation_id}' not found")


class PgConversationTable(_Tables):
    def __init__(self, pool: ConnectionPool[Any], schema: str) -> None:
        super().__init__(pool, schema, "conversations", "conversation_messages")

    def create(self, tenant: str, collection: str | None) -> Conversation:
        cid = uuid.uuid4().hex
        ts = now_iso()
        self._exec("INSERT INTO {c} VALUES (%s, %s, %s, '', %s, %s)",
                   (cid, tenant, collection, ts, ts), c="conversations")
        return Conversation(cid, tenant, collection, "", ts, ts)

    def get(self, tenant: str, conversation_id: str, *, with_messages: bool = True,
            last: int | None = None) -> Conversation:
        heads = self._rows("SELECT * FROM {c} WHERE id = %s AND tenant = %s",
                           (conversation_id, tenant), c="conversations")
        if not heads:
            raise _not_found(conversation_id)
        h = heads[0]
        conv = Conversation(h["id"], h["tenant"], h["collection"], h["topic"], h["created_at"],
                            h["updated_at"])
        if with_messages:
            rows = self._rows("SELECT * FROM {m} WHERE conversation_id = %s ORDER BY seq",
                              (conversation_id,), m="conversation_messages")
            if last is not None:
                rows = rows[-last:] if last else []
            conv.messages = [Message(r["role"], r["content"], dict(r["meta"]), r["created_at"])
                             for r in rows]
        return conv

    def append(self, tenant: str, conversation_id: str, messages: list[Message],
               topic: str | None = None) -> None:
        """Add messages (and set the topic) in one transaction; the head row's lock
        orders two processes appending to one conversation."""
        ts = now_iso()
        c, m = self.t["conversations"], self.t["conversation_messages"]
        with connection(self.pool) as conn, conn.transaction():
            cur = conn.execute(sql.SQL("UPDATE {} SET updated_at = %s, topic = COALESCE(%s, "
                                       "topic) WHERE id = %s AND tenant = %s").format(c),
                               (ts, topic, conversation_id, tenant))
            if cur.rowcount == 0:
                raise _not_found(conversation_id)
            row = conn.execute(sql.SQL("SELECT COALESCE(MAX(seq), 0) FROM {} "
                                       "WHERE conversation_id = %s").format(m),
                               (conversation_id,)).fetchone()
            seq = int(row[0]) if row else 0
            for i, msg in enumerate(messages, start=1):
                conn.execute(sql.SQL("INSERT INTO {} VALUES (%s, %s, %s, %s, %s, %s)").format(m),
                             (conversation_id, seq + i, msg.role, msg.content,
                              Jsonb(json.loads(json.dumps(msg.meta, default=str))), ts))

    def delete(self, tenant: str, conversation_id: str) -> None:
        if self._exec("DELETE FROM {c} WHERE id = %s AND tenant = %s",
                      (conversation_id, tenant), c="conversations") == 0:
            raise _not_found(conversation_id)


class PgDeliveries(_Tables):
    def __init__(self, pool: ConnectionPool[Any], schema: str) -> None:
        super().__init__(pool, schema, "webhook_deliveries")

    def first_time(self, delivery_id: str, window_s: float) -> bool:
        """Record ``delivery_id``; False if any process saw it within the window."""
        now = time.time()
        self._exec("DELETE FROM {d} WHERE received_at < %s", (now - window_s,),
                   d="webhook_deliveries")
        return self._exec("INSERT INTO {d} VALUES (%s, %s) ON CONFLICT DO NOTHING",
                          (delivery_id, now), d="webhook_deliveries") == 1

    def forget(self, delivery_id: str) -> None:
        self._exec("DELETE FROM {d} WHERE delivery_id = %s", (delivery_id,),
                   d="webhook_deliveries")


class PgConnectionTable(_Tables):
    """Named connections (``connections.py``): secrets in a column of their own."""

    def __init__(self, pool: ConnectionPool[Any], schema: str) -> None:
        super().__init__(pool, schema, "connections")

    @staticmethod
    def _conn(row: dict[str, Any]) -> StoredConnection:
        return StoredConnection(row["id"], row["kind"], row["provider"], dict(row["options"]),
                                dict(row["secrets"]), row["created_at"])

    def add(self, cid: str, kind: str, provider: str, options: dict[str, Any],
            secrets: dict[str, Any]) -> StoredConnection:
        if self._exec("INSERT INTO {c} VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                      (cid, kind, provider, Jsonb(options), Jsonb(secrets), now_iso()),
                      c="connections") == 0:
            raise ConnectionExists(f"Connection '{cid}' already exists")
        found = self.get(cid)
        assert found is not None
        return found

    def get(self, cid: str) -> StoredConnection | None:
        rows = self._rows("SELECT * FROM {c} WHERE id = %s", (cid,), c="connections")
        return self._conn(rows[0]) if rows else None

    def all(self) -> list[StoredConnection]:
        return [self._conn(r) for r in self._rows("SELECT * FROM {c} ORDER BY id",
                                                  c="connections")]

    def delete(self, cid: str) -> bool:
        return self._exec("DELETE FROM {c} WHERE id = %s", (cid,), c="connections") > 0
