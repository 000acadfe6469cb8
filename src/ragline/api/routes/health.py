"""Health, info and the provider registry listing."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from ragline.api.deps import RL, Caller
from ragline.api.schemas_out import HealthOut, InfoOut, ProvidersOut, ok

router = APIRouter(tags=["operations"])


@router.get("/health", responses=ok(HealthOut))
def health(rl: RL) -> dict[str, Any]:
    return rl.health()


@router.get("/info", responses=ok(InfoOut))
def info(rl: RL, caller: Caller) -> dict[str, Any]:
    return rl.info(caller)


@router.get("/api/providers", responses=ok(ProvidersOut))
def providers(rl: RL, caller: Caller) -> dict[str, Any]:
    return rl.providers()
