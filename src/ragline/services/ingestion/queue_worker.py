"""The loop of a queue worker process: claim a job, run it while heartbeating, record it.

Handlers are plain functions ``payload -> result`` keyed by job kind; an
exception fails the attempt (and queues the job again while it has attempts
left, since most failures of an ingestion run — a store or network hiccup — are
worth one more try). The heartbeat runs on its own thread every third of the
lease, so a long job keeps its lease while a dead worker's lapses.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # psycopg is the postgres extra's: imported by whoever builds a queue
    from ragline.catalog.pg_queue import Claim, JobQueue

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], dict[str, Any] | None]


@contextmanager
def lease_kept(queue: JobQueue, claim: Claim) -> Iterator[None]:
    """Extend ``claim``'s lease every third of it on a thread while the block runs, so a
    live worker keeps its job and a dead one's lapses."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(queue.lease_s / 3):
            try:
                if not queue.heartbeat(claim):
                    log.warning("job %s: lease lost to another worker", claim.id)
                    return
            except Exception:  # the database is away for a moment: try again next beat
                log.warning("job %s: heartbeat failed", claim.id, exc_info=True)

    hb = threading.Thread(target=beat, name=f"heartbeat-{claim.id[:8]}", daemon=True)
    hb.start()
    try:
        yield
    finally:
        stop.set()
        hb.join()


def run_one(queue: JobQueue, claim: Claim, handler: Handler) -> bool:
    """Run one claimed job; True when its outcome was recorded by this worker."""
    try:
        with lease_kept(queue, claim):
            result = handler(claim.payload)
    except Exception as exc:  # the job failed, not the worker
        return queue.fail(claim, f"{type(exc).__name__}: {exc}", retry=True)
    return queue.complete(claim, result)


def run_worker(queue: JobQueue, handlers: dict[str, Handler], worker: str,
               stop: threading.Event, poll_s: float = 0.5, exit_when_idle: bool = False) -> int:
    """Take jobs until ``stop`` is set (or, with ``exit_when_idle``, until no job is
    queued or running anywhere); returns how many this worker finished."""
    done = 0
    while not stop.is_set():
        queue.reap()
        claim = queue.claim(worker)
        if claim is None:
            if exit_when_idle and queue.pending() == 0:
                break
            stop.wait(poll_s)
            continue
        handler = handlers.get(claim.kind)
        if handler is None:
            queue.fail(claim, f"no handler for job kind {claim.kind!r}")
            continue
        if run_one(queue, claim, handler):
            done += 1
    return done
