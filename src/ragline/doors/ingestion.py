"""The ingestion door (``rl.ingestion``): the one submission path (HTTP, webhook, CLI,
MCP), jobs, and the shared queue's workers."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any

from ragline.catalog.ingest_state import COUNTERS, Job
from ragline.core.principal import Principal
from ragline.doors.base import Door
from ragline.errors import CollectionNotFound, InvalidInput
from ragline.services.ingestion.ingest_stats import Progress
from ragline.services.ingestion.ingestion import IngestOutcome, IngestSource
from ragline.services.ingestion.queued_jobs import QueuedJobService


def job_counters(job: Job) -> dict[str, int]:
    """A job's progress counters, every one present (0 when not reached)."""
    return {k: job.counters.get(k, 0) for k in COUNTERS}


class IngestionDoor(Door):
    def submit(self, caller: Principal, source: IngestSource, *, wait: bool = False,
               progress: Progress | None = None) -> IngestOutcome:
        """The one submission path; see services/ingestion/ingestion.py. Directories on the server
        are read for admins only and, for network callers, only under
        ``RAGLINE_INGEST_ALLOWED_ROOTS``."""
        if source.kind == "directory":
            self._access.require_admin(caller, "ingest directories on the server")
        name = self._sv.search.collection_name(source.collection)
        if not self._access.may_use_existing(caller, name):
            raise CollectionNotFound(name)
        return self._sv.ingestion.submit(self._access.write_tenant(caller), source,
                                         wait=wait, progress=progress, local=caller.local)

    async def submit_async(self, caller: Principal, source: IngestSource) -> IngestOutcome:
        """:meth:`submit` for async callers: a URL is fetched on the fetch pool first
        (no worker thread waits on a slow remote server), the rest runs in a thread."""
        import anyio.to_thread

        source = await self._sv.ingestion.prefetch(source)
        return await anyio.to_thread.run_sync(self.submit, caller, source)

    def upload_slot(self) -> AbstractContextManager[None]:
        """One of ``max_concurrent_uploads`` slots, held while an upload is read and
        processed; none free: 429 at once (issue 10)."""
        return self._sv.ingest.upload_slot()

    def job(self, caller: Principal, job_id: str) -> Job:
        return self._sv.ingestion.job(self._access.tenant_filter(caller), job_id)

    def jobs(self, caller: Principal, limit: int = 20,
             collection: str | None = None) -> list[Job]:
        return self._sv.ingestion.recent(self._access.tenant_filter(caller), limit,
                                         collection)

    def rerun(self, caller: Principal, job_id: str) -> Job:
        self._access.require_admin(caller, "re-run directory jobs")
        return self._sv.ingestion.rerun(self._access.tenant_filter(caller), job_id)

    def wait(self, caller: Principal, job_id: str, timeout: float | None = None) -> Job:
        self.job(caller, job_id)  # scope check first
        return self._sv.jobs.wait(job_id, timeout)

    def work(self, caller: Principal, *, exit_when_idle: bool = False) -> int:
        """Be a queue worker (``ragline worker``): claim and run ingestion jobs from the
        shared queue until :meth:`stop_work`; returns how many this process ran."""
        self._access.require_admin(caller, "run ingestion workers")
        jobs = self._sv.jobs
        if not isinstance(jobs, QueuedJobService):
            raise InvalidInput("`ragline worker` needs the shared job queue: set "
                               "RAGLINE_CATALOG=postgres (docs/scaling.md); the embedded "
                               "catalog runs jobs inside `ragline serve`")
        return jobs.work(exit_when_idle=exit_when_idle)

    def stop_work(self) -> None:
        """Let :meth:`work` return: a running directory job stops at its next checkpoint
        and goes back to the queue. Safe to call from a signal handler."""
        jobs = self._sv.jobs
        if isinstance(jobs, QueuedJobService):
            jobs.stop()

    def github_webhook(self, headers: Mapping[str, str],
                       body: bytes) -> tuple[int, dict[str, Any]]:
        """A GitHub delivery as received (blocking: runs git). Returns (status, body).
        Authenticated by its signature; it writes to ``github_tenant`` (default: the
        default tenant; ``*``: the shared corpus)."""
        s = self._settings
        return self._sv.webhook.handle(s.github_tenant or s.default_tenant, headers, body)
