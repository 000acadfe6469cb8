"""Store connections served as facades of their own (``?service=ID``, issue 13).

A connection whose provider is a collection store (pgvector, a Qdrant or Chroma
server: ``[connections.ID]`` in the config file or ``POST /api/connections``) is
served by a second :class:`~ragline.facade.Ragline` built on first use: the same
use cases, access rules and settings as this server's, with

* the connection's store instance (the one its health check uses), not owned: it
  is closed with the connection;
* a catalog of its own, so collection names, metadata and embedding settings of
  that store survive a restart: ``<data_dir>/connections/<id>/catalog.sqlite3``
  with the embedded catalog, or a PostgreSQL schema of its own
  (``<db_schema>_c_<id>_<hash>``) in the same database with
  ``RAGLINE_CATALOG=postgres``, so every process of a scaled-out setup sees the same
  collections;
* this server's embedder pool and reranker, shared (one loaded model and one cache
  per ``connectionId:model``, whichever store the collection is on).

Routes stay unchanged: the ``?service=`` dependency hands them that facade instead
of this server's, and the caller (authenticated here) is passed as it is, so its
tenant and role apply exactly as for ``local``.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from ragline.errors import ServiceUnavailable
from ragline.providers.stores.base import VectorStore
from ragline.services.corpus.embedders import EmbedderPool
from ragline.services.corpus.slots import RerankerSlot
from ragline.settings import Settings

CONNECTIONS_DIR = "connections"


@dataclass(frozen=True)
class Borrowed:
    """What a connection's facade takes from the server's instead of building it."""

    connection: str
    store: VectorStore
    embedders: EmbedderPool
    reranker: RerankerSlot  # the server's: one loaded model


def connection_settings(settings: Settings, cid: str, provider: str) -> Settings:
    """The server's settings for the facade of connection ``cid`` (whose store provider
    is ``provider``): its own catalog (a directory or a PostgreSQL schema), no
    connections of its own; everything else (limits, embedders, search) as the server's."""
    update: dict[str, Any] = {
        "data_dir": settings.data_dir / CONNECTIONS_DIR / cid,
        "store": provider, "store_options": {}, "connections": {},
    }
    if settings.catalog == "postgres":
        update["catalog_options"] = settings.catalog_options.model_copy(
            update={"db_schema": connection_schema(settings.catalog_options.db_schema, cid)})
    return settings.model_copy(update=update)


def connection_schema(base: str, cid: str) -> str:
    """A PostgreSQL schema name for connection ``cid``'s catalog: readable, unique per id
    (ids differ in case and punctuation, schema names may not), at most 63 bytes."""
    digest = hashlib.sha256(cid.encode()).hexdigest()[:8]
    slug = re.sub(r"[^a-z0-9_]", "_", cid.lower())
    head = f"{base[:40]}_c_"
    return head + slug[: 63 - len(head) - len(digest) - 1] + "_" + digest


class Startable(Protocol):
    def start(self) -> Any: ...

    def close(self) -> None: ...


F = TypeVar("F", bound=Startable)


class RoutedFacades(Generic[F]):
    """One started facade per store connection, built on first use, closed on
    :meth:`drop` (the connection was deleted) or :meth:`close` (the server stops).

    A facade starts under a lock of its connection only: a slow or unreachable store
    delays the first requests to that connection, not those to the others."""

    def __init__(self, build: Callable[[str], F]) -> None:
        self._build = build
        self._facades: dict[str, F] = {}
        self._starting: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        self._generation = 0  # bumped by close(): a facade started across it is not kept

    def get(self, cid: str) -> F:
        with self._lock:
            facade = self._facades.get(cid)
            if facade is not None:
                return facade
            starting = self._starting.setdefault(cid, threading.Lock())
            generation = self._generation
        with starting:  # one start per connection, even for concurrent first requests
            with self._lock:
                facade = self._facades.get(cid)
            if facade is not None:
                return facade
            facade = self._build(cid)
            facade.start()
            with self._lock:
                if generation == self._generation:
                    self._facades[cid] = facade
                    return facade
            facade.close()
            raise ServiceUnavailable("the server is shutting down")

    def drop(self, cid: str) -> None:
        with self._lock:
            facade = self._facades.pop(cid, None)
        if facade is not None:
            facade.close()

    def close(self) -> None:
        with self._lock:
            facades, self._facades = list(self._facades.values()), {}
            self._generation += 1
        for facade in facades:
            facade.close()
