"""Health, info and the provider registry listing."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter

from ragline import __version__
from ragline.api.deps import RL, Tenant
from ragline.providers.registry import registry
from ragline.services.status import collection_stats

log = logging.getLogger(__name__)

router = APIRouter(tags=["operations"])


@router.get("/health")
def health(rl: RL) -> dict[str, Any]:
    store = rl.store.health()
    body: dict[str, Any] = {
        "status": "healthy" if store.status == "ok" else "degraded",
        "timestamp": datetime.now(UTC).isoformat(),
        "version": __version__,
        "store": store.model_dump(),
    }
    try:
        body["collections"] = len(rl.collections.all())
        body["storage_bytes"] = rl.storage_bytes()
    except Exception as exc:  # health must answer even when the catalog does not
        body["status"] = "degraded"
        body["catalog_error"] = type(exc).__name__  # the text can name paths
        log.warning("health: catalog check failed: %s", exc)
    body["disk"] = rl.disk.status()
    if not body["disk"]["writes_allowed"]:
        body["status"] = "degraded"  # reads go on; writes answer 507
    if rl.cross_encoder is not None:
        body["cross_encoder"] = rl.cross_encoder.health_info()
    return body


@router.get("/info")
def info(rl: RL, tenant: Tenant) -> dict[str, Any]:
    cols = collection_stats(rl.collections, rl.store, tenant)  # never 500 on races
    total = sum(c["count"] for c in cols)
    return {"version": __version__, "collections": cols, "total_documents": total,
            "storage_bytes": rl.storage_bytes(), "embedding_cache": rl.embedders.stats(),
            "search_batching": rl.retrieval.batching_stats()}


@router.get("/api/providers")
def providers() -> dict[str, Any]:
    return registry.describe()
