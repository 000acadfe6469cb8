"""``Ragline``: the root of ragline, the only way in, and the assembly of its doors.

The HTTP routes, the CLI, evaluation, MCP and the console call the doors and nothing
else; the store, the catalog, shard keys and job tables are private to the services
behind them. A door per area (docs/architecture.md)::

    rl.collections   create · all · get · update_metadata · delete · empty · optimize
    rl.documents     add · page · get · delete · metadata_values · sources · source · …
    rl.search        query (async) · query_sync · context · lesson · rerank
    rl.ingestion     submit · submit_async · job · jobs · wait · rerun · work · …
    rl.answers       chat_turn · chat · completion_turn · checklist · retrieve · process · …
    rl.keys          authenticate · create · all · revoke · …
    rl.connections   all · add · delete · test · health · providers · provider_schema
    rl.admin         health · info · metrics · backup · export · import_ · verify · …

Every use case takes the calling :class:`~ragline.core.principal.Principal` first and
asks the one access policy (``services/corpus/access.py``), so a tenant check cannot be
skipped by code that reaches around it. Spec 003's library API is an adapter over the
doors: ``ragline.library``.

Lifecycle: the constructor only records settings. :meth:`Ragline.start` builds
everything through the one composition root (``ragline.wiring``); :meth:`Ragline.close`
undoes it. ``with Ragline(settings) as rl:`` does both.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from ragline.catalog.ingest_state import Job
from ragline.catalog.keys import KeyRecord
from ragline.catalog.lock import holder_address
from ragline.core.principal import Principal
from ragline.doors.admin import AdminDoor, KeysDoor, restore_backup, unpack_backup
from ragline.doors.answers import AnswerOptions, AnswersDoor
from ragline.doors.collections import CollectionsDoor, CollectionView, DocumentsDoor
from ragline.doors.connections import ConnectionsDoor
from ragline.doors.ingestion import IngestionDoor, job_counters
from ragline.doors.search import SearchDoor
from ragline.facade_routed import Borrowed, RoutedFacades, connection_settings
from ragline.ingest.loader import tree_sources
from ragline.providers.llms.base import ChatModel
from ragline.services.connections.routing import Forwarded, Outgoing
from ragline.services.corpus.documents import DocumentInput
from ragline.services.ingestion.ingest_stats import IngestStats
from ragline.services.ingestion.ingestion import IngestOutcome, IngestSource
from ragline.services.ingestion.jobs import job_progress
from ragline.services.ingestion.sources import SourceDetail, SourceInfo
from ragline.services.ingestion.verify import VerifyReport
from ragline.services.search.searching import SearchHit, SearchRequest, SearchResponse
from ragline.settings import Settings
from ragline.wiring import Services, SyncBridge, Wiring

T = TypeVar("T")

NOT_STARTED = "Ragline is not started: call start() (or use it as a context manager)"

__all__ = [
    "AnswerOptions", "CollectionView", "DocumentInput", "Forwarded", "IngestOutcome",
    "IngestSource", "IngestStats", "Job", "KeyRecord", "Outgoing", "Principal",
    "Ragline", "SearchHit", "SearchRequest", "SearchResponse", "SourceDetail", "SourceInfo",
    "VerifyReport", "holder_address", "job_counters",
    "job_progress", "restore_backup", "tree_sources", "unpack_backup",
]


@dataclass(frozen=True)
class Doors:
    """The doors of one started root, built over its services."""

    collections: CollectionsDoor
    documents: DocumentsDoor
    search: SearchDoor
    ingestion: IngestionDoor
    answers: AnswersDoor
    keys: KeysDoor
    connections: ConnectionsDoor
    admin: AdminDoor


class Ragline:
    def __init__(self, settings: Settings | None = None, *,
                 llm: ChatModel | None = None, borrowed: Borrowed | None = None) -> None:
        """Records settings only: nothing is opened, read or recovered until :meth:`start`.

        ``llm``: a chat-model object for library use and tests (the scripted model);
        servers configure theirs with the ``llm_*`` settings. ``borrowed``: only for the
        root of a store connection, what it takes from the server's (facade_routed.py)."""
        self.settings = settings or Settings()
        self._llm = llm
        self._wiring: Wiring | None = None
        self._doors: Doors | None = None
        self._bridge = SyncBridge()
        self.address: str | None = None  # set by `ragline serve`: named to a second process
        self._borrowed = borrowed  # None: this server's own root
        self._routed: RoutedFacades[Ragline] = RoutedFacades(self._connection_root)

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> Ragline:
        """Open storage, recover from a crash, load the configured models. Idempotent."""
        if self._wiring is not None:
            return self
        wiring = Wiring.open(self.settings, llm=self._llm, borrowed=self._borrowed,
                             address=self.address)
        self._doors = self._assemble(wiring.services)
        self._wiring = wiring
        return self

    def _assemble(self, sv: Services) -> Doors:
        s = self.settings
        collections = CollectionsDoor(sv, s)
        return Doors(
            collections=collections, documents=DocumentsDoor(sv, s),
            search=SearchDoor(sv, s, self._bridge), ingestion=IngestionDoor(sv, s),
            answers=AnswersDoor(sv, s, self._bridge, collections), keys=KeysDoor(sv, s),
            connections=ConnectionsDoor(sv, s, self._routed.drop),
            admin=AdminDoor(sv, s, owns_data=not (s.shared_catalog or self._borrowed)))

    def close(self) -> None:
        """Stop the connections' roots, jobs (running ones stop at their next
        checkpoint), batchers and storage."""
        wiring, self._wiring, self._doors = self._wiring, None, None
        self._bridge.close()
        if wiring is None:
            return
        try:
            self._routed.close()  # before the connections: their stores are closed there
        finally:
            wiring.close()

    def __enter__(self) -> Ragline:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def started(self) -> bool:
        return self._wiring is not None

    @property
    def services(self) -> Services:
        """Internal wiring, for tests of the wiring itself; not for routes, CLI or MCP."""
        if self._wiring is None:
            raise RuntimeError(NOT_STARTED)
        return self._wiring.services

    def _open(self) -> Doors:
        if self._doors is None:
            raise RuntimeError(NOT_STARTED)
        return self._doors

    # -- the doors ---------------------------------------------------------------------
    @property
    def collections(self) -> CollectionsDoor:
        return self._open().collections

    @property
    def documents(self) -> DocumentsDoor:
        return self._open().documents

    @property
    def search(self) -> SearchDoor:
        return self._open().search

    @property
    def ingestion(self) -> IngestionDoor:
        return self._open().ingestion

    @property
    def answers(self) -> AnswersDoor:
        return self._open().answers

    @property
    def keys(self) -> KeysDoor:
        return self._open().keys

    @property
    def connections(self) -> ConnectionsDoor:
        return self._open().connections

    @property
    def admin(self) -> AdminDoor:
        return self._open().admin

    # -- who calls, and how ------------------------------------------------------------
    @property
    def tenant(self) -> str:
        """The default tenant (the only one until API keys assign others)."""
        return self.settings.default_tenant

    def owner(self) -> Principal:
        """The principal of the CLI and library callers: the data directory's owner."""
        return Principal.owner(self.settings.default_tenant)

    def call_sync(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run an async use case from synchronous code (CLI, evaluation, library) on the
        root's own event loop, so sync and async callers share one pipeline."""
        return self._bridge.call(fn, *args)

    # -- ?service= routing: which root serves a collection request ----------------------
    def _connection_root(self, cid: str) -> Ragline:
        """The (unstarted) root serving store connection ``cid``: facade_routed.py."""
        sv = self.services
        provider = sv.connections.get(cid).provider
        return Ragline(connection_settings(self.settings, cid, provider), llm=self._llm,
                       borrowed=Borrowed(cid, sv.connections.instance(cid), sv.embedders,
                                         sv.reranker))

    def route(self, caller: Principal, service: str) -> Ragline | None:
        """Who serves a ``?service=`` collection request: this root (``local``), the
        root of a store connection (started on first use, see facade_routed.py; call
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
        answer unchanged (services/connections/routing.py)."""
        import anyio.to_thread

        return await anyio.to_thread.run_sync(self.services.routing.forward, caller, service,
                                              request)
