"""Ingestion jobs through the PostgreSQL queue: API processes enqueue, workers run them.

With a shared catalog (``catalog = "postgres"``) no API process runs jobs: a
submitted job is a ``queued`` row that any ``ragline worker`` process (on any
machine) claims with ``FOR UPDATE SKIP LOCKED`` and runs under a lease it keeps
extending (:func:`ragline.services.ingestion.queue_worker.lease_kept`). So:

* a job is claimed by one worker at a time, and its outcome is recorded only by
  the worker that holds it (fenced by worker and attempt);
* a worker killed mid-job (SIGKILL, a lost machine) stops extending its lease,
  and once the lease is over another worker claims the job again (attempt 2),
  up to ``job_max_attempts``; ingestion is incremental, so the retry skips what
  the dead run committed;
* a worker asked to stop (SIGTERM) stops a directory run at its next checkpoint
  and gives the job back to the queue without counting the attempt; an upload
  or text is short and is finished first.

Nothing is recovered at start-up: a process never fails another's jobs.
The CLI's ``ragline ingest`` (``inline``) creates its job already claimed by
itself and runs it here under the same lease, so a crash of the CLI leaves a
job that a worker finishes.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from typing import TYPE_CHECKING

from ragline.catalog.ingest_state import Job
from ragline.errors import CatalogUnavailable, ServiceUnavailable
from ragline.services.ingestion.ingest import IngestService
from ragline.services.ingestion.ingest_stats import IngestStats, Progress
from ragline.services.ingestion.jobs import JobService, JobSpec
from ragline.services.ingestion.queue_worker import lease_kept

if TYPE_CHECKING:  # psycopg is the postgres extra's; the catalog backend builds these
    from ragline.catalog.pg_ingest import PgJobTable
    from ragline.catalog.pg_queue import JobQueue

log = logging.getLogger(__name__)

FINISHED = ("succeeded", "failed")
RETRY_S = 5.0  # how long a worker waits before trying an unavailable catalog again


def worker_name() -> str:
    """Who holds a job, as the queue's ``worker`` column shows it: host, pid, nonce."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class QueuedJobService(JobService):
    def __init__(self, table: PgJobTable, queue: JobQueue, ingest: IngestService,
                 poll_s: float = 0.5) -> None:
        super().__init__(table, ingest, workers=0)
        self.pg = table
        self.queue = queue
        self.poll_s = poll_s
        self.worker = worker_name()
        self._idle = threading.Event()
        self._idle.set()  # no worker loop running

    def start(self) -> None:
        """Nothing to recover: leases hand a dead process's jobs to live workers."""

    def pending(self) -> int:
        return self.pg.pending()

    def _create(self, spec: JobSpec, path: str | None, inline: bool) -> Job:
        return self.pg.create(kind=spec.kind, trigger=spec.trigger, mode=spec.mode,
                              collection=spec.collection, tenant=spec.tenant, path=path,
                              restricted_paths=spec.restrict, data=spec.payload,
                              worker=self.worker if inline else None)

    def _schedule(self, job_id: str) -> None:
        """The row is queued already: a worker takes it."""
        if self._stop.is_set():
            raise ServiceUnavailable("the server is shutting down; job not started")

    def run(self, job_id: str, progress: Progress | None = None) -> Job:
        """Run a job this process holds (claimed by :meth:`work`, or created claimed by
        an inline submit) while keeping its lease."""
        claim = self.pg.claim_of(job_id)
        if claim is None:
            raise ServiceUnavailable(f"job {job_id} is not held by this process")
        try:
            with lease_kept(self.queue, claim):
                return super().run(job_id, progress)
        finally:
            self.pg.release(job_id)

    def _cancelled(self, job: Job, stats: IngestStats, duration_s: float, message: str) -> None:
        if self.pg.requeue(job.id, stats.counters(), stats.warnings):
            log.info("ingestion job %s given back to the queue (this worker is stopping)",
                     job.id)

    # -- the worker loop -----------------------------------------------------------------
    def work(self, exit_when_idle: bool = False) -> int:
        """Claim and run jobs until :meth:`stop` (or, with ``exit_when_idle``, until no
        job is queued or running anywhere); returns how many this worker ran."""
        done = 0
        self._idle.clear()
        try:
            while not self._stop.is_set():
                try:
                    self.queue.reap()
                    claim = self.queue.claim(self.worker)
                    if claim is None:
                        if exit_when_idle and self.queue.pending() == 0:
                            break
                        self._stop.wait(self.poll_s)
                        continue
                    self.pg.hold(claim)
                    log.info("claimed ingestion job %s (attempt %d)", claim.id, claim.attempt)
                    self.run(claim.id)
                    done += 1
                except CatalogUnavailable as exc:  # PostgreSQL away: the worker waits it out
                    # (a job it held keeps no lease now: another worker, or this one, will
                    # take it again once the lease lapses)
                    log.warning("%s; retrying in %.0f s", exc.message, RETRY_S)
                    self._stop.wait(RETRY_S)
        finally:
            self._idle.set()
        return done

    def stop(self) -> None:
        """Ask the worker loop to finish: a directory run stops at its next checkpoint
        and goes back to the queue; safe from a signal handler."""
        self._stop.set()

    def wait(self, job_id: str, timeout: float | None = None) -> Job:
        """Poll the shared row until a worker (any process) finished the job."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            job = self.get(job_id)
            if job.status in FINISHED:
                return job
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"job {job_id} not finished after {timeout} s")
            time.sleep(0.2)

    def close(self) -> None:
        """Stop the worker loop (if any) and wait for it; jobs held now are given back
        by their runs (a directory) or finished (an upload)."""
        self._stop.set()
        self._idle.wait(timeout=60)
        self.pg.fail_unfinished("interrupted by shutdown")
