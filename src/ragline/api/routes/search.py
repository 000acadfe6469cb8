"""Search within a collection (``/collections/{name}/search``) and the book-style ``/search``.

Async because text queries are embedded through the micro-batcher; the store
work runs in worker threads. Everything but parsing and rendering happens in
``rl.search.query``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from ragline.api.deps import RL, Caller, Reader
from ragline.api.fast_json import FastJSONRoute
from ragline.api.routing import FastJSONServiceRoute
from ragline.api.schemas import BOOK_FILTERS, BookSearch, VectorSearch
from ragline.api.schemas_out import BookSearchResults, SearchResults, ok
from ragline.facade import SearchHit, SearchRequest, SearchResponse

router = APIRouter(tags=["search"], route_class=FastJSONRoute)
# collection-scoped, so ?service= decides who serves it (api/routing.py), like the
# collection and document routes
collection_router = APIRouter(tags=["search"], route_class=FastJSONServiceRoute)


def _request(body: VectorSearch, collection: str | None) -> SearchRequest:
    fields = body.model_dump(exclude=_NOT_FIELDS)
    # the model's fields, not hasattr: a missing attribute of a pydantic model raises
    # inside __getattr__, ~3 us for each of the book filters on every collection search
    declared = type(body).model_fields
    filters = {k: getattr(body, k) for k in BOOK_FILTERS if k in declared}
    return SearchRequest(collection=collection, filters=filters, **fields)


_NOT_FIELDS: set[str] = {*BOOK_FILTERS, "collection"}  # read only (pydantic wants a set)


def _hit(h: SearchHit) -> dict[str, Any]:
    item: dict[str, Any] = {"id": h.id, "text": h.text, "metadata": h.metadata,
                            "score": h.score}
    if h.relevance is not None:
        item["relevance"] = h.relevance
    if h.scores is not None:
        item["scores"] = h.scores
    if h.embedding is not None:
        item["embedding"] = h.embedding
    if h.shared:  # only on hits of the shared corpus
        item["shared"] = True
    item.update(h.context)
    if h.group is not None:
        item["group"] = [_hit(x) for x in h.group]
    return item


def render(res: SearchResponse) -> dict[str, Any]:
    results = [_hit(h) for h in res.hits]
    out: dict[str, Any] = {"results": results, "mode": res.mode,
                           "took_ms": round(res.took_ms, 2), "stages": res.stages}
    if res.warnings:
        out["warnings"] = res.warnings
    return out


@collection_router.post("/collections/{name}/search", responses=ok(SearchResults))
async def search(name: str, body: VectorSearch, rl: RL, caller: Caller) -> dict[str, Any]:
    """Dense, sparse or hybrid search over the caller's tenant's documents, with
    ``where`` filters, optional reranking, metadata boosts and context expansion."""
    return render(await rl.search.query(caller, _request(body, name)))


@router.post("/search", responses=ok(BookSearchResults))
async def default_search(body: BookSearch, rl: RL, caller: Reader) -> dict[str, Any]:
    """Spec 004's book search on the default (or named) collection with the book's
    filters ANDed with ``where``. Public for ``RAGLINE_PUBLIC_SEARCH_TENANT`` when set."""
    res = await rl.search.query(caller, _request(body, body.collection))
    return {**render(res), "collection": res.collection}
