"""Ingestion jobs: persisted in the catalog, run by a small in-process worker pool.

Why persisted: a job outlives the request that started it, and its status must
still be readable after the process that ran it died. Why in-process: one
server owns the embedded store, so the default needs no queue service; the
pool is deliberately small (the embedder already uses every core). Jobs found
``queued``/``running`` at start-up belonged to a dead process: they are marked
failed ("interrupted by restart") and can be re-run (:meth:`JobService.rerun`),
which is cheap because runs are incremental.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ragline.catalog.ingest_state import Job, JobTable
from ragline.catalog.tables import JobRows
from ragline.errors import (
    IngestCancelled,
    InvalidInput,
    NotFound,
    RaglineError,
    ServiceUnavailable,
    TooManyRequests,
)
from ragline.ingest.loader import tree_sources
from ragline.observability import metrics
from ragline.observability.memory import release_freed_memory
from ragline.services.corpus.validation import check_collection_name
from ragline.services.ingestion.ingest import IngestService
from ragline.services.ingestion.ingest_stats import IngestStats, Progress, check_mode

log = logging.getLogger(__name__)

INTERRUPTED = "interrupted by restart"
PROGRESS_EVERY_S = 0.5


def _since(iso: str | None) -> float | None:
    if not iso:
        return None
    try:
        started = datetime.fromisoformat(iso)
    except ValueError:
        return None
    if started.tzinfo is None:
        started = started.replace(tzinfo=UTC)
    return max(0.0, (datetime.now(UTC) - started).total_seconds())


def job_progress(job: Job) -> dict[str, Any]:
    """files done/total, files per second and the estimated seconds left.

    ``files_done`` counts changed, skipped and failed files (what the run has got
    through); the rate is over the run so far (the whole run once finished), and
    ``eta_s`` is null until there is a rate, and 0 once the job is finished.
    """
    c = job.counters
    done = c.get("files_changed", 0) + c.get("files_skipped", 0) + c.get("files_failed", 0)
    total = c.get("files_total", 0) or c.get("files_seen", 0)
    elapsed = job.duration_s if job.duration_s is not None else _since(job.started_at)
    rate = done / elapsed if elapsed and done else None
    finished = job.status in ("succeeded", "failed")
    eta = 0.0 if finished else (max(0, total - done) / rate if rate else None)
    return {"files_done": done, "files_total": total,
            "rate_files_per_s": round(rate, 3) if rate else None,
            "eta_s": round(eta, 1) if eta is not None else None}


@dataclass
class JobSpec:
    """What a job will ingest: a directory on the server, or an upload's bytes / a text
    kept in the data directory until a worker takes them."""

    kind: str  # directory | upload | text
    collection: str
    tenant: str
    mode: str = "incremental"
    path: str | None = None  # directory; the file name of an upload; the title of a text
    restrict: list[str] | None = None
    payload: bytes | None = None
    trigger: str = "api"


class JobService:
    def __init__(self, table: JobRows, ingest: IngestService, workers: int) -> None:
        """Wiring only; :meth:`start` recovers and opens the worker pool."""
        self.table = table
        self.ingest = ingest
        self.workers = workers
        self.progress_every = max(1, int(getattr(ingest.settings, "job_progress_every", 25)))
        self._pool: ThreadPoolExecutor | None = None
        self._stop = threading.Event()
        self._futures: dict[str, Future[Job]] = {}
        self._lock = threading.Lock()
        self.max_queued = ingest.settings.job_queue_max

    def start(self) -> None:
        """Fail the jobs a dead process left behind and drop their inputs, then take jobs."""
        failed = self.table.fail_unfinished(INTERRUPTED)
        if failed:
            log.warning("%d ingestion job(s) were interrupted by a restart: %s",
                        len(failed), ", ".join(failed))
        if isinstance(self.table, JobTable):
            self.table.drop_inputs()  # inputs no job can use now
        self._pool = ThreadPoolExecutor(max_workers=self.workers,
                                        thread_name_prefix="ragline-job")

    # -- submitting -------------------------------------------------------------------
    def submit(self, spec: JobSpec, *, inline: bool = False,
               progress: Progress | None = None, local: bool = True) -> Job:
        """The one way a job is made: validate now (400 before 202), record it, then run it
        on a worker, or here when ``inline`` (the CLI, which shows a progress bar)."""
        if not inline:
            self._admit()
        check_mode(spec.mode)
        check_collection_name(spec.collection)
        path = spec.path
        if spec.kind == "directory":
            if path is None:
                raise InvalidInput("'path' is required: the directory to ingest")
            root = self.ingest.check_root(path, local=local)
            tree_sources(root, self.ingest.settings.ingest_patterns)  # 400 before 202
            path = str(root)
            if spec.restrict is not None and spec.mode == "recreate":
                raise InvalidInput("mode 'recreate' rebuilds everything; it takes no path list")
        elif spec.payload is None:
            raise InvalidInput(f"a {spec.kind} job needs its content")
        else:  # the content waits on disk: 507 before writing it (issue 10)
            self.ingest.disk.check(f"queue the {spec.kind}", need=len(spec.payload))
        job = self._create(spec, path, inline)
        if inline:
            return self.run(job.id, progress)
        self._schedule(job.id)
        return job

    def _create(self, spec: JobSpec, path: str | None, inline: bool) -> Job:
        """Record the job (its input with it: a worker may take it at once)."""
        return self.table.create(kind=spec.kind, trigger=spec.trigger, mode=spec.mode,
                                 collection=spec.collection, tenant=spec.tenant, path=path,
                                 restricted_paths=spec.restrict, data=spec.payload)

    def rerun(self, job_id: str, tenant: str | None = None) -> Job:
        old = self.get(job_id, tenant)
        if old.kind != "directory" or old.path is None:
            raise InvalidInput(f"Job {job_id} ingested an upload or text; send it again instead")
        return self.submit(JobSpec("directory", old.collection, old.tenant, old.mode, old.path,
                                   old.restricted_paths, trigger="rerun"))

    def pending(self) -> int:
        """Jobs queued or running in this process."""
        with self._lock:
            return sum(1 for f in self._futures.values() if not f.done())

    def _admit(self) -> None:
        """Refuse a new job (429) while ``job_queue_max`` are waiting or running: 30
        concurrent 15 MB uploads once queued 30 jobs with no bound (issue 10)."""
        if self.pending() >= self.max_queued:
            raise TooManyRequests(
                f"The ingestion queue is full ({self.max_queued} jobs, setting job_queue_max); "
                "retry later", retry_after=10)

    def _schedule(self, job_id: str) -> None:
        with self._lock:
            if self._stop.is_set() or self._pool is None:
                raise ServiceUnavailable("the server is shutting down (or not started); "
                                         "job not started")
            self._futures[job_id] = self._pool.submit(self.run, job_id)

    # -- running ----------------------------------------------------------------------
    def run(self, job_id: str, progress: Progress | None = None) -> Job:
        """Execute a queued job in this thread (workers, and the CLI, which wants a bar)."""
        job = self.get(job_id)
        self.table.start(job_id)
        t0 = time.perf_counter()
        last = [0.0]
        every = self.progress_every
        logged = [0]
        log.info("ingestion job %s started: %s into '%s' (mode %s, trigger %s)", job_id,
                 job.kind, job.collection, job.mode, job.trigger,
                 extra={"job_id": job_id, "collection": job.collection})

        written = [0]

        def report(stats: IngestStats) -> None:
            if progress is not None:
                progress(stats)
            now = time.perf_counter()
            # an acknowledged write is shown at once (the row never lags what search
            # sees); other progress (files read, texts embedded) at most every 0.5 s
            if now - last[0] >= PROGRESS_EVERY_S or stats.writes_acknowledged != written[0]:
                last[0] = now
                written[0] = stats.writes_acknowledged
                self.table.progress(job_id, stats.counters(), stats.warnings)
            done = stats.files_done
            if done - logged[0] >= every:
                logged[0] = done - done % every
                rate = done / stats.elapsed if stats.elapsed > 0 else 0.0
                left = max(0, stats.files_total - done)
                log.info("ingestion job %s: %d/%d files (%.1f files/s, eta %.0f s)", job_id,
                         done, stats.files_total, rate, left / rate if rate else 0.0,
                         extra={"job_id": job_id, "files_done": done,
                                "files_total": stats.files_total})

        stats = IngestStats()
        metrics.JOBS_RUNNING.inc()
        status = "failed"
        try:
            result = self._execute(job, report, stats)
        except IngestCancelled as exc:
            self._cancelled(job, stats, time.perf_counter() - t0, exc.message)
        except Exception as exc:
            message = exc.message if isinstance(exc, RaglineError) else repr(exc)
            log.warning("ingestion job %s failed: %s", job_id, message)
            self.table.finish(job_id, "failed", stats.counters(), stats.warnings,
                              time.perf_counter() - t0, error=message)
        else:
            status = "succeeded"
            self.table.finish(job_id, "succeeded", stats.counters(), stats.warnings,
                              time.perf_counter() - t0, result=result)
        finally:
            metrics.JOBS_RUNNING.dec()
            metrics.JOBS.labels(job.kind, status).inc()
            for outcome in ("changed", "skipped", "deleted", "failed"):
                n = getattr(stats, f"files_{outcome}")
                if n:
                    metrics.INGEST_FILES.labels(outcome).inc(n)
            log.info("ingestion job %s %s in %.1f s: %d files (%d changed, %d unchanged, "
                     "%d deleted, %d failed), %d chunks written, %d warnings", job_id, status,
                     time.perf_counter() - t0, stats.files_seen, stats.files_changed,
                     stats.files_skipped, stats.files_deleted, stats.files_failed,
                     stats.chunks_created + stats.chunks_updated, len(stats.warnings),
                     extra={"job_id": job_id, "status": status, **stats.counters()})
            if status == "succeeded" or self._final(job_id):
                self.table.drop_input(job_id)
            with self._lock:
                self._futures.pop(job_id, None)
            release_freed_memory()  # a job parsed, chunked and embedded whole files
        return self.get(job_id)

    def _cancelled(self, job: Job, stats: IngestStats, duration_s: float, message: str) -> None:
        """A run stopped by shutdown: failed here (one process; re-run it, cheaply, since
        runs are incremental); the queue puts it back for another worker instead."""
        log.warning("ingestion job %s stopped: %s", job.id, message)
        self.table.finish(job.id, "failed", stats.counters(), stats.warnings, duration_s,
                          error=message)

    def _final(self, job_id: str) -> bool:
        """Whether the job has its final status (its input is no longer needed)."""
        job = self.table.get(job_id)
        return job is None or job.status in ("succeeded", "failed")

    def _execute(self, job: Job, report: Progress, stats: IngestStats) -> dict[str, Any] | None:
        if job.kind == "directory":
            assert job.path is not None
            self.ingest.run_directory(job.collection, job.tenant, job.path, job.mode,
                                      restrict=job.restricted_paths, progress=report,
                                      should_stop=self._stop.is_set, stats=stats)
            return None
        data = self.table.input(job.id)
        if data is None:
            raise RaglineError("the job's input is gone (the server restarted)")
        if job.kind == "upload":
            rel = job.restricted_paths[0] if job.restricted_paths else None
            res = self.ingest.ingest_bytes(job.collection, job.tenant, data,
                                           job.path or "upload", rel)
        else:
            res = self.ingest.ingest_text(job.collection, job.tenant, data.decode("utf-8"),
                                          job.path)
        stats.files_seen = stats.files_changed = 1
        stats.chunks_created, stats.texts_embedded = res.chunks_created, res.texts_embedded
        return {"sourceId": res.source_id, "chunksCreated": res.chunks, "title": res.title}

    # -- reading ----------------------------------------------------------------------
    def get(self, job_id: str, tenant: str | None = None) -> Job:
        """The job; with ``tenant``, only that tenant's (another tenant's job is a 404)."""
        job = self.table.get(job_id)
        if job is None or (tenant is not None and job.tenant != tenant):
            raise NotFound(f"Job '{job_id}' not found")
        return job

    def recent(self, limit: int = 20, collection: str | None = None,
               tenant: str | None = None) -> list[Job]:
        return self.table.recent(limit, collection, tenant)

    def wait(self, job_id: str, timeout: float | None = None) -> Job:
        """Block until the job is finished (tests, benchmarks, the CLI)."""
        with self._lock:
            future = self._futures.get(job_id)
        if future is not None:
            future.result(timeout)
        return self.get(job_id)

    def close(self) -> None:
        """Stop taking jobs, let running ones stop at their next checkpoint, fail the rest."""
        with self._lock:
            self._stop.set()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self.table.fail_unfinished("interrupted by shutdown")
