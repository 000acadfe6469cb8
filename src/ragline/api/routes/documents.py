"""Documents of a collection: add, list by metadata, get, delete, empty, distinct values."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query

from ragline.api.deps import RL, Caller
from ragline.api.routing import FastJSONServiceRoute
from ragline.api.schemas import (
    QUERY_INT_MAX,
    DocumentList,
    DocumentOut,
    DocumentsAdd,
    DocumentsDelete,
)
from ragline.api.schemas_out import (
    CollectionEmptied,
    DocumentsAdded,
    DocumentsDeleted,
    MetadataValues,
    ok,
)
from ragline.core.tenancy import SHARED
from ragline.core.types import Record
from ragline.facade import DocumentInput

# ?service= decides who serves these routes (api/routing.py)
router = APIRouter(tags=["documents"], route_class=FastJSONServiceRoute)


@router.post("/collections/{name}/documents", responses=ok(DocumentsAdded))
def add_documents(name: str, body: DocumentsAdd, rl: RL, caller: Caller) -> dict[str, Any]:
    """Upsert documents into the caller's tenant: pre-computed ``embedding`` each, or text
    only when the collection embeds server-side (``embed``). Whole or nothing."""
    docs = [DocumentInput(d.text, d.metadata, d.embedding, d.id) for d in body.documents or []]
    ids = rl.documents.add(caller, name, docs)
    return {"status": "success", "collection": name, "count": len(ids), "ids": ids}


@router.get("/collections/{name}/documents", response_model=DocumentList,
            response_model_exclude_unset=True, responses=ok(DocumentList))
def list_documents(
    name: str, rl: RL, caller: Caller,
    where: str | None = Query(None, description="JSON metadata filter"),
    limit: int = Query(100, ge=0, le=QUERY_INT_MAX),
    offset: int = Query(0, ge=0, le=QUERY_INT_MAX),
) -> dict[str, Any]:
    """A page of the caller's tenant's documents and the shared corpus's, optionally
    filtered by ``where`` (JSON)."""
    page = rl.documents.page(caller, name, where, limit, offset)
    docs = [_document(r) for r in page.records]
    return {"documents": docs, "count": len(docs), "total": page.total}


def _document(rec: Record) -> dict[str, Any]:
    """A document as answered: ``shared`` only on a record of the shared corpus."""
    out = {"id": rec.id, "text": rec.text, "metadata": rec.metadata}
    return {**out, "shared": True} if rec.tenant == SHARED else out


@router.delete("/collections/{name}/documents/all", responses=ok(CollectionEmptied))
def empty_collection(name: str, rl: RL, caller: Caller) -> dict[str, Any]:
    """Delete the caller's tenant's documents (a user key), or every document (an admin
    key naming no tenant). Atomic: nothing is half-deleted."""
    n = rl.collections.empty(caller, name)
    return {"status": "emptied", "collection": name, "count_deleted": n}


@router.delete("/collections/{name}/documents", responses=ok(DocumentsDeleted))
def delete_documents(
    name: str, body: DocumentsDelete, rl: RL, caller: Caller
) -> dict[str, Any]:
    """Delete the caller's tenant's documents by ``ids`` and/or ``where``."""
    n = rl.documents.delete(caller, name, body.ids, body.where)
    return {"status": "deleted", "collection": name, "count_deleted": n}


@router.get("/collections/{name}/documents/{doc_id:path}", responses=ok(DocumentOut))
def get_document(name: str, doc_id: str, rl: RL, caller: Caller) -> dict[str, Any]:
    """One document of the caller's tenant or of the shared corpus (the caller's own first
    when both have the id; another tenant's id is a 404)."""
    return _document(rl.documents.get(caller, name, doc_id))


@router.get("/collections/{name}/metadata-values", responses=ok(MetadataValues))
def metadata_values(
    name: str, rl: RL, caller: Caller, field: str | None = Query(None)
) -> dict[str, Any]:
    """Distinct values of a metadata ``field`` over the caller's tenant's documents."""
    values = rl.documents.metadata_values(caller, name, field)
    return {"field": field, "values": values, "count": len(values)}
