"""``POST /rerank``: score documents against a query with the loaded cross-encoder (spec 000).

The body and messages follow the spec exactly because existing clients (the
Node.js providers) depend on them. Scoring is CPU-bound and can take hundreds
of milliseconds, so it runs in the thread pool and never blocks the event loop.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from ragline.api.deps import RL, Caller
from ragline.api.schemas_out import ok

router = APIRouter(tags=["rerank"])


class RerankDocument(BaseModel):
    """A candidate; extra fields are accepted and ignored so callers can send whole records."""

    model_config = ConfigDict(extra="ignore")

    id: str | int
    text: str


class RerankRequest(BaseModel):
    query: str
    documents: list[RerankDocument]
    top_k: int | None = Field(None, ge=1, description="Return only the best k after scoring all.")

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"query": "how do nodes talk?", "top_k": 1,
         "documents": [{"id": "a", "text": "Nodes publish messages on topics."},
                       {"id": "b", "text": "URDF describes a robot's joints."}]}]})


class RerankedDocument(BaseModel):
    id: str | int
    score: float
    original_rank: int = Field(description="1-based position in the request's documents.")


class RerankResponse(BaseModel):
    reranked: list[RerankedDocument]

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"reranked": [{"id": "a", "score": 0.91, "original_rank": 1}]}]})


@router.post("/rerank", response_model=RerankResponse, responses=ok(RerankResponse))
async def rerank(body: RerankRequest, rl: RL, caller: Caller) -> dict[str, Any]:
    """Score all documents, sort by score descending, cut to ``top_k``."""
    docs = [d.model_dump() for d in body.documents]
    return {"reranked": await run_in_threadpool(rl.search.rerank, caller, body.query, docs,
                                                body.top_k)}
