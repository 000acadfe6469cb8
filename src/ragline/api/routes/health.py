"""Health and info (the provider listing: routes/connections.py)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from ragline.api.deps import RL, Caller
from ragline.api.schemas_out import HealthOut, InfoOut, ok

router = APIRouter(tags=["operations"])


@router.get("/health", responses=ok(HealthOut))
def health(rl: RL) -> dict[str, Any]:
    """Liveness and readiness for load balancers and people: store, catalog, free disk
    (``writes_allowed``) and the loaded reranker. No key needed; ``degraded`` while writes
    are refused or the catalog cannot be read."""
    return rl.health()


@router.get("/info", responses=ok(InfoOut))
def info(rl: RL, caller: Caller) -> dict[str, Any]:
    """Collections the caller may use with its tenant's document counts and sizes, plus
    embedding-cache and search-batching figures."""
    return rl.info(caller)
