"""Issue 33 item 7: jobs tell the truth.

A job showed ``running`` with 0 chunks for 18 s after its chunks were already
searchable: the row was written at most every 0.5 s, and the write's own report fell
inside that window while the next group took long to embed. The job's row now counts
what is written (chunks and files as their writes are acknowledged, never before), shows
each acknowledged write at once, and says ``succeeded`` as soon as the last write is.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ragline.catalog.ingest_state import Job
from ragline.facade import IngestSource, Ragline
from tests.ingestion_support import fake_of

pytestmark = pytest.mark.usefixtures("few_payload_indexes")


@pytest.fixture
def rl_overrides() -> dict[str, Any]:
    return {"ingest_batch_size": 2}  # several groups, so several writes, per book


def stored_count(rl: Ragline) -> int:
    info = rl.services.collections.get("book")
    return rl.services.store.count(info.shard, "default", None)


def until(check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_progress_counts_acknowledged_writes_and_success_does_not_lag(
        rl: Ragline, book: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rl.services.ingest.ensure_collection("book")
    fake = fake_of(rl)
    embed = fake.embed
    gate = threading.Event()
    calls = [0]

    def slow_second_group(texts: list[str], kind: Any = "document") -> Any:
        # once the first group is written, the next group's embedding waits for the test
        # (a slow model): the row must already show the first group meanwhile
        calls[0] += 1
        if stored_count(rl) > 0:
            assert gate.wait(30)
        return embed(texts, kind)

    monkeypatch.setattr(fake, "embed", slow_second_group)
    job = rl.ingestion.submit(rl.owner(), IngestSource("directory", "book", path=str(book))).job
    assert job is not None
    until(lambda: stored_count(rl) > 0)  # the first group is searchable
    until(lambda: rl.services.jobs.get(job.id).counters.get("chunks_created", 0) > 0, 2.0)
    row = rl.services.jobs.get(job.id)
    assert row.status == "running"
    c = row.counters
    # exactly what the store holds: not less (lag), not more (counted before writing)
    assert c["chunks_created"] == stored_count(rl)
    written = {r.metadata["source_path"] for r in
               rl.services.store.list_page(rl.services.collections.get("book").shard,
                                           "default", None, 10_000, 0).records}
    assert c["files_changed"] == len(written) < c["files_total"]

    # the last acknowledged write: when the state commit of the last group returns
    acked: list[float] = []
    commit = rl.services.ingest.state.commit

    def timed_commit(*args: Any, **kwargs: Any) -> Any:
        out = commit(*args, **kwargs)
        acked.append(time.monotonic())
        return out

    monkeypatch.setattr(rl.services.ingest.state, "commit", timed_commit)
    seen: list[tuple[float, Job]] = []

    def watch() -> None:  # what a client polling GET /ingestion/status/{id} sees
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            seen.append((time.monotonic(), rl.services.jobs.get(job.id)))
            if seen[-1][1].status in ("succeeded", "failed"):
                return
            time.sleep(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    gate.set()
    done = rl.ingestion.wait(rl.owner(), job.id, 60)
    watcher.join()
    assert done.status == "succeeded"
    assert done.counters["chunks_created"] == stored_count(rl)
    assert done.counters["files_changed"] == done.counters["files_total"]
    succeeded_at = next(t for t, j in seen if j.status == "succeeded")
    assert acked and succeeded_at - acked[-1] < 1.0, succeeded_at - acked[-1]  # loaded CI
    # and no poll ever showed more chunks than were written at that moment
    created = [j.counters.get("chunks_created", 0) for _, j in seen]
    assert created == sorted(created)
