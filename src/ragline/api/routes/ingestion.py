"""Ingestion jobs (spec 004): trigger, status, re-run, and the GitHub webhook."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from ragline.api.deps import RL, Tenant
from ragline.errors import InvalidInput
from ragline.services.jobs import job_view
from ragline.services.webhook import WebhookService, verify_signature

router = APIRouter(tags=["ingestion"])


class TriggerBody(BaseModel):
    collection: str | None = Field(None, description="Default: the default collection.")
    path: str | None = Field(None, description="Directory on the server to ingest (a book, "
                             "a git checkout).")
    mode: str = Field("incremental", description="incremental, full or recreate.")
    paths: list[str] | None = Field(
        None, description="Only these paths (relative to 'path'); deleted ones are removed.")


def default_collection(rl: Any) -> str:
    name: str = rl.settings.default_collection or "knowledge"
    return name


@router.post("/ingestion/trigger", status_code=202)
def trigger(body: TriggerBody, rl: RL, tenant: Tenant) -> dict[str, Any]:
    if body.path is None or not body.path.strip():
        raise InvalidInput("'path' is required: the directory to ingest")
    job = rl.jobs.submit_directory(body.collection or default_collection(rl), tenant,
                                   body.path, body.mode, restrict=body.paths)
    return {"job_id": job.id, "status": job.status, "collection": job.collection,
            "mode": job.mode}


@router.get("/ingestion/status")
def recent_jobs(rl: RL, limit: int = Query(20, ge=1, le=200),
                collection: str | None = None) -> dict[str, Any]:
    jobs = [job_view(j) for j in rl.jobs.recent(limit, collection)]
    return {"jobs": jobs, "count": len(jobs)}


@router.get("/ingestion/status/{job_id}")
def job_status(job_id: str, rl: RL) -> dict[str, Any]:
    return job_view(rl.jobs.get(job_id))


@router.post("/ingestion/jobs/{job_id}/rerun", status_code=202)
def rerun(job_id: str, rl: RL) -> dict[str, Any]:
    job = rl.jobs.rerun(job_id)
    return {"job_id": job.id, "status": job.status, "rerun_of": job_id}


@router.post("/ingestion/webhook/github")
async def github_webhook(request: Request, rl: RL, tenant: Tenant) -> JSONResponse:
    service = WebhookService(rl.settings, rl.jobs, tenant, rl.deliveries)
    secret = service.secret()  # 503 before anything else when not configured
    body = await request.body()
    verify_signature(secret, body, request.headers.get("x-hub-signature-256"))
    event = request.headers.get("x-github-event", "")
    delivery = request.headers.get("x-github-delivery")
    if not await run_in_threadpool(service.first_delivery, delivery):  # a replay: do nothing
        return JSONResponse({"status": "duplicate", "duplicate": True, "delivery": delivery})
    if event == "ping":
        return JSONResponse({"status": "pong"})
    if event != "push":
        return JSONResponse({"status": "ignored", "reason": f"event '{event}' is not handled"},
                            status_code=202)
    try:
        if request.headers.get("content-type", "").startswith(
                "application/x-www-form-urlencoded"):
            payload = json.loads(parse_qs(body.decode()).get("payload", [""])[0])
        else:
            payload = json.loads(body)
    except ValueError as exc:
        raise InvalidInput("webhook body is not valid JSON") from exc
    if not isinstance(payload, dict):
        raise InvalidInput("webhook body must be a JSON object")
    result = await run_in_threadpool(service.handle_delivery, payload, delivery)
    return JSONResponse(result, status_code=202)
