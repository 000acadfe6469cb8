"""What the services need from the catalog, as protocols with two implementations.

The embedded catalog is SQLite in the data directory (``sqlite.py``,
``ingest_state.py``, ``keys.py``, ``conversations.py``, ``deliveries.py``); the
scaled-out one is PostgreSQL (``pg_catalog.py``, ``pg_ingest.py``,
``pg_access.py``), shared by every API and worker process. Services type their
collaborators with these protocols so either can be wired in
(:func:`ragline.catalog.backends.open_catalog`), and neither leaks its
connection type into a service.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol

from ragline.catalog.connections import StoredConnection
from ragline.catalog.conversations import Conversation, Message
from ragline.catalog.ingest_state import Job, SourceState, StateRow
from ragline.catalog.keys import KeyRecord
from ragline.core.types import CollectionInfo


class CollectionCatalog(Protocol):
    """Collections and the shard each points at (``Catalog``, ``PgCatalog``)."""

    def create_collection(
        self, name: str, metadata: dict[str, Any], shard: str, dimension: int | None,
        embedding_provider: str | None, embedding_model: str | None,
    ) -> CollectionInfo: ...

    def find_collection(self, name: str) -> CollectionInfo | None: ...

    def get_collection(self, name: str, *, message: str | None = None) -> CollectionInfo: ...

    def list_collections(self) -> list[CollectionInfo]: ...

    def set_metadata(self, name: str, metadata: dict[str, Any]) -> CollectionInfo: ...

    def set_dimension(self, name: str, dimension: int) -> None: ...

    def swap_shard(self, name: str, old: str, new: str) -> None: ...

    def delete_collection(self, name: str) -> CollectionInfo: ...

    def retired_shards(self) -> list[str]: ...

    def forget_retired(self, shard: str) -> None: ...

    def live_shards(self) -> set[str]: ...

    def close(self) -> None: ...


class SourceStates(Protocol):
    """Per-source ingestion state (``IngestState``, ``PgIngestState``)."""

    def writing(self, collection: str, tenant: str) -> AbstractContextManager[None]:
        """The write lock of (collection, tenant): ingestion writes and deletes that
        touch state never interleave (across processes too, on PostgreSQL)."""

    def page(self, collection: str, shard: str, tenant: str, limit: int,
             offset: int) -> tuple[list[SourceState], int]: ...

    def rows(self) -> list[StateRow]: ...

    def sources(self, collection: str, shard: str, tenant: str) -> dict[str, SourceState]: ...

    def any(self, collection: str, shard: str, tenant: str) -> bool: ...

    def some(self, collection: str, shard: str, tenant: str,
             source_ids: set[str]) -> dict[str, SourceState]: ...

    def source(self, collection: str, shard: str, tenant: str,
               source_id: str) -> SourceState | None: ...

    def begin(self, collection: str, shard: str, tenant: str,
              entries: list[SourceState]) -> None: ...

    def commit(self, collection: str, shard: str, tenant: str,
               entries: list[SourceState]) -> None: ...

    def retag(self, collection: str, shard: str, tenant: str, source_ids: list[str],
              origin: str) -> None: ...

    def mark_modified(self, collection: str, shard: str, tenant: str,
                      source_ids: list[str]) -> None: ...

    def unmark(self, collection: str, shard: str, tenant: str,
               source_ids: list[str]) -> None: ...

    def settle(self, collection: str, shard: str, tenant: str,
               remaining: dict[str, list[str]]) -> None: ...

    def drop_tenant(self, collection: str, shard: str, tenant: str) -> int: ...

    def drop_rows(self, rows: list[StateRow]) -> None: ...

    def drop(self, collection: str, shard: str, tenant: str, source_ids: list[str]) -> None: ...

    def purge_stale(self, live: dict[str, str]) -> int: ...


class JobRows(Protocol):
    """Ingestion job rows and their waiting inputs (``JobTable``, ``PgJobTable``)."""

    def create(self, *, kind: str, trigger: str, mode: str, collection: str, tenant: str,
               path: str | None, restricted_paths: list[str] | None = None,
               data: bytes | None = None) -> Job: ...

    def get(self, job_id: str) -> Job | None: ...

    def recent(self, limit: int = 20, collection: str | None = None,
               tenant: str | None = None) -> list[Job]: ...

    def start(self, job_id: str) -> None: ...

    def progress(self, job_id: str, counters: dict[str, int], warnings: list[str]) -> None: ...

    def finish(self, job_id: str, status: str, counters: dict[str, int], warnings: list[str],
               duration_s: float, error: str | None = None,
               result: dict[str, Any] | None = None) -> None: ...

    def fail_unfinished(self, error: str) -> list[str]: ...

    def input(self, job_id: str) -> bytes | None:
        """The upload or text a job waits with (None when gone)."""

    def drop_input(self, job_id: str) -> None: ...


class KeyRows(Protocol):
    """Hashed API keys (``KeyTable``, ``PgKeyTable``)."""

    def create(self, role: str, tenant: str, name: str) -> tuple[KeyRecord, str]: ...

    def get(self, kid: str) -> KeyRecord | None: ...

    def verify(self, key: str) -> KeyRecord | None: ...

    def touch(self, kid: str) -> None: ...

    def list(self, tenant: str | None = None) -> list[KeyRecord]: ...

    def revoke(self, kid: str) -> KeyRecord | None: ...

    def count(self) -> int: ...


class ConversationRows(Protocol):
    """Conversations per tenant (``ConversationTable``, ``PgConversationTable``)."""

    def create(self, tenant: str, collection: str | None) -> Conversation: ...

    def get(self, tenant: str, conversation_id: str, *, with_messages: bool = True,
            last: int | None = None) -> Conversation: ...

    def append(self, tenant: str, conversation_id: str, messages: list[Message],
               topic: str | None = None) -> None: ...

    def delete(self, tenant: str, conversation_id: str) -> None: ...


class DeliveryRows(Protocol):
    """Webhook deliveries already handled (``Deliveries``, ``PgDeliveries``)."""

    def first_time(self, delivery_id: str, window_s: float) -> bool: ...

    def forget(self, delivery_id: str) -> None: ...


class ConnectionRows(Protocol):
    """Named provider connections (``ConnectionTable``, ``PgConnectionTable``)."""

    def add(self, cid: str, kind: str, provider: str, options: dict[str, Any],
            secrets: dict[str, Any]) -> StoredConnection: ...

    def get(self, cid: str) -> StoredConnection | None: ...

    def all(self) -> list[StoredConnection]: ...

    def delete(self, cid: str) -> bool: ...


class CatalogRows(Protocol):
    """Every row of a shared catalog as JSON and back, for its backup and restore
    (``PgCatalogRows``; the embedded catalog is backed up as a file instead)."""

    def dump(self) -> dict[str, list[dict[str, Any]]]: ...

    def is_empty(self) -> bool: ...

    def load(self, rows: dict[str, list[dict[str, Any]]],
             shards: dict[str, str]) -> dict[str, int]: ...
