"""Response shapes shared by several routes (routes never import each other)."""

from __future__ import annotations

from typing import Any

from ragline.facade import Job, job_counters


def job_view(job: Job) -> dict[str, Any]:
    """The public shape of a job (``GET /ingestion/status/{job_id}``)."""
    return {
        "job_id": job.id, "status": job.status, "mode": job.mode, "kind": job.kind,
        "trigger": job.trigger, "collection": job.collection, "path": job.path,
        "restricted_paths": job.restricted_paths,
        **job_counters(job),
        "created_at": job.created_at, "started_at": job.started_at,
        "finished_at": job.finished_at, "duration_s": job.duration_s, "error": job.error,
        "warnings": job.warnings, "result": job.result,
    }
