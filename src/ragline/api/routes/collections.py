"""Collections: create, list, read, update metadata, delete (spec 000)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from fastapi.concurrency import run_in_threadpool

from ragline.api.deps import RL, Tenant
from ragline.api.schemas import CollectionCreate, MetadataUpdate
from ragline.core.types import CollectionInfo
from ragline.facade import Ragline

router = APIRouter(tags=["collections"])


def collection_body(rl: Ragline, info: CollectionInfo, tenant: str) -> dict[str, Any]:
    return {
        "name": info.name,
        "metadata": info.metadata,
        "dimension": info.dimension,
        "embedding_provider": info.embedding_provider,
        "embedding_model": info.embedding_model,
        "count": rl.store.count(info.shard, tenant, None) if info.dimension else 0,
        "created_at": info.created_at,
        "updated_at": info.updated_at,
    }


@router.post("/collections", status_code=201)
def create_collection(body: CollectionCreate, rl: RL, tenant: Tenant) -> dict[str, Any]:
    info = rl.collections.create(body.name, body.metadata, body.embedding_provider,
                                 body.embedding_model)
    return {"status": "created", **collection_body(rl, info, tenant)}


@router.get("/collections")
def list_collections(rl: RL, tenant: Tenant) -> dict[str, Any]:
    items = [collection_body(rl, c, tenant) for c in rl.collections.all()]
    return {"collections": items, "count": len(items)}


@router.get("/collections/{name}")
def get_collection(name: str, rl: RL, tenant: Tenant) -> dict[str, Any]:
    return collection_body(rl, rl.collections.get(name), tenant)


@router.put("/collections/{name}/metadata")
def update_metadata(
    name: str, body: MetadataUpdate, rl: RL, tenant: Tenant,
    merge: bool = Query(False, description="Merge into the existing metadata instead of "
                        "replacing it."),
) -> dict[str, Any]:
    info = rl.collections.update_metadata(name, body.metadata, merge)
    return {"status": "updated", "mode": "merge" if merge else "replace",
            **collection_body(rl, info, tenant)}


@router.delete("/collections/{name}")
async def delete_collection(name: str, rl: RL) -> dict[str, Any]:
    info = await run_in_threadpool(rl.collections.delete, name)
    return {"status": "deleted", "collection": info.name}
