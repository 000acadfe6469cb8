"""Collections: create, list, read, update metadata, delete (spec 000)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, Query
from fastapi.concurrency import run_in_threadpool

from ragline.api.deps import RL, Caller
from ragline.api.routing import ServiceRoute
from ragline.api.schemas import CollectionCreate, MetadataUpdate
from ragline.api.schemas_out import (
    CollectionCreated,
    CollectionDeleted,
    CollectionList,
    CollectionOut,
    CollectionUpdated,
    ok,
)

# ?service= decides who serves these routes (api/routing.py)
router = APIRouter(tags=["collections"], route_class=ServiceRoute)


@router.post("/collections", status_code=201,
             responses=ok(CollectionCreated, 201, "The collection, created."))
def create_collection(body: CollectionCreate, rl: RL, caller: Caller) -> dict[str, Any]:
    """Create a collection (admin keys). ``embed`` opts in to server-side embedding;
    spec 000's ``embedding_provider``/``embedding_model`` are kept as metadata only."""
    view = rl.collections.create(caller, body.name, body.metadata, body.embedding_provider,
                                body.embedding_model,
                                body.embed.model_dump() if body.embed else None)
    return {"status": "created", **asdict(view)}


@router.get("/collections", responses=ok(CollectionList))
def list_collections(rl: RL, caller: Caller) -> dict[str, Any]:
    """Collections the caller may use (all, unless a collection's metadata lists
    ``tenants``), with the caller's tenant's document counts."""
    items = [asdict(c) for c in rl.collections.all(caller)]
    return {"collections": items, "count": len(items)}


@router.get("/collections/{name}", responses=ok(CollectionOut))
def get_collection(name: str, rl: RL, caller: Caller) -> dict[str, Any]:
    """One collection, with the caller's tenant's document count."""
    return asdict(rl.collections.get(caller, name))


@router.put("/collections/{name}/metadata", responses=ok(CollectionUpdated))
def update_metadata(
    name: str, body: MetadataUpdate, rl: RL, caller: Caller,
    merge: bool = Query(False, description="Merge into the existing metadata instead of "
                        "replacing it."),
) -> dict[str, Any]:
    """Replace (default) or merge (``?merge=true``) a collection's metadata (admin keys)."""
    view = rl.collections.update_metadata(caller, name, body.metadata, merge)
    return {"status": "updated", "mode": "merge" if merge else "replace", **asdict(view)}


@router.delete("/collections/{name}", responses=ok(CollectionDeleted))
async def delete_collection(name: str, rl: RL, caller: Caller) -> dict[str, Any]:
    """Delete a collection and every tenant's documents in it (admin keys)."""
    deleted = await run_in_threadpool(rl.collections.delete, caller, name)
    return {"status": "deleted", "collection": deleted}
