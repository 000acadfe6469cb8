"""Ingestion jobs: trigger a directory, status, re-run, and the GitHub webhook."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from ragline.api.deps import RL, Caller
from ragline.api.views import job_view
from ragline.facade import IngestSource

router = APIRouter(tags=["ingestion"])


class TriggerBody(BaseModel):
    collection: str | None = Field(None, description="Default: the default collection.")
    path: str | None = Field(None, description="Directory on the server to ingest (a book, "
                             "a git checkout).")
    mode: str = Field("incremental", description="incremental, full or recreate.")
    paths: list[str] | None = Field(
        None, description="Only these paths (relative to 'path'); deleted ones are removed.")


@router.post("/ingestion/trigger", status_code=202)
def trigger(body: TriggerBody, rl: RL, caller: Caller) -> dict[str, Any]:
    job = rl.ingest(caller, IngestSource("directory", body.collection, path=body.path,
                                         mode=body.mode, paths=body.paths)).job
    assert job is not None  # directories always become jobs
    return {"job_id": job.id, "status": job.status, "collection": job.collection,
            "mode": job.mode}


@router.get("/ingestion/status")
def recent_jobs(rl: RL, caller: Caller, limit: int = Query(20, ge=1, le=200),
                collection: str | None = None) -> dict[str, Any]:
    jobs = [job_view(j) for j in rl.jobs(caller, limit, collection)]
    return {"jobs": jobs, "count": len(jobs)}


@router.get("/ingestion/status/{job_id}")
def job_status(job_id: str, rl: RL, caller: Caller) -> dict[str, Any]:
    return job_view(rl.job(caller, job_id))


@router.post("/ingestion/jobs/{job_id}/rerun", status_code=202)
def rerun(job_id: str, rl: RL, caller: Caller) -> dict[str, Any]:
    job = rl.rerun_job(caller, job_id)
    return {"job_id": job.id, "status": job.status, "rerun_of": job_id}


@router.post("/ingestion/webhook/github")
async def github_webhook(request: Request, rl: RL) -> JSONResponse:
    """Authenticated by GitHub's HMAC signature (``RAGLINE_GITHUB_WEBHOOK_SECRET``), not by
    an API key; it updates the configured clone's collection in the default tenant."""
    body = await request.body()
    headers = {k.lower(): v for k, v in request.headers.items()}
    status, payload = await run_in_threadpool(rl.github_webhook, headers, body)
    return JSONResponse(payload, status_code=status)
