"""Health and info (the provider listing: routes/connections.py)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from ragline.api.deps import RL, Caller, MaybeCaller
from ragline.api.schemas_ops import HealthOut, InfoOut
from ragline.api.schemas_out import ok

router = APIRouter(tags=["operations"])


@router.get("/health", responses=ok(HealthOut))
def health(rl: RL, caller: MaybeCaller) -> dict[str, Any]:
    """Liveness and readiness for load balancers and people. No key needed: without one,
    the status, version and loaded reranker only. With a user key, also the store's
    status, the status of each collection its tenant may read and whether writes are
    allowed; with an admin key, everything (store details, sizes, free disk).
    ``degraded`` while the store is down, writes are refused or the catalog cannot be
    read."""
    return rl.admin.health(caller, anonymous=caller is None)


@router.get("/info", responses=ok(InfoOut))
def info(rl: RL, caller: Caller) -> dict[str, Any]:
    """Collections the caller may use with its tenant's document counts. An admin key
    also gets sizes, embedding-cache, search-batching, indexing and catalog figures
    (``scope: "server"``); a user key only its tenant's view (``scope: "tenant"``)."""
    return rl.admin.info(caller)
