"""Health and info (the provider listing: routes/connections.py)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from ragline.api.deps import RL, Caller

router = APIRouter(tags=["operations"])


@router.get("/health")
def health(rl: RL) -> dict[str, Any]:
    return rl.health()


@router.get("/info")
def info(rl: RL, caller: Caller) -> dict[str, Any]:
    return rl.info(caller)
