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
import shutil
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ragline.catalog.ingest_state import COUNTERS, Job, JobTable
from ragline.errors import InvalidInput, NotFound, RaglineError, TooManyRequests
from ragline.services.ingest import IngestService
from ragline.services.ingest_stats import IngestStats, Progress, check_mode
from ragline.services.validation import check_collection_name

log = logging.getLogger(__name__)

INTERRUPTED = "interrupted by restart"
PROGRESS_EVERY_S = 0.5


def job_view(job: Job) -> dict[str, Any]:
    """The public shape of a job (``GET /ingestion/status/{job_id}``)."""
    return {
        "job_id": job.id, "status": job.status, "mode": job.mode, "kind": job.kind,
        "trigger": job.trigger, "collection": job.collection, "path": job.path,
        "restricted_paths": job.restricted_paths,
        **{k: job.counters.get(k, 0) for k in COUNTERS},
        "created_at": job.created_at, "started_at": job.started_at,
        "finished_at": job.finished_at, "duration_s": job.duration_s, "error": job.error,
        "warnings": job.warnings, "result": job.result,
    }


class JobService:
    def __init__(self, table: JobTable, ingest: IngestService, workers: int,
                 uploads_dir: Path) -> None:
        self.table = table
        self.ingest = ingest
        self.uploads_dir = uploads_dir
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ragline-job")
        self._stop = threading.Event()
        self._futures: dict[str, Future[Job]] = {}
        self._lock = threading.Lock()
        self.max_queued = ingest.settings.job_queue_max
        failed = table.fail_unfinished(INTERRUPTED)
        if failed:
            log.warning("%d ingestion job(s) were interrupted by a restart: %s",
                        len(failed), ", ".join(failed))
        shutil.rmtree(uploads_dir, ignore_errors=True)  # inputs of jobs that can no longer run

    # -- submitting -------------------------------------------------------------------
    def submit_directory(self, collection: str, tenant: str, path: str, mode: str = "incremental",
                         *, restrict: list[str] | None = None, trigger: str = "api") -> Job:
        """Validate now (400 before 202), run later."""
        self._admit()
        check_mode(mode)
        check_collection_name(collection)
        root = self.ingest.check_root(path)
        if restrict is not None and mode == "recreate":
            raise InvalidInput("mode 'recreate' rebuilds everything; it takes no path list")
        job = self.table.create(kind="directory", trigger=trigger, mode=mode,
                                collection=collection, tenant=tenant, path=str(root),
                                restricted_paths=restrict)
        self._schedule(job.id)
        return job

    def submit_upload(self, collection: str, tenant: str, data: bytes, filename: str) -> Job:
        """A large upload: the bytes wait in the data directory until a worker takes them."""
        self._admit()
        self.ingest.disk.check("queue the upload", need=len(data))
        job = self.table.create(kind="upload", trigger="api", mode="incremental",
                                collection=collection, tenant=tenant, path=filename)
        folder = self.uploads_dir / job.id
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "data").write_bytes(data)
        self._schedule(job.id)
        return job

    def submit_text(self, collection: str, tenant: str, text: str, title: str | None) -> Job:
        self._admit()
        self.ingest.disk.check("queue the text", need=len(text.encode("utf-8")))
        job = self.table.create(kind="text", trigger="api", mode="incremental",
                                collection=collection, tenant=tenant, path=title)
        folder = self.uploads_dir / job.id
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "data").write_text(text, encoding="utf-8")
        self._schedule(job.id)
        return job

    def rerun(self, job_id: str) -> Job:
        old = self.get(job_id)
        if old.kind != "directory" or old.path is None:
            raise InvalidInput(f"Job {job_id} ingested an upload or text; send it again instead")
        return self.submit_directory(old.collection, old.tenant, old.path, old.mode,
                                     restrict=old.restricted_paths, trigger="rerun")

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
            if self._stop.is_set():
                raise RaglineError("the server is shutting down; job not started")
            self._futures[job_id] = self._pool.submit(self.run, job_id)

    # -- running ----------------------------------------------------------------------
    def run(self, job_id: str, progress: Progress | None = None) -> Job:
        """Execute a queued job in this thread (workers, and the CLI, which wants a bar)."""
        job = self.get(job_id)
        self.table.start(job_id)
        t0 = time.perf_counter()
        last = [0.0]

        def report(stats: IngestStats) -> None:
            if progress is not None:
                progress(stats)
            now = time.perf_counter()
            if now - last[0] >= PROGRESS_EVERY_S:
                last[0] = now
                self.table.progress(job_id, stats.counters(), stats.warnings)

        stats = IngestStats()
        try:
            result = self._execute(job, report, stats)
        except Exception as exc:
            message = exc.message if isinstance(exc, RaglineError) else repr(exc)
            log.warning("ingestion job %s failed: %s", job_id, message)
            self.table.finish(job_id, "failed", stats.counters(), stats.warnings,
                              time.perf_counter() - t0, error=message)
        else:
            self.table.finish(job_id, "succeeded", stats.counters(), stats.warnings,
                              time.perf_counter() - t0, result=result)
        finally:
            shutil.rmtree(self.uploads_dir / job_id, ignore_errors=True)
            with self._lock:
                self._futures.pop(job_id, None)
        return self.get(job_id)

    def _execute(self, job: Job, report: Progress, stats: IngestStats) -> dict[str, Any] | None:
        if job.kind == "directory":
            assert job.path is not None
            self.ingest.run_directory(job.collection, job.tenant, job.path, job.mode,
                                      restrict=job.restricted_paths, progress=report,
                                      should_stop=self._stop.is_set, stats=stats)
            return None
        data = self.uploads_dir / job.id / "data"
        if not data.exists():
            raise RaglineError("the job's input is gone (the server restarted)")
        if job.kind == "upload":
            res = self.ingest.ingest_bytes(job.collection, job.tenant, data.read_bytes(),
                                           job.path or "upload")
        else:
            res = self.ingest.ingest_text(job.collection, job.tenant,
                                          data.read_text(encoding="utf-8"), job.path)
        stats.files_seen = stats.files_changed = 1
        stats.chunks_created, stats.texts_embedded = res.chunks_created, res.texts_embedded
        return {"sourceId": res.source_id, "chunksCreated": res.chunks, "title": res.title}

    # -- reading ----------------------------------------------------------------------
    def get(self, job_id: str) -> Job:
        job = self.table.get(job_id)
        if job is None:
            raise NotFound(f"Job '{job_id}' not found")
        return job

    def recent(self, limit: int = 20, collection: str | None = None) -> list[Job]:
        return self.table.recent(limit, collection)

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
        self._pool.shutdown(wait=True, cancel_futures=True)
        self.table.fail_unfinished("interrupted by shutdown")
