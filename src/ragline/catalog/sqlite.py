"""SQLite catalog of collections.

One database file in the data directory, WAL mode, one connection per thread.
Opening it creates or migrates every table of the catalog to the schema version
shared with the PostgreSQL catalog (:mod:`ragline.catalog.sqlite_schema`), and
refuses a database written by a newer ragline.
A collection row points at its current shard key; replacing that pointer in
one transaction is how a collection is emptied atomically.

Collection rows are cached in memory, because every search reads one: a SQLite
read on the event loop releases the GIL, and under load getting it back means
waiting for whichever worker holds it (measured: 16 % of the server's samples
sat in this lookup). Every write transaction clears the cache, and a read that
raced a write does not store its row (a generation counter). The data directory
belongs to one process (the Edge shards cannot be shared either), so writes by
another process are not watched for.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ragline.core.types import CollectionInfo
from ragline.errors import CollectionExists, CollectionNotFound


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


class Catalog:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._write = threading.Lock()
        self._cache: dict[str, CollectionInfo] = {}
        self._generation = 0  # bumped by every committed write transaction
        self._cache_lock = threading.Lock()
        from ragline.catalog import sqlite_schema

        try:
            with self.tx() as db:  # every table, at the shared version, in one transaction
                self.schema_version = sqlite_schema.migrate(db)
        except BaseException:
            self.close()
            raise

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None,
                                   check_same_thread=False)
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            self._local.conn = conn
        return conn

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (serialised in-process; SQLite serialises across processes)."""
        with self._write:
            db = self._conn()
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
            with self._cache_lock:  # a read that began before the commit must not cache
                self._generation += 1
                self._cache.clear()

    def read(self) -> sqlite3.Connection:
        return self._conn()

    @contextmanager
    def frozen(self) -> Iterator[None]:
        """Hold off every write transaction of this process (reads go on): a backup
        copies the catalog and the shards inside one of these so they agree."""
        with self._write:
            yield

    def backup_to(self, dest: Path) -> None:
        """A consistent copy of the database via SQLite's online backup API (WAL included)."""
        target = sqlite3.connect(dest)
        try:
            self._conn().backup(target)
        finally:
            target.close()

    # -- collections ---------------------------------------------------------------
    @staticmethod
    def _info(row: sqlite3.Row) -> CollectionInfo:
        return CollectionInfo(
            name=row["name"], metadata=json.loads(row["metadata"]), dimension=row["dimension"],
            embedding_provider=row["embedding_provider"], embedding_model=row["embedding_model"],
            created_at=row["created_at"], updated_at=row["updated_at"], shard=row["shard"],
        )

    def create_collection(
        self, name: str, metadata: dict[str, Any], shard: str, dimension: int | None,
        embedding_provider: str | None, embedding_model: str | None,
    ) -> CollectionInfo:
        ts = now_iso()
        try:
            with self.tx() as db:
                db.execute(
                    "INSERT INTO collections VALUES (?,?,?,?,?,?,?,?)",
                    (name, json.dumps(metadata), dimension, embedding_provider,
                     embedding_model, shard, ts, ts),
                )
        except sqlite3.IntegrityError:
            raise CollectionExists(f"Collection '{name}' already exists") from None
        return self.get_collection(name)

    def find_collection(self, name: str) -> CollectionInfo | None:
        info = self._cache.get(name)
        if info is not None:
            return info
        generation = self._generation
        row = self.read().execute("SELECT * FROM collections WHERE name=?", (name,)).fetchone()
        if row is None:
            return None
        info = self._info(row)
        with self._cache_lock:
            if generation == self._generation:  # no write committed since the read began
                self._cache[name] = info
        return info

    def get_collection(self, name: str, *, message: str | None = None) -> CollectionInfo:
        info = self.find_collection(name)
        if info is None:
            raise CollectionNotFound(name, message=message)
        return info

    def list_collections(self) -> list[CollectionInfo]:
        rows = self.read().execute("SELECT * FROM collections ORDER BY name").fetchall()
        return [self._info(r) for r in rows]

    def set_metadata(self, name: str, metadata: dict[str, Any]) -> CollectionInfo:
        with self.tx() as db:
            cur = db.execute("UPDATE collections SET metadata=?, updated_at=? WHERE name=?",
                             (json.dumps(metadata), now_iso(), name))
            if cur.rowcount == 0:
                raise CollectionNotFound(name)
        return self.get_collection(name)

    def set_dimension(self, name: str, dimension: int) -> None:
        with self.tx() as db:
            db.execute("UPDATE collections SET dimension=?, updated_at=? WHERE name=? "
                       "AND dimension IS NULL", (dimension, now_iso(), name))

    def swap_shard(self, name: str, old: str, new: str) -> None:
        """Point a collection at a new shard and retire the old one, in one transaction."""
        with self.tx() as db:
            cur = db.execute("UPDATE collections SET shard=?, updated_at=? WHERE name=? "
                             "AND shard=?", (new, now_iso(), name, old))
            if cur.rowcount == 0:
                raise CollectionNotFound(name)
            db.execute("INSERT OR REPLACE INTO retired_shards VALUES (?,?)", (old, now_iso()))

    def delete_collection(self, name: str) -> CollectionInfo:
        with self.tx() as db:
            row = db.execute("SELECT * FROM collections WHERE name=?", (name,)).fetchone()
            if row is None:
                raise CollectionNotFound(name)
            db.execute("DELETE FROM collections WHERE name=?", (name,))
            db.execute("INSERT OR REPLACE INTO retired_shards VALUES (?,?)",
                       (row["shard"], now_iso()))
        return self._info(row)

    def retired_shards(self) -> list[str]:
        return [r[0] for r in self.read().execute("SELECT shard FROM retired_shards")]

    def forget_retired(self, shard: str) -> None:
        with self.tx() as db:
            db.execute("DELETE FROM retired_shards WHERE shard=?", (shard,))

    def live_shards(self) -> set[str]:
        return {r[0] for r in self.read().execute("SELECT shard FROM collections")}

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
