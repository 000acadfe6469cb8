"""Context expansion endpoints: ``/context/{id}`` (neighbours) and ``/lesson/{id}`` (a source)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query

from ragline.api.deps import RL, Reader
from ragline.api.schemas_out import ContextOut, LessonOut, ok

router = APIRouter(tags=["context"])

COLLECTION_HELP = "Collection (default: the configured default collection)."


@router.get("/context/{chunk_id}", responses=ok(ContextOut))
def context(chunk_id: str, rl: RL, caller: Reader,
            collection: str | None = Query(None, description=COLLECTION_HELP),
            window: int | None = Query(None, ge=1, le=20,
                                       description="Chunks on each side, returned as lists."),
            ) -> dict[str, Any]:
    """A chunk with its previous and next chunks (``window``: that many on each side, as
    lists). Public for the public-search tenant when configured."""
    return rl.search.context(caller, chunk_id, collection, window)


@router.get("/lesson/{parent_doc_id:path}", responses=ok(LessonOut))
def lesson(parent_doc_id: str, rl: RL, caller: Reader,
           collection: str | None = Query(None, description=COLLECTION_HELP)) -> dict[str, Any]:
    """Every chunk of a source in order, with the joined text. Public for the public-search
    tenant when configured."""
    return rl.search.lesson(caller, parent_doc_id, collection)
