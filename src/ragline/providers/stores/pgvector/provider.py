"""The pgvector store: PostgreSQL with the ``vector`` extension, shared by N processes.

Design points:

* **A table per shard**, not a shard column in one table. A shard is one
  collection generation with its own dimension; pgvector's HNSW index needs a
  column of one fixed dimension (``vector(384)``), so one shared table could
  not index shards of different dimensions. A table per shard also keeps the
  catalog's pointer-swap design cheap: dropping a generation is ``DROP TABLE``
  (instant, space returned at once), not a delete of every row followed by a
  vacuum. The registry table ``ragline_shards`` records each shard's dimension
  and text-search configuration.
* Columns: ``tenant, id`` (primary key), ``text``, ``metadata jsonb`` (GIN,
  ``jsonb_path_ops``), ``embedding vector(d)`` (HNSW, cosine), and ``tsv`` — a
  stored generated ``tsvector`` of the text (GIN) for the sparse leg.
* Every statement carries ``tenant = $tenant``; filters are parametrized SQL
  (:mod:`.where_sql`). A batch upsert is one transaction: all rows or none.
* Dense searches use HNSW with ``hnsw.iterative_scan = strict_order`` so that a
  filter that rejects most of the graph's candidates still fills ``limit`` (in
  exact distance order), and ``hnsw.ef_search`` is raised to the largest limit
  of the batch (pgvector caps it at 1000). PostgreSQL's planner picks an exact
  scan itself where it is cheaper (small tables, selective filters on indexes).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

import numpy as np
import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool
from pydantic import Field, SecretStr

from ragline.core.filters import Node
from ragline.core.tenancy import TenantScope, first_by_id
from ragline.core.types import Page, Record, Scalar, ScoredRecord, StoreQuery
from ragline.errors import StoreError, StoreUnavailable
from ragline.providers.base import Health, ProviderConfig, config_schema
from ragline.providers.stores.base import scalar_sort_key
from ragline.providers.stores.pgvector import queries
from ragline.providers.stores.pgvector.where_sql import tenant_condition, tenant_where

log = logging.getLogger(__name__)

_KEY = re.compile(r"^[A-Za-z0-9_-]{1,48}$")
#: pgvector's HNSW indexes ``vector`` columns of at most 2,000 dimensions
HNSW_MAX_DIM = 2000
EF_SEARCH_MAX = 1000


class PgvectorConfig(ProviderConfig):
    dsn: SecretStr = Field(description="libpq connection string or URI of the PostgreSQL "
                           "server (holds the password: never logged or shown).")
    db_schema: str = Field("ragline", pattern=r"^[a-z_][a-z0-9_]{0,62}$",
                           description="PostgreSQL schema holding the shard tables and the "
                           "shard registry (created if missing).")
    pool_size: int = Field(8, ge=1, le=256, description="Most connections this process "
                           "opens (searches of one batch share one connection).")
    hnsw_m: int = Field(16, ge=2, le=100, description="HNSW graph degree of new shards.")
    hnsw_ef_construction: int = Field(64, ge=4, le=1000,
                                      description="HNSW build beam width of new shards.")
    ef_search: int = Field(100, ge=1, le=EF_SEARCH_MAX, description="HNSW search beam "
                           "width (raised to a query's limit when that is larger).")
    text_config: str = Field("english", pattern=r"^[a-z_][a-z0-9_]{0,62}$",
                             description="PostgreSQL text-search configuration of new "
                             "shards' full-text column (stemming and stopwords).")
    connect_timeout_s: float = Field(10.0, gt=0, description="Seconds to wait for a "
                                     "connection from the pool before failing.")


class PgvectorStore:
    name: ClassVar[str] = "pgvector"
    kind: ClassVar[str] = "store"
    Config: ClassVar[type[ProviderConfig]] = PgvectorConfig
    CAPABILITIES: ClassVar[list[str]] = [
        "collections", "search", "metadata_filtering", "hybrid", "facets", "persistence",
        "shared",
    ]

    def __init__(self, config: PgvectorConfig) -> None:
        self.config = config
        self.schema = sql.Identifier(config.db_schema)
        self.registry = sql.Identifier(config.db_schema, "ragline_shards")
        self._text_cfg: dict[str, str] = {}  # key -> text config (immutable per shard)
        self._lock = threading.Lock()
        try:
            self._bootstrap()
            self.pool = ConnectionPool(
                config.dsn.get_secret_value(), min_size=1, max_size=config.pool_size,
                timeout=config.connect_timeout_s, configure=self._configure, open=True,
                name="ragline-pgvector")
        except psycopg.Error as exc:
            raise _translate(exc) from None

    # -- connections ---------------------------------------------------------------
    def _bootstrap(self) -> None:
        """Extension, schema and registry, made once per database (serialised by an
        advisory lock: concurrent ``CREATE EXTENSION IF NOT EXISTS`` can still race)."""
        with psycopg.connect(self.config.dsn.get_secret_value(),
                             connect_timeout=int(self.config.connect_timeout_s)) as conn:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('ragline-bootstrap'))")
            if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'"
                            ).fetchone() is None:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(self.schema))
            conn.execute(sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (key text PRIMARY KEY, dimension int NOT NULL, "
                "text_config text NOT NULL, created_at timestamptz NOT NULL DEFAULT now())"
            ).format(self.registry))

    @staticmethod
    def _configure(conn: psycopg.Connection[Any]) -> None:
        from pgvector.psycopg import register_vector

        register_vector(conn)
        conn.commit()

    @contextmanager
    def _conn(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection in a transaction (committed on success); psycopg errors
        become ragline errors without connection details."""
        try:
            with self.pool.connection() as conn:
                yield conn
        except psycopg.Error as exc:
            raise _translate(exc) from None
        except TimeoutError:  # pool exhausted or server unreachable
            raise StoreUnavailable("PostgreSQL is unreachable or every connection is busy"
                                   ) from None

    def _table(self, key: str) -> sql.Identifier:
        if not _KEY.match(key):
            raise StoreError(f"bad shard key {key!r}")
        return sql.Identifier(self.config.db_schema, f"s_{key}")

    def _shard_text_config(self, key: str) -> str | None:
        cfg = self._text_cfg.get(key)
        if cfg is None:
            self._table(key)
            with self._conn() as conn:
                row = conn.execute(sql.SQL("SELECT text_config FROM {} WHERE key = %s").format(
                    self.registry), (key,)).fetchone()
            if row is None:
                return None
            cfg = self._text_cfg[key] = str(row[0])
        return cfg

    # -- shard lifecycle -------------------------------------------------------------
    def create_shard(self, key: str, dimension: int) -> None:
        table = self._table(key)
        cfg = self.config.text_config
        with self._conn() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"ragline-shard:{key}",))
            row = conn.execute(sql.SQL("SELECT dimension, text_config FROM {} WHERE key = %s"
                                       ).format(self.registry), (key,)).fetchone()
            if row is not None:
                if int(row[0]) != dimension:
                    raise StoreError(f"shard {key} has dimension {row[0]}, not {dimension}")
                return
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))  # crash leftover
            conn.execute(sql.SQL(
                "CREATE TABLE {t} (tenant text NOT NULL, id text NOT NULL, "
                "text text NOT NULL DEFAULT '', metadata jsonb NOT NULL DEFAULT '{{}}', "
                "embedding vector({dim}) NOT NULL, "
                "tsv tsvector GENERATED ALWAYS AS (to_tsvector({cfg}::regconfig, text)) STORED, "
                "PRIMARY KEY (tenant, id))"
            ).format(t=table, dim=sql.Literal(int(dimension)), cfg=sql.Literal(cfg)))
            if dimension <= HNSW_MAX_DIM:
                conn.execute(sql.SQL(
                    "CREATE INDEX ON {} USING hnsw (embedding vector_cosine_ops) "
                    "WITH (m = {}, ef_construction = {})"
                ).format(table, sql.Literal(self.config.hnsw_m),
                         sql.Literal(self.config.hnsw_ef_construction)))
            else:
                log.warning("shard %s: %d dimensions exceed HNSW's %d; searches are exact",
                            key, dimension, HNSW_MAX_DIM)
            conn.execute(sql.SQL("CREATE INDEX ON {} USING gin (tsv)").format(table))
            conn.execute(sql.SQL("CREATE INDEX ON {} USING gin (metadata jsonb_path_ops)"
                                 ).format(table))
            conn.execute(sql.SQL("INSERT INTO {} (key, dimension, text_config) "
                                 "VALUES (%s, %s, %s)").format(self.registry),
                         (key, dimension, cfg))
        self._text_cfg[key] = cfg

    def has_shard(self, key: str) -> bool:
        return self._shard_text_config(key) is not None

    def shard_keys(self) -> list[str]:
        with self._conn() as conn:
            rows = conn.execute(sql.SQL("SELECT key FROM {} ORDER BY key").format(
                self.registry)).fetchall()
        return [str(r[0]) for r in rows]

    def drop_shard(self, key: str) -> None:
        table = self._table(key)
        with self._conn() as conn:
            # DROP TABLE waits for statements in flight on the shard (ACCESS EXCLUSIVE)
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))
            conn.execute(sql.SQL("DELETE FROM {} WHERE key = %s").format(self.registry), (key,))
        self._text_cfg.pop(key, None)

    def close(self) -> None:
        self.pool.close()

    # -- writes ----------------------------------------------------------------------
    def upsert_parts(self, key: str, parts: Iterable[list[Record]]) -> None:
        self.upsert(key, [r for part in parts for r in part])  # nothing to overlap here

    def upsert(self, key: str, records: list[Record]) -> None:
        if not records:
            return
        table = self._table(key)
        rows = []
        for r in records:
            if r.embedding is None:
                raise StoreError(f"record {r.id!r} has no embedding")
            rows.append((r.tenant, r.id, r.text, Jsonb(r.metadata),
                         np.asarray(r.embedding, dtype=np.float32)))
        stmt = sql.SQL(
            "INSERT INTO {} (tenant, id, text, metadata, embedding) VALUES (%s, %s, %s, %s, %s) "
            "ON CONFLICT (tenant, id) DO UPDATE SET text = EXCLUDED.text, "
            "metadata = EXCLUDED.metadata, embedding = EXCLUDED.embedding").format(table)
        try:
            with self._conn() as conn, conn.transaction(), conn.cursor() as cur:
                cur.executemany(stmt, rows)  # one transaction: the batch is whole or absent
        except StoreError as exc:
            if exc.details.get("sqlstate") == "42P01":
                raise StoreError(f"shard {key} does not exist") from None
            raise

    def delete_ids(self, key: str, tenant: str, ids: list[str]) -> int:
        if not ids:
            return 0
        stmt = sql.SQL("DELETE FROM {} WHERE tenant = %s AND id = ANY(%s)").format(
            self._table(key))
        return self._rowcount(stmt, (tenant, list(dict.fromkeys(ids))))

    def delete_where(self, key: str, tenant: str, where: Node | None) -> int:
        cond, params = tenant_where(tenant, where)
        stmt = sql.SQL("DELETE FROM {} WHERE {}").format(self._table(key), cond)
        return self._rowcount(stmt, params)

    def _rowcount(self, stmt: sql.SQL | sql.Composed, params: Any) -> int:
        try:
            with self._conn() as conn:
                return conn.execute(stmt, params).rowcount
        except StoreError as exc:
            if _missing(exc):
                return 0
            raise

    # -- reads -----------------------------------------------------------------------
    def _fetch(self, stmt: sql.SQL | sql.Composed, params: Any) -> list[Any]:
        """Rows of a read; an unknown (or concurrently dropped) shard reads as empty."""
        try:
            with self._conn() as conn:
                return conn.execute(stmt, params).fetchall()
        except StoreError as exc:
            if _missing(exc):
                return []
            raise

    def get(
        self, key: str, tenant: TenantScope, ids: list[str], with_vectors: bool = False
    ) -> list[Record]:
        if not ids:
            return []
        cols = "id, text, metadata, tenant" + (", embedding" if with_vectors else "")
        cond, value = tenant_condition(tenant)
        rows = self._fetch(sql.SQL("SELECT " + cols + " FROM {} WHERE {} AND "
                                   "id = ANY(%(ids)s)").format(self._table(key), cond),
                           {"tenant": value, "ids": list(dict.fromkeys(ids))})
        return first_by_id((_record(r, with_vectors) for r in rows), ids, tenant)

    def count(self, key: str, tenant: TenantScope, where: Node | None) -> int:
        cond, params = tenant_where(tenant, where)
        rows = self._fetch(sql.SQL("SELECT count(*) FROM {} WHERE {}").format(
            self._table(key), cond), params)
        return int(rows[0][0]) if rows else 0

    def list_page(self, key: str, tenant: TenantScope, where: Node | None, limit: int,
                  offset: int) -> Page:
        """Id-ordered pages; the count and the page come from one snapshot."""
        cond, params = tenant_where(tenant, where)
        table = self._table(key)
        try:
            with self._conn() as conn:
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                total = int(conn.execute(sql.SQL("SELECT count(*) FROM {} WHERE {}").format(
                    table, cond), params).fetchone()[0])  # type: ignore[index]
                if limit <= 0 or offset >= total:
                    return Page([], total)
                rows = conn.execute(sql.SQL(
                    "SELECT id, text, metadata, tenant FROM {} WHERE {} ORDER BY id, tenant "
                    "LIMIT %(lim)s OFFSET %(off)s").format(table, cond),
                    {**params, "lim": limit, "off": offset}).fetchall()
        except StoreError as exc:
            if _missing(exc):
                return Page([], 0)
            raise
        return Page([_record(r, False) for r in rows], total)

    def query_batch(self, key: str, queries_: list[StoreQuery]) -> list[list[ScoredRecord]]:
        """All searches of a batch in one pipeline on one connection (one round trip)."""
        if not queries_:
            return []
        text_cfg = self._shard_text_config(key)
        if text_cfg is None:
            return [[] for _ in queries_]
        table = self._table(key)
        built = [queries.build(table, text_cfg, sq) for sq in queries_]
        ef = min(EF_SEARCH_MAX, max([self.config.ef_search] + [
            max(sq.limit, sq.candidates if sq.mode == "hybrid" else 0) for sq in queries_]))
        try:
            with self._conn() as conn:
                with conn.pipeline():
                    conn.execute("SELECT set_config('hnsw.ef_search', %s, true), "
                                 "set_config('hnsw.iterative_scan', 'strict_order', true)",
                                 (str(ef),))
                    curs = [conn.execute(b[0], b[1]) if b is not None else None for b in built]
                rows = [c.fetchall() if c is not None else [] for c in curs]
        except StoreError as exc:
            if _missing(exc):
                self._text_cfg.pop(key, None)
                return [[] for _ in queries_]
            raise
        return [[_scored(r, sq.with_vectors) for r in rs] for rs, sq in zip(rows, queries_,
                                                                             strict=True)]

    def has_text_index(self, key: str) -> bool:
        return self.has_shard(key)  # every shard has its tsvector column and GIN index

    def distinct(self, key: str, tenant: TenantScope, field: str) -> list[Scalar]:
        cond, value = tenant_condition(tenant, "t.tenant")
        rows = self._fetch(sql.SQL(
            "SELECT DISTINCT v FROM {} t, jsonb_array_elements(CASE jsonb_typeof(t.metadata -> "
            "%(f)s) WHEN 'array' THEN t.metadata -> %(f)s ELSE jsonb_build_array(t.metadata -> "
            "%(f)s) END) v WHERE {} AND t.metadata ? %(f)s "
            "AND jsonb_typeof(v) <> 'null'").format(self._table(key), cond),
            {"f": field, "tenant": value})
        values = {(type(r[0]) is bool, r[0]) for r in rows}
        return sorted((v for _, v in values), key=scalar_sort_key)

    # -- housekeeping ----------------------------------------------------------------
    def size_bytes(self, key: str) -> int:
        rows = self._fetch(sql.SQL("SELECT pg_total_relation_size(to_regclass(%s))"),
                           (f'"{self.config.db_schema}"."s_{key}"',) if _KEY.match(key)
                           else ("",))
        return int(rows[0][0] or 0) if rows else 0

    def optimize(self, key: str) -> bool:
        """``VACUUM ANALYZE`` the shard (fresh planner statistics, dead rows reclaimed);
        the HNSW index is maintained on every insert, so there is nothing to build."""
        table = self._table(key)
        if not self.has_shard(key):
            return False
        with self._conn() as conn:
            conn.autocommit = True
            try:
                conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(table))
            finally:
                conn.autocommit = False
        return True

    @classmethod
    def connection_schema(cls) -> dict[str, Any]:
        return config_schema(PgvectorConfig)

    def capabilities(self) -> list[str]:
        return list(self.CAPABILITIES)

    def health(self) -> Health:
        details: dict[str, Any] = {"engine": "pgvector", "schema": self.config.db_schema}
        try:
            with self._conn() as conn:
                row = conn.execute("SELECT current_setting('server_version'), "
                                   "(SELECT extversion FROM pg_extension WHERE extname = 'vector')"
                                   ).fetchone()
            assert row is not None
            details["collection_count"] = len(self.shard_keys())
            details.update(server_version=row[0], pgvector_version=row[1],
                           pool=self.pool.get_stats().get("pool_size"))
            return Health.now("ok", details)
        except Exception as exc:  # health reports, it does not raise
            return Health.now("down", details, error=type(exc).__name__)


def _translate(exc: psycopg.Error) -> StoreError | StoreUnavailable:
    """A ragline error that names the failure but not the server, user or password."""
    if isinstance(exc, psycopg.OperationalError):
        return StoreUnavailable("PostgreSQL is unreachable or refused the connection")
    state = getattr(exc, "sqlstate", None)
    diag = getattr(exc, "diag", None)
    primary = diag.message_primary if diag is not None else None
    return StoreError(f"PostgreSQL error {state or ''}: {primary or type(exc).__name__}".strip(),
                      details={"sqlstate": state})


def _missing(exc: StoreError) -> bool:
    return exc.details.get("sqlstate") == "42P01"  # undefined_table: no such shard


def _vector(v: Any) -> Any:
    """pgvector's Python type (or a plain array) as float32 numpy."""
    return np.asarray(v.to_numpy() if hasattr(v, "to_numpy") else v, dtype=np.float32)


def _record(r: Any, with_vectors: bool) -> Record:
    emb = _vector(r[4]) if with_vectors and len(r) > 4 else None
    return Record(r[0], r[1], r[2] or {}, emb, r[3])


def _scored(r: Any, with_vectors: bool) -> ScoredRecord:
    """A row of (score, id, text, metadata, tenant[, embedding])."""
    emb = _vector(r[5]) if with_vectors and len(r) > 5 else None
    return ScoredRecord(r[1], r[2], r[3] or {}, float(r[0]), emb, r[4])
