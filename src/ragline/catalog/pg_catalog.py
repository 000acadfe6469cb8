"""The collections catalog in PostgreSQL: what N stateless processes share.

The same surface as the SQLite :class:`~ragline.catalog.sqlite.Catalog` for
collections (create, find, list, metadata, dimension, shard swap, delete,
retired shards), on the tables of :mod:`ragline.catalog.pg_schema`, migrated on
open. No row cache: another process may swap a collection's shard at any time,
and a primary-key read is one short round trip.

Wired by :func:`ragline.catalog.backends.open_catalog` when ``catalog =
"postgres"``, beside the other PostgreSQL tables (``pg_ingest.py``, ``pg_access.py``).
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from ragline.catalog.pg_pool import connection
from ragline.catalog.pg_schema import migrate
from ragline.catalog.sqlite import now_iso
from ragline.core.types import CollectionInfo
from ragline.errors import CollectionExists, CollectionNotFound

_COLS = ("name, metadata, dimension, embedding_provider, embedding_model, shard, "
         "created_at, updated_at")


class PgCatalog:
    def __init__(self, dsn: str, schema: str = "ragline", pool_size: int = 4,
                 pool: ConnectionPool[Any] | None = None) -> None:
        """Migrates first; ``pool``: share one the caller owns (then :meth:`close` leaves
        it open)."""
        self.schema_version = migrate(dsn, schema)
        self.schema = schema
        self._owns_pool = pool is None
        self.pool: ConnectionPool[Any] = pool or ConnectionPool(
            dsn, min_size=1, max_size=pool_size, open=True, name="ragline-catalog")
        self.collections = sql.Identifier(schema, "collections")
        self.retired = sql.Identifier(schema, "retired_shards")

    @staticmethod
    def _info(row: dict[str, Any]) -> CollectionInfo:
        return CollectionInfo(
            name=row["name"], metadata=row["metadata"] or {}, dimension=row["dimension"],
            embedding_provider=row["embedding_provider"], embedding_model=row["embedding_model"],
            created_at=row["created_at"], updated_at=row["updated_at"], shard=row["shard"])

    def _one(self, stmt: sql.Composed, params: Any) -> dict[str, Any] | None:
        with connection(self.pool) as conn, conn.cursor(row_factory=dict_row) as cur:
            row: dict[str, Any] | None = cur.execute(stmt, params).fetchone()
        return row

    def create_collection(
        self, name: str, metadata: dict[str, Any], shard: str, dimension: int | None,
        embedding_provider: str | None, embedding_model: str | None,
    ) -> CollectionInfo:
        ts = now_iso()
        try:
            with connection(self.pool) as conn:
                conn.execute(sql.SQL("INSERT INTO {} (" + _COLS + ") VALUES "
                                     "(%s, %s, %s, %s, %s, %s, %s, %s)").format(self.collections),
                             (name, Jsonb(metadata), dimension, embedding_provider,
                              embedding_model, shard, ts, ts))
        except psycopg.errors.UniqueViolation:
            raise CollectionExists(f"Collection '{name}' already exists") from None
        return self.get_collection(name)

    def find_collection(self, name: str) -> CollectionInfo | None:
        row = self._one(sql.SQL("SELECT " + _COLS + " FROM {} WHERE name = %s").format(
            self.collections), (name,))
        return self._info(row) if row else None

    def get_collection(self, name: str, *, message: str | None = None) -> CollectionInfo:
        info = self.find_collection(name)
        if info is None:
            raise CollectionNotFound(name, message=message)
        return info

    def list_collections(self) -> list[CollectionInfo]:
        with connection(self.pool) as conn, conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(sql.SQL("SELECT " + _COLS + " FROM {} ORDER BY name").format(
                self.collections)).fetchall()
        return [self._info(r) for r in rows]

    def set_metadata(self, name: str, metadata: dict[str, Any]) -> CollectionInfo:
        with connection(self.pool) as conn:
            cur = conn.execute(sql.SQL("UPDATE {} SET metadata = %s, updated_at = %s "
                                       "WHERE name = %s").format(self.collections),
                               (Jsonb(metadata), now_iso(), name))
            if cur.rowcount == 0:
                raise CollectionNotFound(name)
        return self.get_collection(name)

    def set_dimension(self, name: str, dimension: int) -> None:
        with connection(self.pool) as conn:
            conn.execute(sql.SQL("UPDATE {} SET dimension = %s, updated_at = %s WHERE name = %s "
                                 "AND dimension IS NULL").format(self.collections),
                         (dimension, now_iso(), name))

    def swap_shard(self, name: str, old: str, new: str) -> None:
        """Point a collection at a new shard and retire the old one, in one transaction;
        a concurrent swap by another process makes this one a CollectionNotFound."""
        with connection(self.pool) as conn:
            cur = conn.execute(sql.SQL("UPDATE {} SET shard = %s, updated_at = %s "
                                       "WHERE name = %s AND shard = %s").format(self.collections),
                               (new, now_iso(), name, old))
            if cur.rowcount == 0:
                raise CollectionNotFound(name)
            self._retire(conn, old)

    def _retire(self, conn: psycopg.Connection[Any], shard: str) -> None:
        conn.execute(sql.SQL("INSERT INTO {} VALUES (%s, %s) ON CONFLICT (shard) DO UPDATE "
                             "SET retired_at = EXCLUDED.retired_at").format(self.retired),
                     (shard, now_iso()))

    def delete_collection(self, name: str) -> CollectionInfo:
        with connection(self.pool) as conn, conn.cursor(row_factory=dict_row) as cur:
            row = cur.execute(sql.SQL("DELETE FROM {} WHERE name = %s RETURNING " + _COLS
                                      ).format(self.collections), (name,)).fetchone()
            if row is None:
                raise CollectionNotFound(name)
            self._retire(conn, row["shard"])
        return self._info(row)

    def retired_shards(self) -> list[str]:
        with connection(self.pool) as conn:
            rows = conn.execute(sql.SQL("SELECT shard FROM {}").format(self.retired)).fetchall()
        return [r[0] for r in rows]

    def forget_retired(self, shard: str) -> None:
        with connection(self.pool) as conn:
            conn.execute(sql.SQL("DELETE FROM {} WHERE shard = %s").format(self.retired),
                         (shard,))

    def live_shards(self) -> set[str]:
        with connection(self.pool) as conn:
            rows = conn.execute(sql.SQL("SELECT shard FROM {}").format(
                self.collections)).fetchall()
        return {r[0] for r in rows}

    def close(self) -> None:
        if self._owns_pool:
            self.pool.close()
