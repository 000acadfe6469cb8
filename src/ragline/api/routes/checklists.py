"""``POST /api/checklists``: spec 003's troubleshooting checklist for an enriched alert."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from ragline.api.deps import RL, Caller
from ragline.api.schemas_ops import ChecklistOut
from ragline.api.schemas_out import ok

router = APIRouter(tags=["answers"])


class ChecklistBody(BaseModel):
    title: str = Field(..., min_length=1, max_length=1000)
    resource_type: str | None = None
    resource_shape: str | None = None
    labels: dict[str, str] | list[str] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list)
    metrics: dict[str, Any] = Field(default_factory=dict)
    logs: list[str] = Field(default_factory=list, max_length=200)
    collection: str | None = None
    top_k: int | None = Field(None, ge=1, le=50, description="Default: checklist_top_k.")

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"title": "High CPU on web-1", "resource_type": "instance",
         "resource_shape": "VM.Standard.E4.Flex", "labels": {"component": "cpu"},
         "metrics": {"cpu_percent": 97}, "collection": "runbooks"}]})


@router.post("/api/checklists", responses=ok(ChecklistOut))
async def checklist(body: ChecklistBody, rl: RL, caller: Caller) -> dict[str, Any]:
    """Spec 003: a troubleshooting checklist for an enriched alert, grounded in the
    collection's runbooks (boosted by the alert's tags and shape)."""
    context = body.model_dump(exclude={"collection", "top_k"})
    return await rl.answers.checklist(caller, context, collection=body.collection, top_k=body.top_k)
