"""Ingested sources of a collection: list them, read one, delete one with its state.

A source is what ingestion wrote (a file of a tree, an upload, a text, a URL);
``source_id`` may contain slashes (a file's path without its extension). Every
call sees only the caller's tenant: another tenant's source is a 404.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, Query

from ragline.api.deps import RL, Caller
from ragline.api.routing import ServiceRoute
from ragline.api.schemas import QUERY_INT_MAX
from ragline.api.schemas_out import SourceDeleted, SourceList, SourceOut, ok

# ?service= decides who serves these routes (api/routing.py)
router = APIRouter(tags=["sources"], route_class=ServiceRoute)


@router.get("/collections/{name}/sources", responses=ok(SourceList))
def list_sources(name: str, rl: RL, caller: Caller,
                 limit: int = Query(100, ge=0, le=QUERY_INT_MAX),
                 offset: int = Query(0, ge=0, le=QUERY_INT_MAX)) -> dict[str, Any]:
    """The caller's ingested sources of a collection, with their state and chunk counts."""
    sources, total = rl.documents.sources(caller, name, limit, offset)
    return {"sources": [asdict(s) for s in sources], "count": len(sources), "total": total}


@router.get("/collections/{name}/sources/{source_id:path}", responses=ok(SourceOut))
def get_source(name: str, source_id: str, rl: RL, caller: Caller) -> dict[str, Any]:
    """One source: its state, chunk ids and how many of them the store holds."""
    return asdict(rl.documents.source(caller, name, source_id))


@router.delete("/collections/{name}/sources/{source_id:path}", responses=ok(SourceDeleted))
def delete_source(name: str, source_id: str, rl: RL, caller: Caller) -> dict[str, Any]:
    """Delete a source's chunks and its ingestion state together."""
    n = rl.documents.delete_source(caller, name, source_id)
    return {"status": "deleted", "collection": name, "source_id": source_id,
            "count_deleted": n}
