"""Ingestion jobs: trigger a directory, status, re-run, and the GitHub webhook."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from ragline.api.deps import RL, Caller
from ragline.api.schemas_out import JobAccepted, JobList, JobOut, JobRerun, WebhookResult, ok
from ragline.api.views import job_view
from ragline.facade import IngestSource

router = APIRouter(tags=["ingestion"])

WEBHOOK_BODY: dict[str, Any] = {
    "parameters": [
        {"name": "X-Hub-Signature-256", "in": "header", "required": True,
         "schema": {"type": "string"}, "example": "sha256=5257a8...",
         "description": "HMAC-SHA256 of the raw body with RAGLINE_GITHUB_WEBHOOK_SECRET."},
        {"name": "X-GitHub-Event", "in": "header", "schema": {"type": "string"},
         "example": "push", "description": "push (acted on), ping (answered), others ignored."},
        {"name": "X-GitHub-Delivery", "in": "header", "schema": {"type": "string"},
         "example": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
         "description": "Replays of a delivery id answer 200 with duplicate: true."}],
    "requestBody": {"required": True, "content": {"application/json": {
        "schema": {"type": "object", "description": "GitHub's event payload, as sent."},
        "example": {"ref": "refs/heads/main", "after": "a10867b14bb761a232cd80139fbd4c0d",
                    "commits": [{"modified": ["docs/intro.md"]}]}}}},
}
"""The webhook reads its raw body (the signature covers the bytes), so FastAPI cannot
infer it; declared here for the OpenAPI document."""


class TriggerBody(BaseModel):
    collection: str | None = Field(None, description="Default: the default collection.")
    path: str | None = Field(None, description="Directory on the server to ingest (a book, "
                             "a git checkout).")
    mode: str = Field("incremental", description="incremental, full or recreate.")
    paths: list[str] | None = Field(
        None, description="Only these paths (relative to 'path'); deleted ones are removed.")

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"collection": "book", "path": "/srv/books/robolearn", "mode": "incremental"}]})


@router.post("/ingestion/trigger", status_code=202,
             responses=ok(JobAccepted, 202, "Queued; poll /ingestion/status/{job_id}."))
def trigger(body: TriggerBody, rl: RL, caller: Caller) -> dict[str, Any]:
    """Ingest a directory on the server (admin keys; only under
    ``RAGLINE_INGEST_ALLOWED_ROOTS``) as a background job: incremental, full or recreate."""
    job = rl.ingestion.submit(caller, IngestSource("directory", body.collection, path=body.path,
                                         mode=body.mode, paths=body.paths)).job
    assert job is not None  # directories always become jobs
    return {"job_id": job.id, "status": job.status, "collection": job.collection,
            "mode": job.mode}


@router.get("/ingestion/status", responses=ok(JobList))
def recent_jobs(rl: RL, caller: Caller, limit: int = Query(20, ge=1, le=200),
                collection: str | None = None) -> dict[str, Any]:
    """Recent ingestion jobs of the caller's tenant (every tenant's for an admin naming
    none), newest first."""
    jobs = [job_view(j) for j in rl.ingestion.jobs(caller, limit, collection)]
    return {"jobs": jobs, "count": len(jobs)}


@router.get("/ingestion/status/{job_id}", responses=ok(JobOut))
def job_status(job_id: str, rl: RL, caller: Caller) -> dict[str, Any]:
    """One job with its counters, warnings and progress (rate, ETA)."""
    return job_view(rl.ingestion.job(caller, job_id))


@router.post("/ingestion/jobs/{job_id}/rerun", status_code=202,
             responses=ok(JobRerun, 202, "A new job with the same source and mode."))
def rerun(job_id: str, rl: RL, caller: Caller) -> dict[str, Any]:
    """Queue a new job with the same source, paths and mode as a finished one."""
    job = rl.ingestion.rerun(caller, job_id)
    return {"job_id": job.id, "status": job.status, "rerun_of": job_id}


@router.post("/ingestion/webhook/github", openapi_extra=WEBHOOK_BODY, responses={
    **ok(WebhookResult, 200, "A ping, or a replayed delivery (nothing done).",
         example={"status": "duplicate", "duplicate": True,
                  "delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958"}),
    **ok(WebhookResult, 202, "A push: queued, or ignored with the reason.")})
async def github_webhook(request: Request, rl: RL) -> JSONResponse:
    """Authenticated by GitHub's HMAC signature (``RAGLINE_GITHUB_WEBHOOK_SECRET``), not by
    an API key; it updates the configured clone's collection in the default tenant."""
    body = await request.body()
    headers = {k.lower(): v for k, v in request.headers.items()}
    status, payload = await run_in_threadpool(rl.ingestion.github_webhook, headers, body)
    return JSONResponse(payload, status_code=status)
