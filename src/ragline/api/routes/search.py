"""Search within a collection (``/collections/{name}/search``) and the book-style ``/search``.

These endpoints are ``async`` because text queries are embedded through the
micro-batcher; the store work itself runs in worker threads.
"""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from fastapi import APIRouter

from ragline.api.deps import RL, Tenant
from ragline.api.routes.documents import limits
from ragline.api.schemas import BookSearch, VectorSearch
from ragline.core.filters import Node, parse_where
from ragline.errors import InvalidInput
from ragline.facade import Ragline
from ragline.services.expand import expand_hits
from ragline.services.retrieval import SearchQuery, SearchResult

router = APIRouter(tags=["search"])


def render(result: SearchResult, include_embeddings: bool) -> dict[str, Any]:
    results = []
    for h in result.hits:
        item: dict[str, Any] = {"id": h.id, "text": h.text, "metadata": h.metadata,
                                "score": h.score}
        if include_embeddings and h.embedding is not None:
            item["embedding"] = [float(x) for x in h.embedding]
        results.append(item)
    out = {"results": results, "mode": result.mode, "took_ms": round(result.took_ms, 2),
           "stages": result.stages}
    if result.warnings:
        out["warnings"] = result.warnings
    return out


async def run_search(rl: Ragline, name: str, tenant: str, body: VectorSearch,
                     where: Node | None) -> dict[str, Any]:
    q = SearchQuery(collection=name, tenant=tenant, query=body.query, embedding=body.embedding,
                    mode=body.mode, where=where, limit=body.limit,
                    score_threshold=body.score_threshold,
                    include_embeddings=body.include_embeddings, rrf_k=body.rrf_k,
                    candidates=body.candidates, fusion=body.fusion, rerank=body.rerank,
                    rerank_candidates=body.rerank_candidates, boost=body.boost)
    result = await rl.retrieval.search(q)
    out = render(result, body.include_embeddings)
    if body.expand != "none":
        info = rl.collections.get(name)
        extra = await anyio.to_thread.run_sync(expand_hits, rl.store, info, tenant,
                                               result.hits, body.expand)
        for item, added in zip(out["results"], extra, strict=True):
            item.update(added)
    return out


@router.post("/collections/{name}/search")
async def search(name: str, body: VectorSearch, rl: RL, tenant: Tenant) -> dict[str, Any]:
    where = parse_where(body.where, limits(rl))
    return await run_search(rl, name, tenant, body, where)


def book_filters(body: BookSearch) -> dict[str, Any] | None:
    """Spec 004's search parameters as a ``where`` object (ANDed with ``where``)."""
    parts: list[dict[str, Any]] = [body.where] if body.where else []
    if body.hardware_tier is not None:
        parts.append({"hardware_tier": {"$lte": body.hardware_tier}})
    if body.module is not None:
        parts.append({"module": body.module})
    if body.chapter_min is not None:
        parts.append({"chapter": {"$gte": body.chapter_min}})
    if body.chapter_max is not None:
        parts.append({"chapter": {"$lte": body.chapter_max}})
    if body.lesson is not None:
        parts.append({"lesson": body.lesson})
    if body.proficiency_levels:
        parts.append({"proficiency_level": {"$in": body.proficiency_levels}})
    if body.layer is not None:
        parts.append({"layer": body.layer})
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else {"$and": parts}


@router.post("/search")
async def default_search(body: BookSearch, rl: RL, tenant: Tenant) -> dict[str, Any]:
    name = body.collection or rl.settings.default_collection
    if not name:
        raise InvalidInput(
            "No collection given and no default collection configured "
            "(set RAGLINE_DEFAULT_COLLECTION or pass 'collection')"
        )
    where = parse_where(book_filters(body), limits(rl))
    out = await run_search(rl, name, tenant, body, where)
    out["collection"] = name
    return out
