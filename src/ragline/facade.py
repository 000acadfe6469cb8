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
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, TypeVar

from anyio.from_thread import BlockingPortal, start_blocking_portal

from ragline.catalog.deliveries import Deliveries
from ragline.catalog.ingest_state import COUNTERS, IngestState, Job, JobTable
from ragline.catalog.sqlite import Catalog
from ragline.core.principal import Principal
from ragline.core.types import CollectionInfo, Page, Record, Scalar
from ragline.errors import (
    DocumentNotFound,
    Forbidden,
    InvalidInput,
    ModelNotLoaded,
    RaglineError,
    RerankError,
)
from ragline.providers.stores.base import VectorStore
from ragline.services.collections import MSG_NOT_EXIST, CollectionService
from ragline.services.context import ContextService
from ragline.services.diskspace import DiskGuard
from ragline.services.documents import DocumentInput, DocumentService
from ragline.services.embedders import EmbedderPool
from ragline.services.ingest import IngestService
from ragline.services.ingest_stats import IngestStats, Progress
from ragline.services.ingestion import IngestionService, IngestOutcome, IngestSource
from ragline.services.jobs import JobService
from ragline.services.operations import OperationsService
from ragline.services.retrieval import BatchSettings, RetrievalService
from ragline.services.searching import SearchRequest, SearchResponse, SearchService
from ragline.services.slots import build_reranker, build_store
from ragline.services.validation import InputLimits
from ragline.services.webhook import WebhookService
from ragline.settings import Settings

log = logging.getLogger(__name__)

T = TypeVar("T")

NOT_STARTED = "Ragline is not started: call start() (or use it as a context manager)"
RERANKER_NOT_LOADED = "Cross-encoder not loaded. Start server with --cross-encoder flag."

__all__ = [
    "CollectionView", "DocumentInput", "IngestOutcome", "IngestSource", "IngestStats", "Job",
    "Principal",
    "Ragline", "SearchRequest", "SearchResponse", "job_counters",
]


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


@dataclass
class Services:
    """What :meth:`Ragline.start` wires. Internal: only the facade (and tests of the
    services themselves) use it; routes, CLI, MCP and the console never do."""

    catalog: Catalog
    store: VectorStore
    embedders: EmbedderPool
    collections: CollectionService
    documents: DocumentService
    retrieval: RetrievalService
    search: SearchService
    ingest_state: IngestState
    ingest: IngestService
    jobs: JobService
    ingestion: IngestionService
    context: ContextService
    webhook: WebhookService
    operations: OperationsService
    reranker: Any | None


class Ragline:
    def __init__(self, settings: Settings | None = None) -> None:
        """Wiring only: nothing is opened, read or recovered until :meth:`start`."""
        self.settings = settings or Settings()
        self._services: Services | None = None
        self._portal_cm: Any = None
        self._portal: BlockingPortal | None = None
        self._portal_lock = threading.Lock()

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> Ragline:
        """Open storage, recover from a crash, load the configured models. Idempotent."""
        if self._services is not None:
            return self
        s = self.settings
        s.apply_process_environment()
        s.data_dir.mkdir(parents=True, exist_ok=True)
        catalog = Catalog(s.catalog_path())
        try:
            store = build_store(s)
        except BaseException:
            catalog.close()
            raise
        try:
            self._services = self._wire(catalog, store)
            self._recover(self._services)
        except BaseException:
            if self._services is not None:
                self._services.retrieval.close()
                self._services = None
            store.close()
            catalog.close()
            raise
        return self

    def _wire(self, catalog: Catalog, store: VectorStore) -> Services:
        s = self.settings
        embedders = EmbedderPool(s)
        collections = CollectionService(catalog, store, embedders)
        documents = DocumentService(collections, store, s.max_documents_per_request, embedders,
                                    limits=InputLimits.from_settings(s))
        reranker = build_reranker(s)
        retrieval = RetrievalService(
            collections, store, embedders, s.rrf_k, s.hybrid_candidates,
            reranker=self._reranker, fusion=s.hybrid_fusion,
            batch=BatchSettings(s.search_max_batch, s.search_max_wait_ms, s.search_workers))
        retrieval.limits = InputLimits.from_settings(s)
        search = SearchService(s, collections, retrieval)
        state = IngestState(catalog)
        ingest = IngestService(s, collections, store, embedders, state)
        # one free-space guard for every write path: 507 before a full disk (issue 10)
        disk = DiskGuard(s.data_dir, s.disk_reserve_bytes)
        collections.disk = documents.disk = ingest.disk = disk
        jobs = JobService(JobTable(catalog), ingest, s.job_workers, s.data_dir / "uploads")
        ingestion = IngestionService(s, ingest, jobs, search)
        return Services(
            catalog=catalog, store=store, embedders=embedders, collections=collections,
            documents=documents, retrieval=retrieval, search=search, ingest_state=state,
            ingest=ingest, jobs=jobs, ingestion=ingestion,
            context=ContextService(collections, store, state, search),
            webhook=WebhookService(s, ingestion.submit, Deliveries(catalog)),
            operations=OperationsService(s.data_dir, store, collections, embedders, retrieval,
                                         self._reranker, disk),
            reranker=reranker)

    def _reranker(self) -> Any | None:
        """The loaded reranker, read at use (a getter, so services see a replacement)."""
        return self._services.reranker if self._services is not None else None

    @staticmethod
    def _recover(sv: Services) -> None:
        sv.collections.recover()
        sv.ingest_state.purge_stale({c.name: c.shard for c in sv.collections.all()})
        sv.jobs.start()

    def close(self) -> None:
        """Stop jobs (running ones stop at their next checkpoint), batchers and storage."""
        sv, self._services = self._services, None
        with self._portal_lock:
            if self._portal_cm is not None:
                self._portal_cm.__exit__(None, None, None)
                self._portal_cm = self._portal = None
        if sv is None:
            return
        sv.jobs.close()
        sv.ingest.fetcher.close()
        sv.retrieval.close()
        sv.store.close()
        sv.catalog.close()

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

    # -- access rules ------------------------------------------------------------------
    @staticmethod
    def _admin(caller: Principal, what: str) -> None:
        if not caller.is_admin:
            raise Forbidden(f"Only an admin key can {what}")

    def _view(self, info: CollectionInfo, caller: Principal) -> CollectionView:
        return CollectionView(info.name, info.metadata, info.dimension, info.embedding_provider,
                              info.embedding_model,
                              self.services.collections.count(info, caller.tenant),
                              info.created_at, info.updated_at)

    # -- collections -------------------------------------------------------------------
    def create_collection(self, caller: Principal, name: str,
                          metadata: dict[str, Any] | None = None,
                          embedding_provider: str | None = None,
                          embedding_model: str | None = None) -> CollectionView:
        self._admin(caller, "create collections")
        info = self.services.collections.create(name, metadata, embedding_provider,
                                                embedding_model)
        return self._view(info, caller)

    def list_collections(self, caller: Principal) -> list[CollectionView]:
        return [self._view(c, caller) for c in self.services.collections.all()]

    def get_collection(self, caller: Principal, name: str) -> CollectionView:
        return self._view(self.services.collections.get(name), caller)

    def update_collection_metadata(self, caller: Principal, name: str,
                                   metadata: dict[str, Any], merge: bool) -> CollectionView:
        self._admin(caller, "change a collection's metadata")
        return self._view(self.services.collections.update_metadata(name, metadata, merge),
                          caller)

    def delete_collection(self, caller: Principal, name: str) -> str:
        self._admin(caller, "delete collections")
        return self.services.collections.delete(name).name

    def empty_collection(self, caller: Principal, name: str) -> int:
        """Every document of the caller's tenant; an admin naming no tenant empties all."""
        if caller.all_tenants:
            return self.services.collections.empty(name, caller.tenant)
        return self.services.documents.delete_all(name, caller.tenant)

    def optimize_collection(self, caller: Principal, name: str) -> bool:
        """Build indexes now (offline use: see docs/storage.md)."""
        self._admin(caller, "optimize collections")
        return self.services.collections.optimize(name)

    # -- documents ---------------------------------------------------------------------
    def add_documents(self, caller: Principal, collection: str,
                      documents: list[DocumentInput] | None) -> list[str]:
        return self.services.documents.add(collection, documents, caller.tenant)

    def list_documents(self, caller: Principal, collection: str,
                       where: dict[str, Any] | str | None = None, limit: int = 100,
                       offset: int = 0) -> Page:
        self.services.collections.get(collection)  # 404 before 400, as spec 000 lists them
        node = self.services.search.parse_where(where)
        limit = min(limit, self.settings.list_max_limit)
        return self.services.documents.list_page(collection, caller.tenant, node, limit, offset)

    def get_document(self, caller: Principal, collection: str, doc_id: str) -> Record:
        rec = self.services.documents.get(collection, caller.tenant, doc_id)
        if rec is None:
            raise DocumentNotFound(f"Document '{doc_id}' not found in collection "
                                   f"'{collection}'")
        return rec

    def delete_documents(self, caller: Principal, collection: str, ids: list[str] | None = None,
                         where: dict[str, Any] | None = None) -> int:
        node = self.services.search.parse_where(where) if where is not None else None
        if ids is None and node is None:
            raise InvalidInput("Give 'ids' or a non-empty 'where' to choose the documents "
                               "to delete")
        return self.services.documents.delete(collection, caller.tenant, ids, node)

    def metadata_values(self, caller: Principal, collection: str,
                        field: str | None) -> list[Scalar]:
        if field is None or field.strip() == "":
            # checked after existence so a missing collection is still a 404
            self.services.collections.get(collection, message=MSG_NOT_EXIST.format(collection))
            raise InvalidInput("Query parameter 'field' is required")
        return self.services.documents.distinct(collection, caller.tenant, field)

    # -- search ------------------------------------------------------------------------
    async def search(self, caller: Principal, request: SearchRequest) -> SearchResponse:
        return await self.services.search.search(caller.tenant, request)

    def search_sync(self, caller: Principal, request: SearchRequest) -> SearchResponse:
        """:meth:`search` for synchronous callers: the same pipeline on the facade's loop."""
        return self.call_sync(self.search, caller, request)

    def context(self, caller: Principal, chunk_id: str, collection: str | None = None,
                window: int | None = None) -> dict[str, Any]:
        return self.services.context.context(caller.tenant, chunk_id, collection, window)

    def lesson(self, caller: Principal, parent_doc_id: str,
               collection: str | None = None) -> dict[str, Any]:
        return self.services.context.lesson(caller.tenant, parent_doc_id, collection)

    def rerank(self, caller: Principal, query: str, documents: list[dict[str, Any]],
               top_k: int | None = None) -> list[Any]:
        reranker = self.services.reranker
        if reranker is None:
            raise ModelNotLoaded(RERANKER_NOT_LOADED)
        if not documents:
            return []
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
        """The one submission path (HTTP, webhook, CLI, MCP); see services/ingestion.py."""
        return self.services.ingestion.submit(caller.tenant, source, wait=wait,
                                              progress=progress)

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
        return self.services.ingestion.job(self._job_scope(caller), job_id)

    def jobs(self, caller: Principal, limit: int = 20,
             collection: str | None = None) -> list[Job]:
        return self.services.ingestion.recent(self._job_scope(caller), limit, collection)

    def rerun_job(self, caller: Principal, job_id: str) -> Job:
        return self.services.ingestion.rerun(self._job_scope(caller), job_id)

    def wait_for_job(self, caller: Principal, job_id: str, timeout: float | None = None) -> Job:
        self.job(caller, job_id)  # scope check first
        return self.services.jobs.wait(job_id, timeout)

    @staticmethod
    def _job_scope(caller: Principal) -> str | None:
        """Jobs of the caller's tenant; an admin naming no tenant sees every tenant's."""
        return None if caller.all_tenants else caller.tenant

    def github_webhook(self, caller: Principal, headers: Mapping[str, str],
                       body: bytes) -> tuple[int, dict[str, Any]]:
        """A GitHub delivery as received (blocking: runs git). Returns (status, body)."""
        return self.services.webhook.handle(caller.tenant, headers, body)

    # -- operations --------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        return self.services.operations.health()

    def info(self, caller: Principal) -> dict[str, Any]:
        return self.services.operations.info(caller.tenant)

    def providers(self) -> dict[str, Any]:
        return self.services.operations.providers()
