"""Opening the catalog the settings name: SQLite in the data directory, or PostgreSQL.

``catalog = "sqlite"`` (the default) is the embedded catalog: one file, one
process, jobs run in that process. ``catalog = "postgres"`` puts every table in
one PostgreSQL schema (migrated on open, under an advisory lock) that any number
of API processes and ``ragline worker`` processes share, with the job queue in
the same database. Either way the services get the same protocols
(:mod:`ragline.catalog.tables`), over the same tables at the same schema version
(:mod:`ragline.catalog.schema_version`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ragline.catalog.connections import ConnectionTable
from ragline.catalog.conversations import ConversationTable
from ragline.catalog.deliveries import Deliveries
from ragline.catalog.ingest_state import IngestState, JobTable
from ragline.catalog.keys import KeyTable
from ragline.catalog.sqlite import Catalog
from ragline.catalog.tables import (
    CatalogRows,
    CollectionCatalog,
    ConnectionRows,
    ConversationRows,
    DeliveryRows,
    JobRows,
    KeyRows,
    SourceStates,
)
from ragline.errors import CatalogUnavailable, ConfigError
from ragline.settings import Settings

if TYPE_CHECKING:
    from ragline.catalog.pg_queue import JobQueue


@dataclass
class CatalogTables:
    """Everything the services keep outside the vector store."""

    collections: CollectionCatalog
    sources: SourceStates
    jobs: JobRows
    keys: KeyRows
    conversations: ConversationRows
    deliveries: DeliveryRows
    connections: ConnectionRows
    close: Callable[[], None]
    backend: str  # "sqlite" or "postgres"
    schema_version: int  # what the database is at after migrating (schema_version.py)
    sqlite: Catalog | None = None  # the embedded catalog (backups copy it); None if shared
    queue: JobQueue | None = None  # the shared job queue; None: jobs run in-process
    rows: CatalogRows | None = None  # a shared catalog's rows as JSON (backup, restore)


def open_catalog(settings: Settings) -> CatalogTables:
    if settings.catalog == "postgres":
        return _open_postgres(settings)
    catalog = Catalog(settings.catalog_path())
    return CatalogTables(
        collections=catalog, sources=IngestState(catalog),
        jobs=JobTable(catalog, settings.data_dir / "uploads"), keys=KeyTable(catalog),
        conversations=ConversationTable(catalog), deliveries=Deliveries(catalog),
        connections=ConnectionTable(catalog), close=catalog.close, backend="sqlite",
        schema_version=catalog.schema_version, sqlite=catalog)


def _open_postgres(settings: Settings) -> CatalogTables:
    try:
        import psycopg
        from psycopg_pool import ConnectionPool

        from ragline.catalog.pg_access import (
            PgConnectionTable,
            PgConversationTable,
            PgDeliveries,
            PgKeyTable,
        )
        from ragline.catalog.pg_catalog import PgCatalog
        from ragline.catalog.pg_ingest import PgIngestState, PgJobTable
        from ragline.catalog.pg_queue import JobQueue
        from ragline.catalog.pg_rows import PgCatalogRows
    except ImportError as exc:
        raise ConfigError("catalog 'postgres' needs the postgres extra: "
                          "pip install 'ragline[postgres]'") from exc
    o = settings.catalog_options
    assert o.dsn is not None  # Settings refuses catalog 'postgres' without one
    dsn = o.dsn.get_secret_value()
    pool: ConnectionPool = ConnectionPool(dsn, min_size=1, max_size=o.pool_size, open=False,
                                          name="ragline-catalog")
    try:
        catalog = PgCatalog(dsn, o.db_schema, pool=pool)  # migrates before the pool opens
        pool.open(wait=True, timeout=30)
    except (psycopg.Error, TimeoutError) as exc:  # the DSN stays out of the message
        pool.close()
        raise CatalogUnavailable("the PostgreSQL catalog could not be reached or migrated "
                                 f"({type(exc).__name__})") from None
    except BaseException:
        pool.close()
        raise
    queue = JobQueue(pool, o.db_schema, lease_s=o.job_lease_s)
    return CatalogTables(
        collections=catalog, sources=PgIngestState(pool, o.db_schema, dsn),
        jobs=PgJobTable(queue, o.db_schema, o.job_max_attempts),
        keys=PgKeyTable(pool, o.db_schema), conversations=PgConversationTable(pool, o.db_schema),
        deliveries=PgDeliveries(pool, o.db_schema),
        connections=PgConnectionTable(pool, o.db_schema), close=pool.close,
        backend="postgres", schema_version=catalog.schema_version, queue=queue,
        rows=PgCatalogRows(pool, o.db_schema))
