"""Spec 003: a prioritized troubleshooting checklist for an enriched alert.

``process(context, top_k=5)``: the alert is turned into a query text
(:func:`context_query`), runbook chunks are retrieved from the caller's tenant
with tag and shape boosts (:mod:`ragline.services.search.boosts`: labels/tags against
chunk ``tags``, the resource shape against ``applicable_shapes`` globs such as
``VM.*``), the ``checklist`` prompt is filled, and the model's JSON is parsed and
validated. Malformed output gives a fallback checklist with one error step (and a
log line), never an exception; ``source_runbooks`` lists the unique runbook paths
the chunks came from.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from ragline.core.tenancy import TenantScope
from ragline.prompts import Prompts
from ragline.providers.llms.base import ChatModel
from ragline.services.answers.tool_choice import extract_json_object
from ragline.services.search.rag_context import Hit, Retriever

log = logging.getLogger(__name__)

SHAPE_FIELDS = ("applicable_shapes", "applicableShapes")


class EnrichedContext(BaseModel):
    """An alert with what monitoring knows about it (spec 003's EnrichedContext)."""

    title: str = Field(..., min_length=1, max_length=1000)
    resource_type: str | None = None
    resource_shape: str | None = None
    labels: dict[str, str] | list[str] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list)
    metrics: dict[str, Any] = Field(default_factory=dict)
    logs: list[str] = Field(default_factory=list, max_length=200)

    def all_tags(self) -> list[str]:
        """Label names and values plus tags: ``{"component": "cpu"}`` matches tag ``cpu``."""
        out: list[str] = list(self.tags)
        if isinstance(self.labels, dict):
            for k, v in self.labels.items():
                out += [k, v]
        else:
            out += self.labels
        unique: dict[str, str] = {}
        for t in out:
            if t:
                unique.setdefault(t.lower(), t)
        return list(unique.values())


class ChecklistStep(BaseModel):
    order: int = Field(..., ge=1)
    priority: Literal["high", "medium", "low"] = "medium"
    action: str = Field(..., min_length=1)
    rationale: str = ""
    source: str = "general"

    @field_validator("priority", mode="before")
    @classmethod
    def _lower(cls, v: Any) -> Any:
        return v.strip().lower() if isinstance(v, str) else v


class Checklist(BaseModel):
    title: str = Field(..., min_length=1)
    steps: list[ChecklistStep] = Field(..., min_length=1)
    source_runbooks: list[str] = Field(default_factory=list)
    fallback: bool = False


def context_query(ctx: EnrichedContext) -> str:
    """The text an alert is embedded as (spec 003 ``embedContext``)."""
    parts = [ctx.title]
    if ctx.resource_type:
        parts.append(f"resource {ctx.resource_type}")
    if ctx.resource_shape:
        parts.append(f"shape {ctx.resource_shape}")
    tags = ctx.all_tags()
    if tags:
        parts.append("tags " + " ".join(tags))
    if ctx.metrics:
        parts.append("metrics " + " ".join(f"{k}={v}" for k, v in ctx.metrics.items()))
    parts += ctx.logs[:3]
    return ". ".join(parts)


def runbook_path(hit: Hit) -> str:
    for key in ("source_path", "path", "runbook_path", "source_url"):
        v = hit.metadata.get(key)
        if v:
            return str(v)
    return hit.id


def boost_for(ctx: EnrichedContext) -> dict[str, Any]:
    boost: dict[str, Any] = {"query_tags": ctx.all_tags()}
    if ctx.resource_shape:
        boost["glob_fields"] = {f: "shape" for f in SHAPE_FIELDS}
        boost["query_values"] = {"shape": ctx.resource_shape}
    return boost


def format_prompt(prompts: Prompts, ctx: EnrichedContext, chunks: list[Hit]) -> str:
    """Spec 003 ``formatPrompt``: alert, resource, metrics, logs, chunks; asks for JSON."""
    excerpts = "\n\n".join(f"[{i}] ({runbook_path(h)})\n{h.text}"
                           for i, h in enumerate(chunks, 1)) or "(none found)"
    metrics = "\n".join(f"- {k}: {v}" for k, v in ctx.metrics.items()) or "(none)"
    logs = "\n".join(f"- {line}" for line in ctx.logs) or "(none)"
    return prompts.format(
        "checklist", alert_title=ctx.title, resource_type=ctx.resource_type or "unknown",
        resource_shape=ctx.resource_shape or "unknown",
        labels=", ".join(ctx.all_tags()) or "(none)", metrics=metrics, logs=logs,
        runbook_chunks=excerpts)


def fallback_checklist(ctx: EnrichedContext, runbooks: list[str], problem: str) -> Checklist:
    return Checklist(
        title=f"Troubleshooting: {ctx.title}",
        steps=[ChecklistStep(
            order=1, priority="high",
            action="Investigate the alert manually: the checklist could not be generated.",
            rationale=f"The language model returned an unusable answer ({problem}).",
            source="ragline")],
        source_runbooks=runbooks, fallback=True)


def parse_checklist(raw: str, ctx: EnrichedContext, runbooks: list[str]) -> Checklist:
    obj = extract_json_object(raw or "")
    if obj is None:
        log.warning("checklist: no JSON object in the model's answer: %.200r", raw)
        return fallback_checklist(ctx, runbooks, "no JSON object")
    try:
        checklist = Checklist.model_validate({**obj, "source_runbooks": runbooks,
                                              "fallback": False})
    except ValidationError as exc:
        problem = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                            for e in exc.errors()[:3])
        log.warning("checklist: invalid JSON from the model (%s): %.200r", problem, raw)
        return fallback_checklist(ctx, runbooks, "invalid checklist JSON")
    checklist.steps.sort(key=lambda s: s.order)
    return checklist


class ChecklistService:
    def __init__(self, llm: Callable[[], ChatModel], retriever: Retriever,
                 collection_metadata: Callable[[str], Mapping[str, Any]],
                 assistant_name: str, top_k: int = 5) -> None:
        self.llm = llm
        self.retriever = retriever
        self.collection_metadata = collection_metadata
        self.assistant_name = assistant_name
        self.top_k = top_k

    async def retrieve(self, tenant: TenantScope, collection: str, ctx: EnrichedContext,
                       k: int | None = None) -> list[Hit]:
        return await self.retriever(tenant, collection, context_query(ctx),
                                    limit=k or self.top_k, boost=boost_for(ctx))

    def prompts(self, collection: str | None) -> Prompts:
        return Prompts(self.assistant_name,
                       self.collection_metadata(collection) if collection else None)

    async def generate(self, ctx: EnrichedContext, chunks: list[Hit],
                       collection: str | None = None) -> Checklist:
        llm = self.llm()
        runbooks = list(dict.fromkeys(runbook_path(h) for h in chunks))
        prompt = format_prompt(self.prompts(collection), ctx, chunks)
        raw = await llm.complete([{"role": "user", "content": prompt}], json_mode=True,
                                 max_tokens=1024)
        return parse_checklist(raw, ctx, runbooks)

    async def process(self, tenant: TenantScope, collection: str, ctx: EnrichedContext,
                      top_k: int | None = None) -> Checklist:
        self.llm()  # 503 before any retrieval work when no model is configured
        chunks = await self.retrieve(tenant, collection, ctx, top_k)
        return await self.generate(ctx, chunks, collection)


def checklist_json(checklist: Checklist) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(checklist.model_dump_json())
    return out
