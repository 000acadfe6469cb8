"""Health, info and the provider listing: aggregation over every service.

Both endpoints must answer even while collections are created, emptied or
deleted under them, so each per-collection figure that fails (a shard dropped
between listing and counting) is left out rather than failing the whole answer,
and no internal path or exception text reaches the body.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ragline import __version__
from ragline.core.tenancy import TenantScope
from ragline.core.types import CollectionInfo
from ragline.core.usage import UsageCache
from ragline.providers.base import Health
from ragline.providers.registry import registry
from ragline.providers.rerankers.base import Reranker
from ragline.providers.stores.base import VectorStore
from ragline.services.corpus.collections import CollectionService
from ragline.services.corpus.diskspace import DiskGuard
from ragline.services.corpus.embedders import EmbedderPool
from ragline.services.ingestion.indexing import IndexingService
from ragline.services.search.retrieval import RetrievalService

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HealthView:
    """Who asks ``GET /health``: anonymous (``visible`` None) or a user key, whose
    ``visible`` says which collections its tenant may read (the facade's access rule)."""

    visible: Callable[[CollectionInfo], bool] | None = None

    def scope(self, body: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {k: body[k] for k in ("status", "timestamp", "version")
                               if k in body}
        if "cross_encoder" in body:
            ce = dict(body["cross_encoder"])
            if ce.get("status") == "remote":  # the remote reranker's model names its URL
                ce["model"] = "ragline-remote"
            out["cross_encoder"] = ce
        if self.visible is None:
            return out
        store = body["store"]
        out["store"] = {"status": store["status"], "timestamp": store["timestamp"]}
        engine = (store.get("details") or {}).get("engine")
        if isinstance(engine, str):  # which features the console shows; not an address
            out["store"]["details"] = {"engine": engine}
        for key in ("collections", "collection_status", "catalog_error"):
            if key in body:
                out[key] = body[key]
        out["disk"] = {"writes_allowed": body["disk"]["writes_allowed"]}
        return out


class OperationsService:
    def __init__(self, data_dir: Path, store: VectorStore, collections: CollectionService,
                 embedders: EmbedderPool, retrieval: RetrievalService,
                 reranker: Callable[[], Reranker | None], disk: DiskGuard | None = None,
                 indexing: IndexingService | None = None,
                 catalog: dict[str, Any] | None = None) -> None:
        self.disk = disk or DiskGuard.unlimited()
        self.indexing = indexing
        self.data_dir = data_dir
        self.store = store
        self.collections = collections
        self.embedders = embedders
        self.retrieval = retrieval
        self.reranker = reranker
        self.catalog = catalog  # backend and schema version, for /info
        self.usage = UsageCache(data_dir)  # /health and /info: at most one walk per 5 s

    def health(self, view: HealthView | None = None) -> dict[str, Any]:
        """``view`` None: the whole answer (library, CLI, admins). Otherwise scoped
        (issue 32 item 4): an anonymous caller gets the status, version and reranker only;
        a user key also the store's status, its collections' status and whether writes are
        allowed, never a collection it may not read, a size or an address."""
        try:
            store = self.store.health()
        except Exception:
            log.exception("store health check failed")
            store = Health.now("down", error="store health check failed")
        body: dict[str, Any] = {
            "status": "healthy" if store.status == "ok" else "degraded",
            "timestamp": datetime.now(UTC).isoformat(),
            "version": __version__,
            "store": store.model_dump(),
        }
        try:
            cols = self.collections.all()
            if view is not None and view.visible is not None:
                cols = [c for c in cols if view.visible(c)]
            body["collections"] = len(cols)
            if view is None or view.visible is not None:  # not shown anonymously
                body["collection_status"] = [self._collection_status(c) for c in cols]
            body["storage_bytes"] = self.usage.get()
        except Exception:  # health must answer even when the catalog does not
            log.exception("catalog health check failed")
            body["status"] = "degraded"
            body["catalog_error"] = "the catalog could not be read (see the server log)"
        body["disk"] = self.disk.status()
        if not body["disk"]["writes_allowed"]:
            body["status"] = "degraded"  # reads go on; writes answer 507 (issue 10)
        reranker = self.reranker()
        if reranker is not None:
            body["cross_encoder"] = reranker.health_info()
        return body if view is None else view.scope(body)

    def _collection_status(self, c: CollectionInfo) -> dict[str, Any]:
        """Spec 004 US5-1's per-collection status: ``ok`` (the store holds it), ``empty``
        (nothing written yet) or ``error`` (the store could not say)."""
        try:
            status = "ok" if self.store.has_shard(c.shard) else "empty"
        except Exception as exc:
            log.info("health: collection %s: %s", c.name, type(exc).__name__)
            status = "error"
        return {"name": c.name, "status": status, "dimension": c.dimension}

    def info(self, tenant: TenantScope,
             visible: Callable[[CollectionInfo], bool] = lambda _: True,
             admin: bool = True) -> dict[str, Any]:
        """``admin`` False (a user key; issue 32 item 4): the caller's collections and its
        tenant's counts only; no sizes (they are server-wide), no cache or batching figures
        (they reflect other tenants' queries), no indexing or catalog internals."""
        cols = []
        total = 0
        for c in self.collections.all():
            if not visible(c):
                continue
            try:
                n = self.collections.count(c, tenant)
                size = self.collections.size_bytes(c) if admin else None
            except Exception as exc:  # emptied or deleted while we looked
                log.info("info: skipping collection %s: %s", c.name, type(exc).__name__)
                continue
            total += n
            col = {"name": c.name, "count": n, "dimension": c.dimension,
                   "size_bytes": size, "embedding_provider": c.embedding_provider,
                   "embedding_model": c.embedding_model}
            if not admin:
                del col["size_bytes"]
            cols.append(col)
        body: dict[str, Any] = {"version": __version__, "collections": cols,
                                "total_documents": total}
        if not admin:
            return {**body, "scope": "tenant"}
        return {**body, "scope": "server", "storage_bytes": self.usage.get(),
                **self._embedding_cache(),
                "search_batching": self.retrieval.batching_stats(),
                "indexing": self._indexing_stats(), "catalog": self.catalog}

    def _indexing_stats(self) -> dict[str, Any] | None:
        """Background index builds (issue 18); None when this store has none."""
        if self.indexing is None or self.indexing.store is None:
            return None
        try:
            return self.indexing.stats()
        except Exception:  # /info answers whatever a shard does meanwhile
            log.exception("indexing stats failed")
            return None

    def _embedding_cache(self) -> dict[str, Any]:
        """Per cache key (``connectionId:model``): hits, misses, size, batching and the
        collections that share it; plus the totals over every key."""
        per_key = self.embedders.stats()
        for c in self.collections.all():
            if not c.embedding_provider or not self.embedders.known(c.embedding_provider):
                continue
            loaded = self.embedders.loaded(c.embedding_provider, c.embedding_model)
            if loaded is not None and loaded.cache_key in per_key:
                per_key[loaded.cache_key].setdefault("collections", []).append(c.name)
        hits = sum(int(e.get("hits", 0)) for e in per_key.values())
        misses = sum(int(e.get("misses", 0)) for e in per_key.values())
        return {"embedding_cache": per_key,
                "embedding_cache_totals": {
                    "hits": hits, "misses": misses,
                    "hit_rate": round(hits / (hits + misses), 4) if hits + misses else None}}

    @staticmethod
    def providers() -> dict[str, Any]:
        return registry.describe()
