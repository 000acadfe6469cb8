"""Background index builds: optimize a copy of the shard, replay, swap.

Edge's ``optimize()`` holds the GIL for its whole run (118 s for 20,000 384-d points with
per-value links on the loaded 2-core machine), so it runs in a niced host, on a copy. A
:class:`Builder` runs the phases -- journal, copy, recopy, build, load, replay, flush,
locked, close (``docs/storage.md``, "The embedded store in one page") -- each a method,
through the :class:`.table.ShardTable`'s methods only, timed by one :class:`Phases`.

Replaying is correct because upserts and deletes are idempotent and the journal holds, in
order, every operation that could be missing from (or torn in) the copy. A SIGKILL before
the pointer moves leaves the old generation live with every acknowledged write (Edge's
WAL); after it, the new one holds all of them. Unfinished generations are removed when
the shard is next opened (:func:`.generations.remove_stale`).
"""

from __future__ import annotations

import logging
import os
import pickle
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ragline.errors import StoreError
from ragline.providers.stores.qdrant_edge import generations
from ragline.providers.stores.qdrant_edge.generations import JOURNAL
from ragline.providers.stores.qdrant_edge.hosts import Host
from ragline.providers.stores.qdrant_edge.lifetime import die_with_parent
from ragline.providers.stores.qdrant_edge.table import Entry, ShardTable
from ragline.providers.stores.qdrant_edge.wire import WriteOp

log = logging.getLogger(__name__)

FINAL_REPLAY = 4
"""Journal entries left over after which the final replay runs under the write lock."""
MAX_ROUNDS = 8
"""Replay rounds without the lock at most (each replays what was written during the last)."""
REPLAY_BATCH = 1000
"""Points (or other operations) per replay call: journal entries are sent to the new
generation's host in batches (one round trip each; nothing searches that generation
before the swap), large upserts cut to this size."""


class Phases:
    """When each phase of a build began (``CLOCK_MONOTONIC``: one clock for every process
    of the machine, what a benchmark needs to tell which phase a slow request ran into)
    and how long it took."""

    def __init__(self) -> None:
        self.began: dict[str, float] = {}
        self.took: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = self.began[name] = time.monotonic()
        try:
            yield
        finally:
            self.took[name] = time.monotonic() - start

    def timings(self) -> dict[str, float]:
        """Seconds per phase (``<phase>_s``), ``stall_s`` (what writers waited for: the
        re-copy and the locked step) and ``total_s``."""
        out = {f"{name}_s": took for name, took in self.took.items()}
        out["stall_s"] = self.took.get("recopy", 0.0) + self.took.get("locked", 0.0)
        out["total_s"] = time.monotonic() - min(self.began.values())
        return out


def _batches(entries: list[WriteOp]) -> Iterator[list[WriteOp]]:
    """Journal entries in order, in batches of about ``REPLAY_BATCH`` points."""
    batch: list[WriteOp] = []
    size = 0
    for op in entries:
        ops = [op]
        if op[0] == "upsert" and len(op[1]) > REPLAY_BATCH:
            _, ids, mat, payloads = op
            ops = [("upsert", ids[i:i + REPLAY_BATCH], mat[i:i + REPLAY_BATCH],
                    payloads[i:i + REPLAY_BATCH]) for i in range(0, len(ids), REPLAY_BATCH)]
        for part in ops:
            n = len(part[1]) if part[0] == "upsert" else 1
            if batch and size + n > REPLAY_BATCH:
                yield batch
                batch, size = [], 0
            batch.append(part)
            size += n
    if batch:
        yield batch


def replay(host: Host, entries: list[WriteOp]) -> None:
    """Apply journal entries (write operations) to the new generation, in order."""
    for ops in _batches(entries):
        host.write(ops)


class Builder:
    """One background index build of one shard (see the module's docstring)."""

    def __init__(self, table: ShardTable, key: str, should_stop: Callable[[], bool]) -> None:
        self.table = table
        self.key = key
        self.should_stop = should_stop
        self.phases = Phases()
        self.shard_dir = table.dir(key)
        self.dst = self.shard_dir / generations.next_generation(self.shard_dir)
        self.dim = table.dimension(key)
        self.new: Host | None = None
        self.copied = 0  # journal entries in the copy
        self.replayed = 0  # journal entries replayed into the new generation

    def run(self) -> bool:
        """False when a build of the shard already runs; raises when this one failed
        (the live generation goes on serving, the copy is deleted)."""
        with self.phases.phase("journal"):
            entry = self.table.start_journal(self.key)
        if entry is None:
            return False
        swapped = False
        try:
            self.copy(entry)
            self.build(entry)
            self.open()
            self.replay(entry)
            self.swap(entry)
            swapped = True
        finally:
            if not swapped:
                self.table.end_journal(entry)
                if self.new is not None:
                    self.new.kill()
                shutil.rmtree(self.dst, ignore_errors=True)
                self.table.refill_hosts()
        try:
            with self.phases.phase("close"):
                self.table.retire(entry)
            self.remove(entry.path)
        finally:
            self.table.refill_hosts()
        return True

    def copy(self, entry: Entry) -> None:
        """A copy equal to the live files at one instant -- what a SIGKILL leaves, which
        Edge recovers from its WAL -- without flushing the live generation (a flush holds
        its host's GIL for 0.05-1 s under load: every search waits)."""
        with self.phases.phase("copy"):
            before = _stats(entry.path)
            time.sleep(0.02)  # later writes get a later mtime (the kernel's clock is coarse)
            _presync(entry.path)  # clean pages: the next mmap write updates the mtime
            _copy(entry.path, self.dst, self.table.config.build_nice)
        with self.phases.phase("recopy"), self.table.writes_held(entry):
            _recopy(entry.path, self.dst, before)
            self.copied = len(self.table.journal(entry))  # these are in the copy

    def build(self, entry: Entry) -> None:
        """The operations in the copy are applied once more by the build before it
        optimizes. Replayed after the build instead, each re-upsert would delete its
        point from the fresh HNSW segment, and once most of a segment is deleted Edge's
        walk, which does not cross deleted points, cannot reach the rest (measured: 49
        of the 50 points written before a build's journal started unreachable)."""
        with self.phases.phase("build"):
            _write_journal(self.dst, self.table.journal(entry)[:self.copied])
            # a host of its own, niced from its start: the spare's replacement would
            # start at normal priority while searches run (issue 34: the swap stall)
            self.table.start_host("build", self.dst, self.dim, self.should_stop,
                                  nice=self.table.config.build_nice).close()

    def open(self) -> None:
        with self.phases.phase("load"):
            # the spare, replaced once the build is over (run's end)
            self.new = self.table.start_host("open", self.dst, self.dim, self.should_stop,
                                             refill=False)

    def replay(self, entry: Entry) -> None:
        """Rounds without the write lock, writes flowing, until at most ``FINAL_REPLAY``
        entries are left (or ``MAX_ROUNDS``: writers as fast as the replay never leave it
        a short tail); then the new generation is flushed and warmed, so that the locked
        step is a few entries (in its WAL, like any acknowledged write)."""
        assert self.new is not None
        done, rounds, flushed = self.copied, 0, False
        with self.phases.phase("replay"):
            while not self.should_stop():
                journal = self.table.journal(entry)
                pending = len(journal)
                if pending - done <= FINAL_REPLAY or rounds >= MAX_ROUNDS:
                    if flushed:
                        break
                    with self.phases.phase("flush"):
                        self.new.flush()
                        self.new.warm(self.dim)
                    flushed = True
                    continue
                replay(self.new, journal[done:pending])
                done, rounds = pending, rounds + 1
        if self.should_stop():
            raise StoreError("index build stopped")
        self.replayed = done

    def swap(self, entry: Entry) -> None:
        new = self.new
        assert new is not None

        def finish(journal: list[WriteOp]) -> None:
            replay(new, journal[self.replayed:])
            self.replayed = len(journal)

        with self.phases.phase("locked"):
            self.table.swap(self.key, entry, new, self.dst, finish)

    def remove(self, old: Path) -> None:
        """Delete the replaced generation's directory."""
        if old == self.shard_dir:
            generations.remove_stale(self.shard_dir)  # a shard from before generations
        else:  # by a process: a Python walk of the files holds the GIL between unlinks
            subprocess.run(["rm", "-rf", "--", str(old)], capture_output=True, check=False,
                           preexec_fn=lambda: os.nice(19))

    def timings(self) -> dict[str, float]:
        return {**self.phases.timings(), "replayed": float(self.replayed)}


def _stats(path: Path) -> dict[str, tuple[str, str]]:
    """(size, mtime) of every Edge file under ``path``, by relative path (in a shard
    from before generations, ``path`` also holds ragline's files and the new copy).
    Listed by ``find``: walking ~150 files in Python held the GIL for ~20 ms."""
    for _ in range(5):  # again when Edge renamed or removed a file during the walk
        res = subprocess.run(["find", ".", "-type", "f", "-printf", r"%s %T@ %P\0"],
                             cwd=path, capture_output=True, check=False)
        if res.returncode == 0:
            break
    else:
        raise StoreError("listing the shard's files for an index build failed")
    out: dict[str, tuple[str, str]] = {}
    for item in res.stdout.decode(errors="surrogateescape").split("\0"):
        if not item:
            continue
        size, mtime, rel = item.split(" ", 2)
        top = rel.split("/", 1)[0]
        if top.startswith("ragline_") or generations.is_generation(top) \
                or rel.endswith(".lock"):
            continue
        out[rel] = (size, mtime)
    return out


def _recopy(src: Path, dst: Path, before: dict[str, tuple[str, str]]) -> None:
    """Make ``dst`` equal to ``src`` now, with writes stopped: copy again every file that
    is new or whose size or mtime changed since ``before`` (taken before the first copy;
    writes after :func:`_presync` move the mtime, mmap writes included), and remove the
    files that are gone. The files nobody wrote (the built segments) are not read twice."""
    now = _stats(src)
    changed = [rel for rel, st in now.items() if before.get(rel) != st]
    for rel in set(before) - set(now):
        (dst / rel).unlink(missing_ok=True)
    if not changed:
        return
    res = subprocess.run(["cp", "-a", "--sparse=always", "--parents", *changed, str(dst)],
                         cwd=src, capture_output=True, text=True, check=False,
                         preexec_fn=die_with_parent)
    if res.returncode != 0:
        raise StoreError(f"copying the shard for an index build failed: {res.stderr[-300:]}")


def _presync(path: Path) -> None:
    """Write the live generation's dirty pages back (``fsync`` of each file by ``sync``,
    a process of its own: no GIL, and not the process serving the generation).
    Written-back pages are write-protected again, so the next write to them through
    Edge's memory maps updates the file's mtime, which :func:`_recopy` relies on; and
    the copies then read clean pages."""
    for _ in range(3):  # again when a file was renamed or removed between find and sync
        res = subprocess.run(
            ["sh", "-c", "find . -type f ! -name '*.lock' -exec sync -- {} +"],
            cwd=path, capture_output=True, check=False)
        if res.returncode == 0:
            return
    # otherwise a file written during the copy could go unseen
    raise StoreError("writing the shard's pages back for an index build failed")


def _copy(src: Path, dst: Path, nice: int = 0) -> None:
    """Copy without the GIL and without filling Edge's sparse preallocated files; niced
    like the build process (searches keep the CPU they need)."""
    shutil.rmtree(dst, ignore_errors=True)

    def setup() -> None:
        die_with_parent()
        os.nice(nice)

    res = subprocess.run(["cp", "-a", "--sparse=always", str(src), str(dst)],
                         capture_output=True, text=True, check=False, preexec_fn=setup)
    if res.returncode != 0:
        raise StoreError(f"copying the shard for an index build failed: {res.stderr[-300:]}")
    for lock in dst.rglob("*.lock"):  # never carry another process's lock markers
        lock.unlink(missing_ok=True)


def _write_journal(dst: Path, ops: list[WriteOp]) -> None:
    """The operations the build process applies to the copy before optimizing it (a
    file in the copy, removed by that process; the copy is deleted if the build fails).
    One pickle per operation, yielding between them: this runs in the serving process,
    and one dump of a large journal would hold the GIL for all of it."""
    with open(dst / JOURNAL, "wb") as fh:
        for op in ops:
            pickle.dump(op, fh, protocol=pickle.HIGHEST_PROTOCOL)
            time.sleep(0)


