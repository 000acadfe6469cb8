"""Documents of a collection: add, list by metadata, get, delete, empty, distinct values."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query

from ragline.api.deps import RL, Tenant
from ragline.api.schemas import DocumentList, DocumentOut, DocumentsAdd, DocumentsDelete
from ragline.core.filters import Limits, parse_where, parse_where_json
from ragline.errors import DocumentNotFound, InvalidInput
from ragline.facade import Ragline
from ragline.services.collections import MSG_NOT_EXIST
from ragline.services.documents import DocumentInput

router = APIRouter(tags=["documents"])


def limits(rl: Ragline) -> Limits:
    s = rl.settings
    return Limits(s.filter_max_depth, s.filter_max_conditions, s.filter_max_in_values)


@router.post("/collections/{name}/documents")
def add_documents(name: str, body: DocumentsAdd, rl: RL, tenant: Tenant) -> dict[str, Any]:
    docs = [DocumentInput(d.text, d.metadata, d.embedding, d.id) for d in body.documents or []]
    ids = rl.documents.add(name, docs, tenant)
    return {"status": "success", "collection": name, "count": len(ids), "ids": ids}


@router.get("/collections/{name}/documents", response_model=DocumentList)
def list_documents(
    name: str, rl: RL, tenant: Tenant,
    where: str | None = Query(None, description="JSON metadata filter"),
    limit: int = Query(100, ge=0), offset: int = Query(0, ge=0),
) -> dict[str, Any]:
    rl.collections.get(name)  # 404 before 400, as the spec lists them
    node = parse_where_json(where, limits(rl))
    limit = min(limit, rl.settings.list_max_limit)
    page = rl.documents.list_page(name, tenant, node, limit, offset)
    docs = [DocumentOut(id=r.id, text=r.text, metadata=r.metadata) for r in page.records]
    return {"documents": docs, "count": len(docs), "total": page.total}


@router.delete("/collections/{name}/documents/all")
def empty_collection(name: str, rl: RL, tenant: Tenant) -> dict[str, Any]:
    n = rl.collections.empty(name, tenant)
    return {"status": "emptied", "collection": name, "count_deleted": n}


@router.delete("/collections/{name}/documents")
def delete_documents(
    name: str, body: DocumentsDelete, rl: RL, tenant: Tenant
) -> dict[str, Any]:
    node = parse_where(body.where, limits(rl)) if body.where is not None else None
    if body.ids is None and node is None:
        raise InvalidInput("Give 'ids' or a non-empty 'where' to choose the documents to delete")
    n = rl.documents.delete(name, tenant, body.ids, node)
    return {"status": "deleted", "collection": name, "count_deleted": n}


@router.get("/collections/{name}/documents/{doc_id:path}")
def get_document(name: str, doc_id: str, rl: RL, tenant: Tenant) -> dict[str, Any]:
    rec = rl.documents.get(name, tenant, doc_id)
    if rec is None:
        raise DocumentNotFound(f"Document '{doc_id}' not found in collection '{name}'")
    return {"id": rec.id, "text": rec.text, "metadata": rec.metadata}


@router.get("/collections/{name}/metadata-values")
def metadata_values(
    name: str, rl: RL, tenant: Tenant, field: str | None = Query(None)
) -> dict[str, Any]:
    if field is None or field.strip() == "":
        # checked after existence so a missing collection is still a 404
        rl.collections.catalog.get_collection(name, message=MSG_NOT_EXIST.format(name))
        raise InvalidInput("Query parameter 'field' is required")
    values = rl.documents.distinct(name, tenant, field)
    return {"field": field, "values": values, "count": len(values)}
