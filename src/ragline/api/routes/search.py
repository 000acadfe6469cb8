"""Similarity search within a collection."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from ragline.api.deps import RL, Tenant
from ragline.api.routes.documents import limits
from ragline.api.schemas import VectorSearch
from ragline.core.filters import parse_where
from ragline.errors import InvalidInput

router = APIRouter(tags=["search"])


@router.post("/collections/{name}/search")
def search(name: str, body: VectorSearch, rl: RL, tenant: Tenant) -> dict[str, Any]:
    rl.collections.get(name)
    node = parse_where(body.where, limits(rl))
    if body.embedding is None:
        raise InvalidInput("Give 'embedding' (a vector) to search this collection")
    hits = rl.documents.search_vector(name, tenant, body.embedding, node, body.limit,
                                      body.include_embeddings, body.score_threshold)
    results = []
    for h in hits:
        item: dict[str, Any] = {"id": h.id, "text": h.text, "metadata": h.metadata,
                                "score": h.score}
        if body.include_embeddings and h.embedding is not None:
            item["embedding"] = [float(x) for x in h.embedding]
        results.append(item)
    return {"results": results}
