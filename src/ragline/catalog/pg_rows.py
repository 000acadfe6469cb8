"""Every row of the PostgreSQL catalog as JSON, and back (``ragline backup``/``restore``
with ``catalog = "postgres"``; the service: :mod:`ragline.services.admin.catalog_backup`).

:meth:`PgCatalogRows.dump` reads the tables of
:data:`ragline.catalog.schema_version.TABLES` in one ``REPEATABLE READ`` read-only
transaction, so the rows agree with each other even while other processes write.
Left out: ``schema_version`` (the backup records the number), ``job_inputs`` (bytes
of jobs not finished; such jobs are restored as failed) and ``retired_shards``
(shards of the old store, which a restore does not bring back).

:meth:`PgCatalogRows.load` writes rows back in one transaction, into a catalog with
none: only the columns the table has now (a backup from an older schema gets the
defaults of the columns added since), ``ingest_sources`` moved to the shard each
collection has after the restore, and unfinished jobs marked failed. Collections
themselves are not loaded here: the restore creates them with their documents
(:mod:`ragline.services.admin.transfer`), which gives them their new shards.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from psycopg import IsolationLevel, sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from ragline.catalog.pg_pool import connection
from ragline.catalog.schema_version import TABLES

SKIPPED = ("schema_version", "job_inputs", "retired_shards")
DUMPED = tuple(t for t in TABLES if t not in SKIPPED)
LOADED = ("api_keys", "connections", "conversations", "conversation_messages",
          "ingest_sources", "jobs", "webhook_deliveries")
"""Tables written back by :meth:`PgCatalogRows.load`, parents before children."""
UNFINISHED = "not finished when the backup was taken"


def _plain(value: Any) -> Any:
    """A column value as JSON can carry it (timestamps as ISO text)."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    return value


class PgCatalogRows:
    def __init__(self, pool: ConnectionPool[Any], schema: str) -> None:
        self.pool = pool
        self.schema = schema

    def _t(self, table: str) -> sql.Identifier:
        return sql.Identifier(self.schema, table)

    def dump(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        with connection(self.pool) as conn:
            conn.isolation_level = IsolationLevel.REPEATABLE_READ
            conn.read_only = True
            try:
                with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
                    for table in DUMPED:
                        rows = cur.execute(sql.SQL("SELECT * FROM {} ORDER BY 1").format(
                            self._t(table))).fetchall()
                        out[table] = [{k: _plain(v) for k, v in r.items()} for r in rows]
            finally:  # the connection goes back to the pool as it came
                conn.isolation_level = None
                conn.read_only = None
        return out

    def is_empty(self) -> bool:
        """Whether no table a restore writes (nor ``collections``) has a row."""
        with connection(self.pool) as conn:
            for table in ("collections", *LOADED):
                row = conn.execute(sql.SQL("SELECT 1 FROM {} LIMIT 1").format(
                    self._t(table))).fetchone()
                if row is not None:
                    return False
        return True

    def _columns(self, conn: Any) -> dict[str, dict[str, str]]:
        """table -> column -> data type, as the database has them now."""
        rows = conn.execute("SELECT table_name, column_name, data_type FROM "
                            "information_schema.columns WHERE table_schema = %s",
                            (self.schema,)).fetchall()
        out: dict[str, dict[str, str]] = {}
        for table, column, kind in rows:
            out.setdefault(table, {})[column] = kind
        return out

    def load(self, rows: dict[str, list[dict[str, Any]]],
             shards: dict[str, str]) -> dict[str, int]:
        """Write ``rows`` back; ``shards`` maps a dumped shard to the shard of the same
        collection now (``ingest_sources`` rows of other shards are dropped: their
        collection was not restored, or they described an older generation)."""
        counts: dict[str, int] = {}
        with connection(self.pool) as conn, conn.transaction():
            columns = self._columns(conn)
            for table in LOADED:
                have = columns[table]
                n = 0
                for given in rows.get(table, []):
                    row = self._adapt(table, dict(given), shards)
                    if row is None:
                        continue
                    names = [c for c in row if c in have]
                    conn.execute(sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
                        self._t(table), sql.SQL(", ").join(map(sql.Identifier, names)),
                        sql.SQL(", ").join(sql.Placeholder() * len(names))),
                        [Jsonb(row[c]) if have[c] == "jsonb" else row[c] for c in names])
                    n += 1
                counts[table] = n
        return counts

    @staticmethod
    def _adapt(table: str, row: dict[str, Any],
               shards: dict[str, str]) -> dict[str, Any] | None:
        if table == "ingest_sources":
            if row.get("shard") not in shards:
                return None
            row["shard"] = shards[row["shard"]]
        elif table == "jobs" and row.get("status") in ("queued", "running"):
            row.update(status="failed", error=UNFINISHED, worker=None, lease_until=None)
        return row
