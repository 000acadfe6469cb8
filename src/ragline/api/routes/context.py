"""Context expansion endpoints (spec 004 FR-016/017): ``/context/{id}`` and ``/lesson/{id}``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query

from ragline.api.deps import RL, Tenant
from ragline.api.routes.ingestion import default_collection
from ragline.services.expand import get_context, get_lesson

router = APIRouter(tags=["context"])

COLLECTION_HELP = "Collection (default: the configured default collection)."


@router.get("/context/{chunk_id}")
def context(chunk_id: str, rl: RL, tenant: Tenant,
            collection: str | None = Query(None, description=COLLECTION_HELP),
            window: int | None = Query(None, ge=1, le=20,
                                       description="Chunks on each side, returned as lists."),
            ) -> dict[str, Any]:
    info = rl.collections.get(collection or default_collection(rl))
    return get_context(rl.store, info, tenant, chunk_id, window)


@router.get("/lesson/{parent_doc_id:path}")
def lesson(parent_doc_id: str, rl: RL, tenant: Tenant,
           collection: str | None = Query(None, description=COLLECTION_HELP)) -> dict[str, Any]:
    info = rl.collections.get(collection or default_collection(rl))
    state = rl.ingest_state.source(info.name, info.shard, tenant, parent_doc_id)
    return get_lesson(rl.store, info, tenant, parent_doc_id,
                      state.chunk_ids if state and state.source_hash else None)
