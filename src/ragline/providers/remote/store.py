"""``ragline-remote`` store: the shards of this ragline kept in another ragline server.

Each shard is a collection of the remote server named ``collection_prefix + key``
(its dimension is kept in that collection's metadata); each tenant is the remote's
``X-Ragline-Tenant``, so tenant isolation is the remote's own (the key must be an
admin key there). Filters travel as ``where`` objects, which the remote parses
with the same language. Search ranks by the remote's dense, sparse or hybrid
search; BM25 is the remote's own.

Limits, said plainly: every call is an HTTP request (there is no batching
across queries of a ``query_batch``), ``get(..., with_vectors=True)`` returns
no vectors (the remote API does not hand stored embeddings out by id, so
ingestion re-embeds unchanged chunks), and ``size_bytes`` is what the remote's
``/info`` reports.

The same class is what a named connection of provider ``ragline-remote`` builds, so
one connection is both a store and a ``?service=ID`` pass-through target:
:meth:`RemoteRaglineStore.http_target` says where ``ragline.services.connections.routing``
forwards collection requests unchanged (with the connection's key and the caller's
tenant and role), and :meth:`RemoteRaglineStore.health` reports the server's own
details (collection count, storage size, version, cross-encoder) and whether the key
is accepted, whichever way the connection is used.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, ClassVar, TypeVar

import httpx
import numpy as np

from ragline.client import Client, models
from ragline.core.filters import Node, to_where
from ragline.core.tenancy import SHARED, TenantScope, own_tenant
from ragline.core.types import Page, Record, Scalar, ScoredRecord, SearchMode, StoreQuery
from ragline.errors import (
    CollectionExists,
    CollectionNotFound,
    InvalidInput,
    NotFound,
    RaglineError,
    ServerUnreachable,
    StoreUnavailable,
)
from ragline.providers.base import Health, ProviderConfig
from ragline.providers.remote.config import (
    HttpTarget,
    RemoteRaglineConfig,
    client_for,
    http_target,
    safe_url,
    schema,
)

T = TypeVar("T")
DIM_KEY = "ragline_shard_dimension"
BATCH = 256


class RemoteRaglineStore:
    name: ClassVar[str] = "ragline-remote"
    kind: ClassVar[str] = "store"
    Config: ClassVar[type[ProviderConfig]] = RemoteRaglineConfig
    CAPABILITIES: ClassVar[list[str]] = [
        "collections", "search", "embeddings", "metadata_filtering", "hybrid", "facets",
        "persistence", "passthrough",
    ]

    def __init__(self, config: RemoteRaglineConfig) -> None:
        self.config = config
        self.client = client_for(config)

    def _name(self, key: str) -> str:
        return self.config.collection_prefix + key

    def _as(self, tenant: TenantScope) -> Client:
        """The remote as ``tenant``; a reader's scope (own tenant and the shared corpus)
        is the remote's own reader of that tenant, which merges the shared corpus itself.
        A single-tenant read of another tenant than ``*`` leaves the shared records out
        (``get``, ``count``); its ``list_page`` and ``distinct`` include them
        (docs/providers.md)."""
        return self.client.for_tenant(own_tenant(tenant))

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """An unreachable remote is an unavailable store (503); other errors of the remote
        are the caller's own (a bad filter stays a 400)."""
        try:
            yield
        except ServerUnreachable as exc:
            raise StoreUnavailable(f"Remote store unavailable: {exc.message}") from exc

    def _call(self, fn: Callable[[], T]) -> T:
        with self._errors():
            return fn()

    # -- shards ---------------------------------------------------------------------------
    def create_shard(self, key: str, dimension: int) -> None:
        with self._errors():
            try:
                self.client.create_collection(self._name(key), {DIM_KEY: dimension})
            except CollectionExists:
                have = self.client.get_collection(self._name(key)).metadata.get(DIM_KEY)
                if have != dimension:
                    raise InvalidInput(f"Shard '{key}' exists with dimension {have}, "
                                       f"not {dimension}") from None

    def has_shard(self, key: str) -> bool:
        with self._errors():
            try:
                self.client.get_collection(self._name(key))
            except CollectionNotFound:
                return False
            return True

    def shard_keys(self) -> list[str]:
        prefix = self.config.collection_prefix
        cols = self._call(self.client.list_collections)
        return [c.name[len(prefix):] for c in cols if c.name.startswith(prefix)]

    def drop_shard(self, key: str) -> None:
        with self._errors(), suppress(CollectionNotFound):
            self.client.delete_collection(self._name(key))

    # -- records --------------------------------------------------------------------------
    def upsert_parts(self, key: str, parts: Iterable[list[Record]]) -> None:
        self.upsert(key, [r for part in parts for r in part])  # nothing to overlap here

    def upsert(self, key: str, records: list[Record]) -> None:
        by_tenant: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in records:
            by_tenant[r.tenant].append({
                "id": r.id, "text": r.text, "metadata": dict(r.metadata),
                "embedding": [float(x) for x in r.embedding] if r.embedding is not None
                else None})
        with self._errors():
            for tenant, docs in by_tenant.items():
                for i in range(0, len(docs), BATCH):
                    self._as(tenant).add_documents(self._name(key), docs[i:i + BATCH])

    def get(self, key: str, tenant: TenantScope, ids: list[str],
            with_vectors: bool = False) -> list[Record]:
        out: list[Record] = []
        remote = self._as(tenant)
        with self._errors():
            for doc_id in ids:
                try:
                    d = remote.get_document(self._name(key), doc_id)
                except NotFound:  # no such document, or no such shard
                    continue
                if d.shared and isinstance(tenant, str) and tenant != SHARED:
                    continue  # an exact read of another tenant
                out.append(Record(d.id, d.text, d.metadata, None,
                                  SHARED if d.shared else own_tenant(tenant)))
        return out

    def delete_ids(self, key: str, tenant: str, ids: list[str]) -> int:
        if not ids:
            return 0
        return self._call(lambda: self._as(tenant).delete_documents(
            self._name(key), ids=ids).count_deleted)

    def delete_where(self, key: str, tenant: str, where: Node | None) -> int:
        remote = self._as(tenant)
        if where is None:
            return self._call(lambda: remote.empty_collection(self._name(key)).count_deleted)
        return self._call(lambda: remote.delete_documents(
            self._name(key), where=to_where(where)).count_deleted)

    def list_page(self, key: str, tenant: TenantScope, where: Node | None, limit: int,
                  offset: int) -> Page:
        page = self._call(lambda: self._as(tenant).list_documents(
            self._name(key), where=to_where(where) if where else None, limit=limit,
            offset=offset))
        owner = own_tenant(tenant)
        return Page([Record(d.id, d.text, d.metadata, None, SHARED if d.shared else owner)
                     for d in page.documents], page.total)

    def count(self, key: str, tenant: TenantScope, where: Node | None) -> int:
        n = self._count(key, tenant, where)
        if isinstance(tenant, str) and tenant != SHARED:  # the remote's reader adds these
            n -= self._count(key, SHARED, where)
        return n

    def _count(self, key: str, tenant: TenantScope, where: Node | None) -> int:
        if where is None:
            return self._call(lambda: self._as(tenant).get_collection(self._name(key)).count)
        return self.list_page(key, tenant, where, 0, 0).total

    def has_text_index(self, key: str) -> bool:
        return True

    def query_batch(self, key: str, queries: list[StoreQuery]) -> list[list[ScoredRecord]]:
        return [self._query(key, q) for q in queries]

    def _query(self, key: str, q: StoreQuery) -> list[ScoredRecord]:
        if q.mode == SearchMode.SPARSE and not q.text.strip():
            return []  # no words, nothing ranks (as every store answers)
        options: dict[str, Any] = {"include_embeddings": q.with_vectors}
        if q.mode != SearchMode.DENSE:
            options.update(fusion=q.fusion.value, rrf_k=q.rrf_k, candidates=q.candidates)
        if q.score_threshold is not None:
            options["score_threshold"] = q.score_threshold
        embedding = [float(x) for x in q.vector] if q.vector is not None and \
            q.mode != SearchMode.SPARSE else None
        with self._errors():
            try:
                found = self._as(q.tenant).search(
                    self._name(key), q.text.strip() or None, embedding=embedding, limit=q.limit,
                    where=to_where(q.where) if q.where else None, mode=q.mode.value,
                    **options)
            except CollectionNotFound:
                return []
        return [_scored(h) for h in found.results]

    def distinct(self, key: str, tenant: TenantScope, field: str) -> list[Scalar]:
        return self._call(lambda: list(self._as(tenant).metadata_values(
            self._name(key), field).values))

    def size_bytes(self, key: str) -> int:
        info = self._call(self.client.info)
        for c in info.collections:
            if c.get("name") == self._name(key):
                return int(c.get("size_bytes") or 0)
        return 0

    def optimize(self, key: str) -> bool:
        return False  # the remote server optimizes its own collections

    # -- provider surface -----------------------------------------------------------------
    @classmethod
    def connection_schema(cls) -> dict[str, Any]:
        return schema()

    def capabilities(self) -> list[str]:
        return list(self.CAPABILITIES)

    def http_target(self) -> HttpTarget:
        """Where ``?service=ID`` forwards collection requests for a connection of this
        provider: the server's URL, the connection's key, timeout and TLS verification."""
        return http_target(self.config)

    def health(self) -> Health:
        """``GET /health`` of the server (status, version, collection count, storage size,
        cross-encoder) and whether the key is accepted (``GET /info``): ``down`` when it
        cannot be reached or answers an error, ``degraded`` when it refuses the key or is
        not healthy itself."""
        details: dict[str, Any] = {"engine": "ragline-remote",
                                   "url": safe_url(self.client.base_url)}
        t0 = time.perf_counter()
        try:
            answer: models.Health = self.client.health()
        except ServerUnreachable as exc:
            return Health.now("down", details, error=f"unreachable: {_unreachable(exc)}")
        except RaglineError as exc:
            status = exc.details.get("status")
            return Health.now("down", details, error=f"GET /health answered {status}"
                              if status else f"GET /health failed: {exc.code}")
        details.update(latency_ms=round((time.perf_counter() - t0) * 1000, 2),
                       remote_status=answer.status, version=answer.version,
                       collection_count=answer.collections,
                       storage_bytes=answer.storage_bytes,
                       cross_encoder=answer.cross_encoder)
        try:
            self.client.info()
            details["key_accepted"] = True
        except RaglineError as exc:
            if exc.details.get("status") not in (401, 403):
                return Health.now("degraded", details, error=f"GET /info failed: {exc.code}")
            details["key_accepted"] = False
            return Health.now("degraded", details, error="the API key was refused")
        return Health.now("ok" if answer.status == "healthy" else "degraded", details)

    def close(self) -> None:
        self.client.close()


def _scored(h: models.SearchHit) -> ScoredRecord:
    vector = None if h.embedding is None else np.asarray(h.embedding, dtype=np.float32)
    return ScoredRecord(h.id, h.text, h.metadata, float(h.score or 0.0), vector,
                        SHARED if h.shared else None)


def _unreachable(exc: ServerUnreachable) -> str:
    """Why the server could not be reached, without its URL (which may carry credentials)."""
    cause = exc.__cause__
    what = "timed out" if isinstance(cause, httpx.TimeoutException) else "could not be reached"
    return f"the server {what} ({type(cause).__name__ if cause else 'error'})"
