"""The one composition root: every service built with what it needs, through its constructor.

:meth:`Wiring.open` takes the data directory's lock, migrates and opens the catalog,
builds the store and the reranker through the registry (``services/corpus/slots.py``), builds
every service with its dependencies passed in (nothing is assigned after
construction), finishes what a crash interrupted (retired and orphan shards, stale
ingestion state, jobs of a dead process) and starts the background index builds.
Everything it opens is pushed on one :class:`~contextlib.ExitStack`, so a failure
half-way closes exactly what was opened, and :meth:`Wiring.close` undoes it all in
reverse order.

Only ``ragline.facade`` (the root, which hands the services to the doors) uses this
module; the services' own tests read :class:`Services` as ``rl.services``.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass
from typing import Any, TypeVar

from anyio.from_thread import BlockingPortal, start_blocking_portal

from ragline.catalog.backends import CatalogTables, open_catalog
from ragline.catalog.lock import DataDirLock
from ragline.catalog.tables import CollectionCatalog, SourceStates
from ragline.datadir import ensure_format
from ragline.errors import ConfigError
from ragline.facade_routed import Borrowed
from ragline.providers.llms.base import ChatModel
from ragline.providers.stores.base import VectorStore
from ragline.services.admin.auth import AuthService
from ragline.services.admin.backup import BackupService
from ragline.services.admin.operations import OperationsService
from ragline.services.answers.answers import AnswerServices, build_answers
from ragline.services.connections.connections import ConnectionService
from ragline.services.connections.routing import RoutingService
from ragline.services.corpus.access import AccessPolicy
from ragline.services.corpus.collections import CollectionService
from ragline.services.corpus.diskspace import DiskGuard
from ragline.services.corpus.documents import DocumentService
from ragline.services.corpus.embedders import EmbedderPool
from ragline.services.corpus.slots import (
    RerankerSlot,
    build_reranker,
    build_store,
    configure_registry,
)
from ragline.services.corpus.validation import InputLimits
from ragline.services.ingestion.indexing import IndexingService
from ragline.services.ingestion.ingest import IngestService
from ragline.services.ingestion.ingestion import IngestionService
from ragline.services.ingestion.jobs import JobService
from ragline.services.ingestion.queued_jobs import QueuedJobService
from ragline.services.ingestion.sources import SourceService
from ragline.services.ingestion.verify import VerifyService
from ragline.services.ingestion.webhook import WebhookService
from ragline.services.search.context import ContextService
from ragline.services.search.diversify import Diversity
from ragline.services.search.retrieval import BatchSettings, RetrievalService
from ragline.services.search.searching import SearchService
from ragline.settings import Settings

T = TypeVar("T")


@dataclass(frozen=True)
class Services:
    """What :meth:`Wiring.open` builds. Internal: the doors use it; routes, CLI, MCP and
    the console never do (tests/test_architecture.py), tests only to check wiring."""

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
    reranker: RerankerSlot
    indexing: IndexingService
    answers: AnswerServices
    connections: ConnectionService
    routing: RoutingService
    sources: SourceService
    verify: VerifyService
    tables: CatalogTables
    access: AccessPolicy
    disk: DiskGuard


class Wiring:
    """The opened services and the one stack that closes them."""

    def __init__(self, services: Services, stack: ExitStack) -> None:
        self.services = services
        self._stack = stack

    @classmethod
    def open(cls, settings: Settings, *, llm: ChatModel | None = None,
             borrowed: Borrowed | None = None, address: str | None = None) -> Wiring:
        """``borrowed``: what a store connection's root takes from the server's (its
        store, embedders and reranker; see facade_routed.py) instead of building it.
        ``address``: named to a second process that finds the directory locked."""
        s = settings
        s.apply_process_environment()
        s.data_dir.mkdir(parents=True, exist_ok=True)
        configure_registry(s)  # RAGLINE_PROVIDERS_ALLOW, before any provider is looked up
        with ExitStack() as stack:
            # a shared catalog (PostgreSQL) is many processes' by design: no directory
            # lock, and the data directory holds no catalog or shards to migrate; a
            # connection's root lives in a directory of the server's, under its lock
            if not (s.shared_catalog or borrowed):
                lock = DataDirLock(s.data_dir)
                lock.acquire(address)
                stack.callback(lock.release)
            if not s.shared_catalog:
                ensure_format(s.data_dir)  # migrates older layouts, refuses newer ones
            tables = open_catalog(s)
            stack.callback(tables.close)
            store = borrowed.store if borrowed else build_store(s)
            if not borrowed:  # a connection's store is closed with the connection
                stack.callback(store.close)
            _check_shared(s, store, borrowed)
            sv = _build(s, tables, store, llm, borrowed, stack)
            # orphans: a connection's store may hold other catalogs' shards (this server's
            # own, another server's): never removed from here
            _recover(sv, orphans=not (s.shared_catalog or borrowed))
            if s.background_indexing:  # issue 18: index builds off the serving path
                sv.indexing.start()
            return cls(sv, stack.pop_all())
        raise AssertionError("unreachable")  # pragma: no cover (mypy: ExitStack may swallow)

    def close(self) -> None:
        """Stop jobs (running ones stop at their next checkpoint), batchers and storage,
        in the reverse order of :meth:`open`."""
        self._stack.close()


def _check_shared(s: Settings, store: VectorStore, borrowed: Borrowed | None) -> None:
    if s.shared_catalog and "shared" not in store.capabilities():
        if borrowed:
            raise ConfigError(
                f"Connection '{borrowed.connection}' ({store.name}) cannot serve "
                "collection requests with catalog 'postgres': the catalog is shared "
                "by many processes and this store is not (use pgvector or qdrant)")
        raise ConfigError(f"catalog 'postgres' is shared by many processes; store "
                          f"'{s.store}' is not (use pgvector or qdrant)")


def _build(s: Settings, tables: CatalogTables, store: VectorStore, llm: ChatModel | None,
           borrowed: Borrowed | None, stack: ExitStack) -> Services:
    """Every service, dependencies first; each closable one's close pushed on ``stack``."""
    catalog = tables.collections
    limits = InputLimits.from_settings(s)
    # one free-space guard for every write path: 507 before a full disk (issue 10)
    disk = DiskGuard(s.data_dir, s.disk_reserve_bytes,
                     floor=getattr(store, "reopen_bytes", None))  # shards reopen (32)
    connections = ConnectionService(s, tables.connections, store)
    stack.callback(connections.close)
    routing = RoutingService(connections)
    stack.callback(routing.close)
    # embed.provider may name an embedder connection; a store connection's root uses the
    # server's pool (and its connections)
    embedders = borrowed.embedders if borrowed else EmbedderPool(s, connections.embedder)
    reranker = borrowed.reranker if borrowed else RerankerSlot(build_reranker(s))
    collections = CollectionService(catalog, store, embedders, disk=disk)
    documents = DocumentService(collections, store, s.max_documents_per_request, embedders,
                                limits=limits, disk=disk)
    retrieval = RetrievalService(
        collections, store, embedders, s.rrf_k, s.hybrid_candidates,
        reranker=reranker, fusion=s.hybrid_fusion,
        batch=BatchSettings(s.search_max_batch, s.search_max_wait_ms, s.search_workers),
        overviews=s.search_overviews, overview_window=s.search_overview_window,
        diversity=Diversity(s.search_diversity_per_source, s.search_diversity_asides,
                            s.search_diversity_window, s.search_aside_sections),
        limits=limits)
    stack.callback(retrieval.close)
    search = SearchService(s, collections, retrieval)
    state = tables.sources
    ingest = IngestService(s, collections, store, embedders, state, disk=disk)
    stack.callback(ingest.fetcher.close)
    jobs = _jobs(s, tables, ingest)
    stack.callback(jobs.close)
    indexing = IndexingService(store, s.indexing_min_points, s.indexing_growth,
                               s.indexing_interval_s)
    stack.callback(indexing.stop)  # an unfinished build is abandoned; its copy removed
    ingestion = IngestionService(s, ingest, jobs, search)
    return Services(
        catalog=catalog, store=store, embedders=embedders, collections=collections,
        documents=documents, retrieval=retrieval, search=search, ingest_state=state,
        ingest=ingest, jobs=jobs, ingestion=ingestion,
        context=ContextService(collections, store, state, search),
        webhook=WebhookService(s, ingestion.submit, tables.deliveries),
        auth=AuthService(s, tables.keys),
        backups=BackupService(tables.sqlite, store) if tables.sqlite is not None else None,
        operations=OperationsService(
            s.data_dir, store, collections, embedders, retrieval, reranker, disk,
            indexing, catalog={"backend": tables.backend,
                               "schema_version": tables.schema_version}),
        reranker=reranker, indexing=indexing,
        answers=build_answers(s, tables.conversations, collections, embedders, search,
                              llm, connections),
        connections=connections, routing=routing,
        sources=SourceService(collections, store, state, documents, ingest),
        access=AccessPolicy(collections),
        verify=VerifyService(collections, store, state),
        tables=tables, disk=disk)


def _jobs(s: Settings, tables: CatalogTables, ingest: IngestService) -> JobService:
    """In-process jobs on the embedded catalog; the shared queue on PostgreSQL."""
    if tables.queue is None:
        return JobService(tables.jobs, ingest, s.job_workers)
    from ragline.catalog.pg_ingest import PgJobTable

    assert isinstance(tables.jobs, PgJobTable)
    return QueuedJobService(tables.jobs, tables.queue, ingest,
                            s.catalog_options.worker_poll_s)


def _recover(sv: Services, orphans: bool = True) -> None:
    """``orphans``: also remove shards and ingestion state no collection points at.
    Only the embedded catalog's single owner may: with a shared catalog, another
    process's rebuild in progress looks exactly like an orphan."""
    sv.collections.recover(orphans=orphans)
    if orphans:
        sv.ingest_state.purge_stale({c.name: c.shard for c in sv.collections.all()})
    sv.jobs.start()


class SyncBridge:
    """Runs async use cases from synchronous code (CLI, evaluation, library) on one event
    loop of the root's own, started on first use, so sync and async callers share one
    pipeline."""

    def __init__(self) -> None:
        self._cm: AbstractContextManager[BlockingPortal] | None = None
        self._portal: BlockingPortal | None = None
        self._lock = threading.Lock()

    def call(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        with self._lock:
            if self._portal is None:
                self._cm = start_blocking_portal()
                self._portal = self._cm.__enter__()
            portal = self._portal
        return portal.call(fn, *args)

    def close(self) -> None:
        with self._lock:
            if self._cm is not None:
                self._cm.__exit__(None, None, None)
                self._cm = self._portal = None
