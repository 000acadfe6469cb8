"""The ``Ragline`` facade: the only door into ragline.

The HTTP routes, the CLI, evaluation, MCP and the console call the use-case
methods below and nothing else; the store, the catalog, shard keys and job
tables are private to the services behind it. Every use case takes a
:class:`~ragline.core.principal.Principal` (who is calling) and scopes what it
reads and writes to that caller's tenant, so a tenant check cannot be skipped by
code that reaches around it.

Lifecycle: the constructor only records settings. :meth:`start` opens the
catalog and the store (built from the registry), finishes what a crash
interrupted (retired shards, orphan shards, stale ingestion state, interrupted
jobs) and loads the configured reranker; :meth:`close` stops jobs and batchers
and closes the store. ``with Ragline(settings) as rl:`` does both.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TextIO, TypeVar

from anyio.from_thread import BlockingPortal, start_blocking_portal

from ragline.catalog.backends import CatalogTables, open_catalog
from ragline.catalog.ingest_state import COUNTERS, Job
from ragline.catalog.keys import KeyRecord
from ragline.catalog.lock import DataDirLock, holder_address
from ragline.catalog.tables import CollectionCatalog, SourceStates
from ragline.catalog.text_repair import unstorable_rows
from ragline.core.principal import Principal
from ragline.core.tenancy import SHARED
from ragline.core.types import CollectionInfo, Page, Record, Scalar
from ragline.datadir import ensure_format
from ragline.errors import (
    CollectionNotFound,
    ConfigError,
    DocumentNotFound,
    InvalidInput,
    ModelNotLoaded,
    RaglineError,
    RerankError,
)
from ragline.facade_answers import AnswersMixin
from ragline.facade_routed import Borrowed, RoutedFacades, connection_settings
from ragline.ingest.loader import tree_sources
from ragline.observability.metrics import render as metrics_render
from ragline.providers.llms.base import ChatModel
from ragline.providers.registry import registry
from ragline.providers.stores.base import VectorStore
from ragline.services.access import AccessPolicy
from ragline.services.answers import AnswerServices, build_answers
from ragline.services.auth import AuthService
from ragline.services.backup import BackupService
from ragline.services.backup import restore as _restore
from ragline.services.backup import unpack_archive as _unpack_archive
from ragline.services.catalog_backup import CatalogBackupService
from ragline.services.collections import MSG_NOT_EXIST, CollectionService
from ragline.services.connections import ConnectionService
from ragline.services.context import ContextService
from ragline.services.diskspace import DiskGuard
from ragline.services.diversify import Diversity
from ragline.services.documents import DocumentInput, DocumentService
from ragline.services.embedders import EmbedderPool
from ragline.services.indexing import IndexingService
from ragline.services.ingest import IngestService
from ragline.services.ingest_stats import IngestStats, Progress
from ragline.services.ingestion import IngestionService, IngestOutcome, IngestSource
from ragline.services.jobs import JobService, job_progress
from ragline.services.operations import HealthView, OperationsService
from ragline.services.queued_jobs import QueuedJobService
from ragline.services.retrieval import BatchSettings, RetrievalService
from ragline.services.routing import Forwarded, Outgoing, RoutingService
from ragline.services.searching import SearchHit, SearchRequest, SearchResponse, SearchService
from ragline.services.slots import (
    build_reranker,
    build_store,
    check_model_name,
    configure_registry,
)
from ragline.services.sources import SourceDetail, SourceInfo, SourceService
from ragline.services.transfer import TransferService
from ragline.services.validation import InputLimits
from ragline.services.verify import Finding, VerifyReport, VerifyService
from ragline.services.webhook import WebhookService
from ragline.settings import Settings

log = logging.getLogger(__name__)

T = TypeVar("T")

NOT_STARTED = "Ragline is not started: call start() (or use it as a context manager)"
RERANKER_NOT_LOADED = "Cross-encoder not loaded. Start server with --cross-encoder flag."

__all__ = [
    "CollectionView", "DocumentInput", "Forwarded", "IngestOutcome", "IngestSource",
    "IngestStats", "Job", "KeyRecord", "Outgoing", "Principal",
    "Ragline", "SearchHit", "SearchRequest", "SearchResponse", "SourceDetail", "SourceInfo",
    "VerifyReport", "holder_address", "job_counters",
    "job_progress", "restore_backup", "tree_sources", "unpack_backup",
]


def restore_backup(src: Path, data_dir: Path) -> dict[str, Any]:
    """Copy a backup into an empty or new data directory (no server may hold it)."""
    return _restore(src, data_dir)


def unpack_backup(archive: BinaryIO, dest: Path) -> None:
    """Unpack the .tar.gz ``POST /admin/backup`` streams into the directory ``dest``."""
    _unpack_archive(archive, dest)


def job_counters(job: Job) -> dict[str, int]:
    """A job's progress counters, every one present (0 when not reached)."""
    return {k: job.counters.get(k, 0) for k in COUNTERS}


@dataclass(frozen=True)
class CollectionView:
    """A collection as a caller sees it: catalog fields plus the caller's document count."""

    name: str
    metadata: dict[str, Any]
    dimension: int | None
    embedding_provider: str | None
    embedding_model: str | None
    count: int
    created_at: str
    updated_at: str
    embed: dict[str, str | None] | None = None  # server-side embedding, when opted in


def _str_or_none(v: Any) -> str | None:
    return v if isinstance(v, str) else None


@dataclass
class Services:
    """What :meth:`Ragline.start` wires. Internal: only the facade (and tests of the
    services themselves) use it; routes, CLI, MCP and the console never do."""

    catalog: CollectionCatalog
    store: VectorStore
    embedders: EmbedderPool
    collections: CollectionService
    documents: DocumentService
    retrieval: RetrievalService
    search: SearchService
    ingest_state: SourceStates
    ingest: IngestService
    jobs: JobService
    ingestion: IngestionService
    context: ContextService
    webhook: WebhookService
    operations: OperationsService
    auth: AuthService
    backups: BackupService | None  # None with a shared catalog (PostgreSQL's own backups)
    reranker: Any | None
    indexing: IndexingService
    answers: AnswerServices
    connections: ConnectionService
    routing: RoutingService
    sources: SourceService
    verify: VerifyService
    tables: CatalogTables
    access: AccessPolicy


class Ragline(AnswersMixin):
    def __init__(self, settings: Settings | None = None, *,
                 llm: ChatModel | None = None) -> None:
        """Wiring only: nothing is opened, read or recovered until :meth:`start`.

        ``llm``: a chat-model object for library use and tests (the scripted model);
        servers configure theirs with the ``llm_*`` settings."""
        self.settings = settings or Settings()
        self._llm = llm
        self._services: Services | None = None
        self._portal_cm: Any = None
        self._portal: BlockingPortal | None = None
        self._portal_lock = threading.Lock()
        self._lock: DataDirLock | None = None
        self.address: str | None = None  # set by `ragline serve`: named to a second process
        # set on the facade of a store connection (facade_routed.py); None: this server's
        self._borrowed: Borrowed | None = None
        self._routed: RoutedFacades[Ragline] = RoutedFacades(self._connection_facade)

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> Ragline:
        """Open storage, recover from a crash, load the configured models. Idempotent."""
        if self._services is not None:
            return self
        s = self.settings
        s.apply_process_environment()
        s.data_dir.mkdir(parents=True, exist_ok=True)
        configure_registry(s)  # RAGLINE_PROVIDERS_ALLOW, before any provider is looked up
        # a shared catalog (PostgreSQL) is many processes' by design: no directory lock,
        # and the data directory holds no catalog or shards to migrate; a connection's
        # facade lives in a directory of the server's, under the server's lock
        borrowed = self._borrowed
        lock = None if s.shared_catalog or borrowed else DataDirLock(s.data_dir)
        if lock is not None:
            lock.acquire(self.address)
        try:
            if not s.shared_catalog:
                ensure_format(s.data_dir)  # migrates older layouts, refuses newer ones
            tables = open_catalog(s)
        except BaseException:
            if lock is not None:
                lock.release()
            raise
        try:
            store = borrowed.store if borrowed else build_store(s)
            if s.shared_catalog and "shared" not in store.capabilities():
                if borrowed:  # the connection's store stays open: it is not ours
                    raise ConfigError(
                        f"Connection '{borrowed.connection}' ({store.name}) cannot serve "
                        "collection requests with catalog 'postgres': the catalog is shared "
                        "by many processes and this store is not (use pgvector or qdrant)")
                store.close()
                raise ConfigError(f"catalog 'postgres' is shared by many processes; store "
                                  f"'{s.store}' is not (use pgvector or qdrant)")
        except BaseException:
            tables.close()
            if lock is not None:
                lock.release()
            raise
        try:
            self._services = self._wire(tables, store)
            # orphans: a connection's store may hold other catalogs' shards (this server's
            # own, another server's): never removed from here
            self._recover(self._services, orphans=not (s.shared_catalog or borrowed))
            if s.background_indexing:  # issue 18: index builds off the serving path
                self._services.indexing.start()
        except BaseException:
            if self._services is not None:
                self._services.retrieval.close()
                self._services = None
            if not borrowed:
                store.close()
            tables.close()
            if lock is not None:
                lock.release()
            raise
        self._lock = lock
        return self

    def _wire(self, tables: CatalogTables, store: VectorStore) -> Services:
        s = self.settings
        catalog = tables.collections
        borrowed = self._borrowed
        embedders = borrowed.embedders if borrowed else EmbedderPool(s)
        collections = CollectionService(catalog, store, embedders)
        documents = DocumentService(collections, store, s.max_documents_per_request, embedders,
                                    limits=InputLimits.from_settings(s))
        reranker = None if borrowed else build_reranker(s)  # borrowed: self._reranker
        retrieval = RetrievalService(
            collections, store, embedders, s.rrf_k, s.hybrid_candidates,
            reranker=self._reranker, fusion=s.hybrid_fusion,
            batch=BatchSettings(s.search_max_batch, s.search_max_wait_ms, s.search_workers),
            overviews=s.search_overviews, overview_window=s.search_overview_window,
            diversity=Diversity(s.search_diversity_per_source, s.search_diversity_asides,
                                s.search_diversity_window, s.search_aside_sections))
        retrieval.limits = InputLimits.from_settings(s)
        search = SearchService(s, collections, retrieval)
        state = tables.sources
        ingest = IngestService(s, collections, store, embedders, state)
        # one free-space guard for every write path: 507 before a full disk (issue 10)
        disk = DiskGuard(s.data_dir, s.disk_reserve_bytes,
                         floor=getattr(store, "reopen_bytes", None))  # shards reopen (32)
        collections.disk = documents.disk = ingest.disk = disk
        jobs = self._jobs(tables, ingest)
        indexing = IndexingService(store, s.indexing_min_points, s.indexing_growth,
                                   s.indexing_interval_s)
        ingestion = IngestionService(s, ingest, jobs, search)
        connections = ConnectionService(s, tables.connections, store)
        if not borrowed:
            embedders.connections = connections.embedder  # embed.provider may name one
        return Services(
            catalog=catalog, store=store, embedders=embedders, collections=collections,
            documents=documents, retrieval=retrieval, search=search, ingest_state=state,
            ingest=ingest, jobs=jobs, ingestion=ingestion,
            context=ContextService(collections, store, state, search),
            webhook=WebhookService(s, ingestion.submit, tables.deliveries),
            auth=AuthService(s, tables.keys),
            backups=BackupService(tables.sqlite, store) if tables.sqlite is not None else None,
            operations=OperationsService(
                s.data_dir, store, collections, embedders, retrieval, self._reranker, disk,
                indexing, catalog={"backend": tables.backend,
                                   "schema_version": tables.schema_version}),
            reranker=reranker, indexing=indexing,
            answers=build_answers(s, tables.conversations, collections, embedders, search,
                                  self._llm, connections),
            connections=connections, routing=RoutingService(connections),
            sources=SourceService(collections, store, state, documents, ingest),
            access=AccessPolicy(collections),
            verify=VerifyService(collections, store, state),
            tables=tables)

    def _jobs(self, tables: CatalogTables, ingest: IngestService) -> JobService:
        """In-process jobs on the embedded catalog; the shared queue on PostgreSQL."""
        if tables.queue is None:
            return JobService(tables.jobs, ingest, self.settings.job_workers)
        from ragline.catalog.pg_ingest import PgJobTable

        assert isinstance(tables.jobs, PgJobTable)
        return QueuedJobService(tables.jobs, tables.queue, ingest,
                                self.settings.catalog_options.worker_poll_s)

    def _reranker(self) -> Any | None:
        """The loaded reranker, read at use (a getter, so services see a replacement);
        a connection's facade uses the server's."""
        if self._borrowed is not None:
            return self._borrowed.reranker()
        return self._services.reranker if self._services is not None else None

    def _connection_facade(self, cid: str) -> Ragline:
        """The (unstarted) facade serving store connection ``cid``: facade_routed.py."""
        sv = self.services
        provider = sv.connections.get(cid).provider
        facade = Ragline(connection_settings(self.settings, cid, provider), llm=self._llm)
        facade._borrowed = Borrowed(cid, sv.connections.instance(cid), sv.embedders,
                                    self._reranker)
        return facade

    @staticmethod
    def _recover(sv: Services, orphans: bool = True) -> None:
        """``orphans``: also remove shards and ingestion state no collection points at.
        Only the embedded catalog's single owner may: with a shared catalog, another
        process's rebuild in progress looks exactly like an orphan."""
        sv.collections.recover(orphans=orphans)
        if orphans:
            sv.ingest_state.purge_stale({c.name: c.shard for c in sv.collections.all()})
        sv.jobs.start()

    def settle_pending(self) -> int:
        """Settle sources a crash left ``pending`` (``ragline serve`` does at start; issue
        32): their chunks removed, their rows dropped. Only the embedded catalog's owner
        may (with a shared catalog another process's write looks the same); ``ragline
        verify`` does not, so it still reports them. Returns how many."""
        s = self.settings
        if s.shared_catalog or self._borrowed is not None:
            return 0
        return self.services.verify.settle_pending()

    def close(self) -> None:
        """Stop jobs (running ones stop at their next checkpoint), batchers and storage."""
        sv, self._services = self._services, None
        with self._portal_lock:
            if self._portal_cm is not None:
                self._portal_cm.__exit__(None, None, None)
                self._portal_cm = self._portal = None
        if sv is None:
            return
        try:
            self._routed.close()  # before the connections: their stores are closed there
            sv.indexing.stop()  # an unfinished build is abandoned; its copy is removed
            sv.jobs.close()
            sv.ingest.fetcher.close()
            sv.routing.close()
            sv.connections.close()
            sv.retrieval.close()
            if self._borrowed is None:  # a connection's store is closed with the connection
                sv.store.close()
            sv.tables.close()
        finally:
            if self._lock is not None:
                self._lock.release()
                self._lock = None

    def __enter__(self) -> Ragline:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def started(self) -> bool:
        return self._services is not None

    @property
    def services(self) -> Services:
        """Internal wiring, for the services' own tests; not for routes, CLI or MCP."""
        if self._services is None:
            raise RuntimeError(NOT_STARTED)
        return self._services

    @property
    def tenant(self) -> str:
        """The default tenant (the only one until API keys assign others)."""
        return self.settings.default_tenant

    def owner(self) -> Principal:
        """The principal of the CLI and library callers: the data directory's owner."""
        return Principal.owner(self.settings.default_tenant)

    def call_sync(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run an async use case from synchronous code (CLI, evaluation, library) on the
        facade's own event loop, so sync and async callers share one pipeline."""
        with self._portal_lock:
            if self._portal is None:
                self._portal_cm = start_blocking_portal()
                self._portal = self._portal_cm.__enter__()
            portal = self._portal
        return portal.call(fn, *args)

    # -- access rules: one policy (services/access.py) -------------------------------------
    @property
    def access(self) -> AccessPolicy:
        """Who may read or change which record or collection: every use case asks it."""
        return self.services.access

    def _view(self, info: CollectionInfo, caller: Principal) -> CollectionView:
        meta = info.metadata
        embed = ({"provider": info.embedding_provider, "model": info.embedding_model}
                 if info.embedding_provider else None)
        return CollectionView(info.name, meta, info.dimension,
                              _str_or_none(meta.get("embedding_provider")),
                              _str_or_none(meta.get("embedding_model")),
                              self.services.collections.count(info, self.access.read_scope(caller)),
                              info.created_at, info.updated_at, embed)

    # -- collections -------------------------------------------------------------------
    def create_collection(self, caller: Principal, name: str,
                          metadata: dict[str, Any] | None = None,
                          embedding_provider: str | None = None,
                          embedding_model: str | None = None,
                          embed: dict[str, Any] | None = None) -> CollectionView:
        """``embedding_provider``/``embedding_model`` are spec 000's fields, kept as metadata
        only; ``embed`` (``{"provider", "model"}``) opts in to server-side embedding."""
        self.access.require_admin(caller, "create collections")
        if embed is not None and not caller.local:
            check_model_name(embed.get("model"))
        info = self.services.collections.create(name, metadata, embedding_provider,
                                                embedding_model, embed)
        return self._view(info, caller)

    def list_collections(self, caller: Principal) -> list[CollectionView]:
        return [self._view(c, caller) for c in self.services.collections.all()
                if self.access.may_use(caller, c)]

    def get_collection(self, caller: Principal, name: str) -> CollectionView:
        return self._view(self.access.collection(caller, name), caller)

    def update_collection_metadata(self, caller: Principal, name: str,
                                   metadata: dict[str, Any], merge: bool) -> CollectionView:
        self.access.require_admin(caller, "change a collection's metadata")
        return self._view(self.services.collections.update_metadata(name, metadata, merge),
                          caller)

    def delete_collection(self, caller: Principal, name: str) -> str:
        self.access.require_admin(caller, "delete collections")
        deleted = self.services.collections.delete(name).name
        self.services.sources.forget_stale()
        return deleted

    def empty_collection(self, caller: Principal, name: str) -> int:
        """Every document of the caller's tenant; an admin naming no tenant empties all."""
        self.access.collection(caller, name)
        if caller.all_tenants:
            n = self.services.collections.empty(name, caller.tenant)
            self.services.sources.forget_stale()  # the old shard's ingestion state
            return n
        return self.services.sources.delete_all(name, self.access.write_tenant(caller))

    def optimize_collection(self, caller: Principal, name: str) -> bool:
        """Build indexes now (offline use: see docs/storage.md)."""
        self.access.require_admin(caller, "optimize collections")
        return self.services.collections.optimize(name)

    # -- observability -----------------------------------------------------------------
    def metrics(self, caller: Principal) -> tuple[bytes, str]:
        """Prometheus exposition text and its content type (every tenant's figures)."""
        self.access.require_admin(caller, "read metrics")
        return metrics_render()

    # -- backups -----------------------------------------------------------------------
    def backup(self, caller: Principal, dest: Path, *,
               include_secrets: bool = False) -> dict[str, Any]:
        """Consistent online snapshot of catalog and shards into ``dest`` (absent or empty);
        writes wait for the copy, searches do not (ragline.services.backup). With a shared
        catalog: its rows as JSON and every collection in the export format
        (ragline.services.catalog_backup). Connection secrets only with
        ``include_secrets``."""
        self.access.require_admin(caller, "take backups")
        if self.services.backups is None and self.services.tables.rows is not None:
            return self._catalog_backups().backup(dest, include_secrets=include_secrets)
        return self._backups().backup(dest, include_secrets=include_secrets)

    def restore_catalog(self, caller: Principal, src: Path) -> dict[str, Any]:
        """Restore a backup of a shared catalog (``backup`` above) into this setup, whose
        catalog must be empty (a data-directory backup: :func:`restore_backup`)."""
        self.access.require_admin(caller, "restore backups")
        return self._catalog_backups().restore(src)

    def _catalog_backups(self) -> CatalogBackupService:
        rows = self.services.tables.rows
        if rows is None:
            raise InvalidInput("The embedded catalog is restored as a data directory: "
                               "`ragline restore SRC --data-dir DIR`")
        return CatalogBackupService(rows, self.services.collections, self._transfer(),
                                    self.services.tables.backend)

    def backup_archive(self, caller: Principal, workdir: Path, *,
                       include_secrets: bool = False) -> Path:
        """The same snapshot as one .tar.gz under ``workdir`` (``POST /admin/backup``)."""
        self.access.require_admin(caller, "take backups")
        return self._backups().backup_archive(workdir, include_secrets=include_secrets)

    # -- export / import (moving to another setup) ---------------------------------------
    def _transfer(self) -> TransferService:
        sv = self.services
        return TransferService(sv.collections, sv.store, sv.auth.keys,
                               self.settings.default_tenant)

    def export_data(self, caller: Principal, out: TextIO,
                    tenants: list[str] | None = None) -> dict[str, Any]:
        """Every collection with its documents and vectors as JSON Lines (see
        services/transfer.py for what is and is not included); returns the counts."""
        self.access.require_admin(caller, "export data")
        return self._transfer().export(out, tenants or [])

    def import_data(self, caller: Principal, lines: Iterable[str]) -> dict[str, Any]:
        """Create the collections of an export here and write its documents (vectors
        as exported: nothing is embedded again); returns the counts."""
        self.access.require_admin(caller, "import data")
        return self._transfer().import_(lines)

    def _backups(self) -> BackupService:
        backups = self.services.backups
        if backups is None:
            raise InvalidInput("With catalog 'postgres' there is no data directory to pack: "
                               "run `ragline backup DEST` on that setup (catalog rows and "
                               "collections as JSON), or pg_dump and the store's own backups "
                               "(docs/scaling.md)")
        return backups

    # -- documents ---------------------------------------------------------------------
    def add_documents(self, caller: Principal, collection: str,
                      documents: list[DocumentInput] | None) -> list[str]:
        self.access.collection(caller, collection)
        return self.services.documents.add(collection, documents, self.access.write_tenant(caller))

    def list_documents(self, caller: Principal, collection: str,
                       where: dict[str, Any] | str | None = None, limit: int = 100,
                       offset: int = 0) -> Page:
        self.access.collection(caller, collection)  # 404 before 400, as spec 000 lists them
        node = self.services.search.parse_where(where)
        limit = min(limit, self.settings.list_max_limit)
        return self.services.documents.list_page(collection, self.access.read_scope(caller), node,
                                                  limit, offset)

    def get_document(self, caller: Principal, collection: str, doc_id: str) -> Record:
        self.access.collection(caller, collection)
        rec = self.services.documents.get(collection, self.access.read_scope(caller), doc_id)
        if rec is None:
            raise DocumentNotFound(f"Document '{doc_id}' not found in collection "
                                   f"'{collection}'")
        return rec

    def delete_documents(self, caller: Principal, collection: str, ids: list[str] | None = None,
                         where: dict[str, Any] | None = None) -> int:
        self.access.collection(caller, collection)
        node = self.services.search.parse_where(where) if where is not None else None
        if ids is None and node is None:
            raise InvalidInput("Give 'ids' or a non-empty 'where' to choose the documents "
                               "to delete")
        if node is not None:
            self.services.collections.require("metadata_filtering", "delete by metadata")
        # ingested sources whose chunks it removes stop being "unchanged" (issue 12)
        return self.services.sources.delete_documents(collection, self.access.write_tenant(caller),
                                                     ids, node)

    def metadata_values(self, caller: Principal, collection: str,
                        field: str | None) -> list[Scalar]:
        self.access.collection(caller, collection, MSG_NOT_EXIST.format(collection))
        if field is None or field == "":  # after existence: a missing one is a 404 (" " is a key)
            raise InvalidInput("Query parameter 'field' is required")
        return self.services.documents.distinct(collection, self.access.read_scope(caller), field)

    # -- sources -----------------------------------------------------------------------
    def list_sources(self, caller: Principal, collection: str, limit: int = 100,
                     offset: int = 0) -> tuple[list[SourceInfo], int]:
        """The caller's ingested sources (files, uploads, texts, URLs) and their total."""
        self.access.collection(caller, collection)
        if limit < 0 or offset < 0:
            raise InvalidInput("'limit' and 'offset' must be 0 or more")
        limit = min(limit, self.settings.list_max_limit)
        return self.services.sources.page(collection, self.access.read_scope(caller), limit, offset,
                                          caller.local)

    def get_source(self, caller: Principal, collection: str, source_id: str) -> SourceDetail:
        self.access.collection(caller, collection)
        return self.services.sources.get(collection, self.access.read_scope(caller), source_id,
                                         caller.local)

    def delete_source(self, caller: Principal, collection: str, source_id: str) -> int:
        """A source's chunks and its ingestion state, together; returns chunks deleted."""
        self.access.collection(caller, collection)
        return self.services.sources.delete(collection, self.access.write_tenant(caller), source_id)

    def verify(self, caller: Principal, *, repair: bool = False,
               collection: str | None = None) -> VerifyReport:
        """Check ingestion state against the store (``ragline verify``); ``repair`` fixes
        what it finds (see services/verify.py)."""
        self.access.require_admin(caller, "verify the data directory")
        if collection is not None:
            self.services.collections.get(collection)
        tenants = {k.tenant for k in self.services.auth.list_keys(None)}
        tenants |= {t for t in (self.settings.default_tenant, SHARED,
                                self.settings.public_search_tenant) if t}
        report = self.services.verify.verify(repair=repair, collection=collection,
                                             tenants=tenants)
        catalog = self.services.tables.sqlite
        if catalog is not None and collection is None:
            for bad in unstorable_rows(catalog, repair=repair):
                report.findings.append(Finding(
                    "unstorable_text", "", None, None, 1,
                    f"{bad.table} row '{bad.row}': {bad.field} of {bad.column} holds "
                    f"{bad.what}", repaired=repair))
        return report

    # -- search ------------------------------------------------------------------------
    async def search(self, caller: Principal, request: SearchRequest) -> SearchResponse:
        name = self.services.search.existing_default(request.collection)  # the one time
        self.access.collection(caller, name)
        return await self.services.search.search(self.access.read_scope(caller), name, request)

    def search_sync(self, caller: Principal, request: SearchRequest) -> SearchResponse:
        """:meth:`search` for synchronous callers: the same pipeline on the facade's loop."""
        return self.call_sync(self.search, caller, request)

    def context(self, caller: Principal, chunk_id: str, collection: str | None = None,
                window: int | None = None) -> dict[str, Any]:
        """Without ``collection``, the collection the caller may read that holds the chunk
        (spec 004 names none; 400 naming ``collection`` when several do)."""
        if collection is None:
            collection = self.services.context.holder(
                self.access.read_scope(caller), chunk_id, lambda c: self.access.may_use(caller, c))
        name = self.services.search.existing_default(collection)
        self.access.collection(caller, name)
        return self.services.context.context(self.access.read_scope(caller), chunk_id, name,
                                             window)

    def lesson(self, caller: Principal, parent_doc_id: str,
               collection: str | None = None) -> dict[str, Any]:
        name = self.services.search.existing_default(collection)
        self.access.collection(caller, name)
        return self.services.context.lesson(self.access.read_scope(caller), parent_doc_id, name)

    def rerank(self, caller: Principal, query: str, documents: list[dict[str, Any]],
               top_k: int | None = None) -> list[Any]:
        if not documents:  # spec 000: 200 {"reranked": []}, with or without a model
            return []
        reranker = self.services.reranker
        if reranker is None:
            raise ModelNotLoaded(RERANKER_NOT_LOADED)
        try:
            return list(reranker.rerank(query, documents, top_k))
        except RaglineError:
            raise
        except Exception as exc:  # a plugin reranker that does not wrap its own errors
            log.exception("rerank failed")
            # spec 000: the message includes the exception's details
            raise RerankError(f"Reranking failed: {type(exc).__name__}: {exc}") from exc

    # -- ingestion ---------------------------------------------------------------------
    def ingest(self, caller: Principal, source: IngestSource, *, wait: bool = False,
               progress: Progress | None = None) -> IngestOutcome:
        """The one submission path (HTTP, webhook, CLI, MCP); see services/ingestion.py.

        Directories on the server are read for admins only and, for network callers, only
        under ``RAGLINE_INGEST_ALLOWED_ROOTS``."""
        if source.kind == "directory":
            self.access.require_admin(caller, "ingest directories on the server")
        name = self.services.search.collection_name(source.collection)
        if not self.access.may_use_existing(caller, name):
            raise CollectionNotFound(name)
        return self.services.ingestion.submit(self.access.write_tenant(caller), source,
                                              wait=wait, progress=progress, local=caller.local)

    async def ingest_async(self, caller: Principal, source: IngestSource) -> IngestOutcome:
        """:meth:`ingest` for async callers: a URL is fetched on the fetch pool first
        (no worker thread waits on a slow remote server), the rest runs in a thread."""
        import anyio.to_thread

        source = await self.services.ingestion.prefetch(source)
        return await anyio.to_thread.run_sync(self.ingest, caller, source)

    def upload_slot(self) -> AbstractContextManager[None]:
        """One of ``max_concurrent_uploads`` slots, held while an upload is read and
        processed; none free: 429 at once (issue 10)."""
        return self.services.ingest.upload_slot()

    def job(self, caller: Principal, job_id: str) -> Job:
        return self.services.ingestion.job(self.access.tenant_filter(caller), job_id)

    def jobs(self, caller: Principal, limit: int = 20,
             collection: str | None = None) -> list[Job]:
        return self.services.ingestion.recent(self.access.tenant_filter(caller), limit, collection)

    def rerun_job(self, caller: Principal, job_id: str) -> Job:
        self.access.require_admin(caller, "re-run directory jobs")
        return self.services.ingestion.rerun(self.access.tenant_filter(caller), job_id)

    def work(self, caller: Principal, *, exit_when_idle: bool = False) -> int:
        """Be a queue worker (``ragline worker``): claim and run ingestion jobs from the
        shared queue until :meth:`stop_work`; returns how many this process ran."""
        self.access.require_admin(caller, "run ingestion workers")
        jobs = self.services.jobs
        if not isinstance(jobs, QueuedJobService):
            raise InvalidInput("`ragline worker` needs the shared job queue: set "
                               "RAGLINE_CATALOG=postgres (docs/scaling.md); the embedded "
                               "catalog runs jobs inside `ragline serve`")
        return jobs.work(exit_when_idle=exit_when_idle)

    def stop_work(self) -> None:
        """Let :meth:`work` return: a running directory job stops at its next checkpoint
        and goes back to the queue. Safe to call from a signal handler."""
        jobs = self._services.jobs if self._services is not None else None
        if isinstance(jobs, QueuedJobService):
            jobs.stop()

    def wait_for_job(self, caller: Principal, job_id: str, timeout: float | None = None) -> Job:
        self.job(caller, job_id)  # scope check first
        return self.services.jobs.wait(job_id, timeout)

    def github_webhook(self, headers: Mapping[str, str],
                       body: bytes) -> tuple[int, dict[str, Any]]:
        """A GitHub delivery as received (blocking: runs git). Returns (status, body).
        Authenticated by its signature; it writes to ``github_tenant`` (default: the
        default tenant; ``*``: the shared corpus)."""
        s = self.settings
        return self.services.webhook.handle(s.github_tenant or s.default_tenant, headers, body)

    # -- access --------------------------------------------------------------------------
    def authenticate(self, key: str | None, tenant: str | None = None, *,
                     public_ok: bool = False, role: str | None = None) -> Principal:
        """The principal of a network request (see services/auth.py); ``role="user"`` lets
        an admin key act as a user (what a routing ragline sends for a user caller)."""
        return self.services.auth.resolve(key, tenant, public_ok=public_ok, role=role)

    def key_known(self, key: str) -> bool:
        """``key`` was validated moments ago (memory only: cheap enough for the event loop,
        where the request guard checks a key before reading a body)."""
        return self.services.auth.known(key)

    @property
    def auth_enabled(self) -> bool:
        return self.settings.auth == "on"

    def ensure_admin_key(self) -> str | None:
        """First start of a data directory with auth on: create the first admin key, write
        it to ``<data_dir>/admin-key.txt`` (owner-only) and return it, once."""
        return self.services.auth.ensure_first_admin(self.settings.data_dir)

    def create_key(self, caller: Principal, role: str, tenant: str,
                   name: str = "") -> tuple[KeyRecord, str]:
        self.access.require_admin(caller, "create API keys")
        return self.services.auth.create_key(role, tenant, name)

    def list_keys(self, caller: Principal) -> list[KeyRecord]:
        self.access.require_admin(caller, "list API keys")
        return self.services.auth.list_keys(self.access.tenant_filter(caller))

    def revoke_key(self, caller: Principal, key_id: str) -> KeyRecord:
        self.access.require_admin(caller, "revoke API keys")
        return self.services.auth.revoke(key_id, self.access.tenant_filter(caller))

    # -- operations --------------------------------------------------------------------
    def health(self, caller: Principal | None = None, *, anonymous: bool = False
               ) -> dict[str, Any]:
        """The whole answer for an admin (and the library); scoped to what the caller's
        tenant may read for a user key; status, version and reranker only when
        ``anonymous`` (issue 32 item 4)."""
        # chat: whether /api/chat can answer (the console shows a clear state when not)
        chat = {"chat": {"configured": self.llm_configured}}
        if anonymous:
            return {**self.services.operations.health(HealthView()), **chat}
        if caller is None or caller.is_admin:
            return {**self.services.operations.health(), **chat}
        return {**self.services.operations.health(
            HealthView(lambda c: self.access.may_use(caller, c))), **chat}

    @staticmethod
    def format_versions() -> dict[str, int]:
        """The data-directory format and the catalog schema version this code writes."""
        from ragline.catalog.schema_version import SCHEMA_VERSION
        from ragline.datadir import FORMAT_VERSION

        return {"data_format_version": FORMAT_VERSION, "catalog_schema_version": SCHEMA_VERSION}

    def info(self, caller: Principal) -> dict[str, Any]:
        return self.services.operations.info(self.access.read_scope(caller),
                                             lambda c: self.access.may_use(caller, c),
                                             admin=caller.is_admin)

    # -- providers and named connections (docs/providers.md) -----------------------------
    def providers(self) -> dict[str, Any]:
        """Every provider by kind (capabilities, config schema) and the plugins that did not
        load, with the reason."""
        return self.services.operations.providers()

    def provider_schema(self, name: str, kind: str | None = None) -> list[dict[str, Any]]:
        """The provider(s) called ``name`` (one per kind that has one), with schemas."""
        return registry.find(name, kind)

    def list_connections(self, caller: Principal) -> list[dict[str, Any]]:
        """Every connection id (``local`` first); admins also see options (never secrets)."""
        return [c.view(full=caller.is_admin) for c in self.services.connections.all()]

    def add_connection(self, caller: Principal, cid: str, provider: str,
                       options: dict[str, Any], kind: str = "stores") -> dict[str, Any]:
        self.access.require_admin(caller, "add connections")
        self._network_options(caller, kind, provider, options)
        return self.services.connections.add(cid, provider, options, kind).view(full=True)

    def delete_connection(self, caller: Principal, cid: str) -> None:
        """The connection's facade stops with it; its catalog stays (``connections/<id>/``
        or its schema), so the same id added again finds its collections."""
        self.access.require_admin(caller, "delete connections")
        self.services.connections.delete(cid)
        self._routed.drop(cid)

    def test_connection(self, caller: Principal, provider: str, options: dict[str, Any],
                        kind: str = "stores") -> dict[str, Any]:
        """Validate a config and try it, saving nothing (400 names an invalid field)."""
        self.access.require_admin(caller, "test connections")
        self._network_options(caller, kind, provider, options)
        return self.services.connections.test(provider, options, kind).model_dump()

    def connection_health(self, caller: Principal, cid: str) -> dict[str, Any]:
        """Admins see the details (the remote address among them); a user key the status
        only (issue 32 item 4)."""
        health = self.services.connections.health(cid).model_dump()
        if not caller.is_admin:
            health["details"] = {}
            if health.get("error"):
                health["error"] = "the connection is not usable (an admin sees why)"
        return {"id": cid, **health}

    @staticmethod
    def _network_options(caller: Principal, kind: str, provider: str,
                         options: Mapping[str, Any]) -> None:
        """Over the network a connection never names a place on this server's disk (an
        embedded store's directory is the operator's choice, made in the config file)."""
        if caller.local or not isinstance(options, Mapping):
            return
        fields = registry.get(kind, provider).Config.model_fields
        for name, info in fields.items():
            if name in options and ("path" in name or name == "location"
                                    or "Path" in str(info.annotation)):
                raise InvalidInput(f"'options.{name}': a directory on the server is set in "
                                   "the server's config file, not over the API")

    def route(self, caller: Principal, service: str) -> Ragline | None:
        """Who serves a ``?service=`` collection request: this facade (``local``), the
        facade of a store connection (started on first use, see facade_routed.py; call
        the same use case on it with the same caller), or ``None``: another server,
        reached by :meth:`forward`. An unknown id is a 404 listing the known ones; a
        connection that holds no collections, a 400. Blocking on first use (it opens a
        catalog and reaches the store): async callers run it in a worker thread."""
        target = self.services.routing.target(service)
        if target == "local":
            return self
        if target == "forward":
            return None
        return self._routed.get(service)

    async def forward(self, caller: Principal, service: str, request: Outgoing) -> Forwarded:
        """Pass a collection request through to the connection ``service`` and return its
        answer unchanged (services/routing.py)."""
        import anyio.to_thread

        return await anyio.to_thread.run_sync(self.services.routing.forward, caller, service,
                                              request)
