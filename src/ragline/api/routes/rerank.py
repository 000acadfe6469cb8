"""``POST /rerank``: score documents against a query with the loaded cross-encoder (spec 000).

The body and messages follow the spec exactly because existing clients (the
Node.js providers) depend on them. Scoring is CPU-bound and can take hundreds
of milliseconds, so it runs in the thread pool and never blocks the event loop.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from ragline.errors import ModelNotLoaded, RaglineError
from ragline.providers.rerankers.cross_encoder import RerankError

log = logging.getLogger(__name__)

router = APIRouter(tags=["rerank"])

NOT_LOADED = "Cross-encoder not loaded. Start server with --cross-encoder flag."


class RerankDocument(BaseModel):
    """A candidate; extra fields are accepted and ignored so callers can send whole records."""

    model_config = ConfigDict(extra="ignore")

    id: str | int
    text: str


class RerankRequest(BaseModel):
    query: str
    documents: list[RerankDocument]
    top_k: int | None = Field(None, ge=1, description="Return only the best k after scoring all.")


class RerankedDocument(BaseModel):
    id: str | int
    score: float
    original_rank: int = Field(description="1-based position in the request's documents.")


class RerankResponse(BaseModel):
    reranked: list[RerankedDocument]


@router.post("/rerank", response_model=RerankResponse)
async def rerank(body: RerankRequest, request: Request) -> dict[str, Any]:
    """Score all documents, sort by score descending, cut to ``top_k``."""
    reranker = getattr(request.app.state.ragline, "cross_encoder", None)
    if reranker is None:
        raise ModelNotLoaded(NOT_LOADED)
    if not body.documents:
        return {"reranked": []}
    docs = [d.model_dump() for d in body.documents]
    try:
        reranked = await run_in_threadpool(reranker.rerank, body.query, docs, body.top_k)
    except RaglineError:
        raise
    except Exception as exc:  # a reranker that does not wrap its own errors
        log.exception("rerank failed")
        raise RerankError(f"Reranking failed: {type(exc).__name__}: {exc}") from exc
    return {"reranked": reranked}
