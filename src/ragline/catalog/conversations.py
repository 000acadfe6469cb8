"""Conversations and their messages, in the catalog's SQLite database, per tenant.

Two tables beside ``collections``:

* ``conversations`` — id, owning tenant, the collection it talks about and the
  accumulated ``topic`` (spec 000's ``currentTopic``, used as the search query
  of follow-up turns);
* ``conversation_messages`` — the turns in order (``seq``), with per-message
  JSON ``meta`` (sources, strategy, path, tool, timings of assistant turns).

Every read and write takes the tenant: a conversation of another tenant is
"not found", exactly like one that does not exist, so ids leak nothing.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from dataclasses import dataclass, field
from typing import Any

from ragline.catalog.sqlite import Catalog, now_iso
from ragline.errors import NotFound


@dataclass
class Message:
    role: str
    content: str
    meta: dict[str, Any] = field(default_factory=dict)
    created_at: str = ""


@dataclass
class Conversation:
    id: str
    tenant: str
    collection: str | None
    topic: str
    created_at: str
    updated_at: str
    messages: list[Message] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "collection": self.collection, "topic": self.topic,
                "created_at": self.created_at, "updated_at": self.updated_at,
                "messages": [{"role": m.role, "content": m.content, **m.meta,
                              "created_at": m.created_at} for m in self.messages]}


def _not_found(conversation_id: str) -> NotFound:
    return NotFound(f"Conversation '{conversation_id}' not found")


class ConversationTable:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog  # both tables are created by the catalog's migrations

    def create(self, tenant: str, collection: str | None) -> Conversation:
        cid = uuid.uuid4().hex
        ts = now_iso()
        with self.catalog.tx() as db:
            db.execute("INSERT INTO conversations VALUES (?,?,?,?,?,?)",
                       (cid, tenant, collection, "", ts, ts))
        return Conversation(cid, tenant, collection, "", ts, ts)

    def _head(self, tenant: str, conversation_id: str) -> sqlite3.Row:
        row: sqlite3.Row | None = self.catalog.read().execute(
            "SELECT * FROM conversations WHERE id=? AND tenant=?",
            (conversation_id, tenant)).fetchone()
        if row is None:
            raise _not_found(conversation_id)
        return row

    def get(self, tenant: str, conversation_id: str, *, with_messages: bool = True,
            last: int | None = None) -> Conversation:
        row = self._head(tenant, conversation_id)
        conv = Conversation(row["id"], row["tenant"], row["collection"], row["topic"],
                            row["created_at"], row["updated_at"])
        if with_messages:
            sql = "SELECT * FROM conversation_messages WHERE conversation_id=? ORDER BY seq"
            rows = self.catalog.read().execute(sql, (conversation_id,)).fetchall()
            if last is not None:
                rows = rows[-last:] if last else []
            conv.messages = [Message(r["role"], r["content"], json.loads(r["meta"]),
                                     r["created_at"]) for r in rows]
        return conv

    def append(self, tenant: str, conversation_id: str, messages: list[Message],
               topic: str | None = None) -> None:
        """Add messages (and set the topic) in one transaction."""
        ts = now_iso()
        with self.catalog.tx() as db:
            cur = db.execute("UPDATE conversations SET updated_at=?, topic=COALESCE(?, topic) "
                             "WHERE id=? AND tenant=?", (ts, topic, conversation_id, tenant))
            if cur.rowcount == 0:
                raise _not_found(conversation_id)
            seq = db.execute("SELECT COALESCE(MAX(seq), 0) FROM conversation_messages "
                             "WHERE conversation_id=?", (conversation_id,)).fetchone()[0]
            for i, m in enumerate(messages, start=1):
                db.execute("INSERT INTO conversation_messages VALUES (?,?,?,?,?,?)",
                           (conversation_id, seq + i, m.role, m.content,
                            json.dumps(m.meta, default=str), ts))

    def delete(self, tenant: str, conversation_id: str) -> None:
        with self.catalog.tx() as db:
            cur = db.execute("DELETE FROM conversations WHERE id=? AND tenant=?",
                             (conversation_id, tenant))
            if cur.rowcount == 0:
                raise _not_found(conversation_id)
