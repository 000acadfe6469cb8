"""Background index builds for Qdrant Edge: optimize a copy, replay, swap.

Edge's ``optimize()`` holds the GIL for its whole run (118 s for 20,000 384-d
points with per-value links on the loaded 2-core machine), so no step of it can
run in the serving process. A build therefore:

1. under the shard's write lock (no Edge call): starts a *journal* of every
   write operation from then on;
2. copies the generation's directory (``cp --sparse=always``, no lock: writes
   go on, and every one of them is also in the journal), then, under the write
   lock, copies again the files written meanwhile: the copy now holds every
   operation journaled so far;
3. runs :func:`main` in a niced subprocess on the copy: it loads it (replaying
   the copied WAL), applies the operations journaled up to the copy once more
   (idempotent; a file torn in the copy is made whole), gives keyword/integer
   indexes their per-value HNSW links, optimizes, flushes and closes;
4. opens the built copy -- in a shard process of its own (:mod:`.host`) when
   ``shard_processes`` is on, so that neither its load nor anything after it runs
   in the server's interpreter -- and replays the operations journaled after the
   copy in rounds without the write lock until little is left; flushes it; then,
   under the write lock, replays the rest, checks that it holds exactly as many
   points as the live generation, and points ``ragline_current`` at it (one
   ``os.replace``);
5. hands the shard over: callers that still hold the old generation finish on
   it, later ones move to the new one (``_Shard.successor``); the old one ends
   once its readers are done (its shard process is killed; in-process it is
   closed) and is deleted.

Replaying is correct because upserts and deletes are idempotent and the
journal holds, in order, every operation that could be missing from (or torn
in) the copy. A SIGKILL before step 4's ``os.replace`` leaves the old
generation live with every acknowledged write (Edge's WAL); after it, the new
one holds all of them and takes the later writes. Unfinished generations are
removed when the shard is next opened (:func:`.generations.remove_stale`).
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import qdrant_edge as q

from ragline.errors import StoreError
from ragline.providers.stores.qdrant_edge import generations
from ragline.providers.stores.qdrant_edge.generation import WriteOp
from ragline.providers.stores.qdrant_edge.orphans import die_with_parent, hold_shard

if TYPE_CHECKING:
    from ragline.providers.stores.qdrant_edge.provider import QdrantEdgeStore

log = logging.getLogger(__name__)

# journal entries left over after which the final replay runs under the write lock
_FINAL_REPLAY = 4
# replay rounds without the lock at most (each replays what was written during the last)
_MAX_ROUNDS = 8
# points per replayed upsert: in the server process Edge holds the GIL for an update
# (21 ms per 1,000 points measured), so a request's batch is replayed in slices that keep
# each hold short (a shard process replays in the same slices; its GIL is its own)
_REPLAY_SLICE = 128


def _slices(entries: list[WriteOp]) -> Iterator[list[WriteOp]]:
    """Journal entries in order, large upserts cut into slices of ``_REPLAY_SLICE``."""
    for op in entries:
        if op[0] != "upsert" or len(op[1]) <= _REPLAY_SLICE:
            yield [op]
            continue
        _, ids, mat, payloads = op
        for i in range(0, len(ids), _REPLAY_SLICE):
            j = i + _REPLAY_SLICE
            yield [("upsert", ids[i:j], mat[i:j], payloads[i:j])]


def _replay(new: Any, entries: list[WriteOp]) -> None:
    """Apply journal entries (write operations) to the new generation, in order."""
    for ops in _slices(entries):
        new.write(ops)
        time.sleep(0)  # let a waiting request thread run between slices


def rebuild(store: QdrantEdgeStore, key: str, should_stop: Callable[[], bool]) -> bool:
    from ragline.providers.stores.qdrant_edge.provider import _Shard

    shard_dir = store._dir(key)
    if not store.has_shard(key):
        return False
    phases: dict[str, float] = {"journal": time.monotonic()}
    with store._writing(key) as sh:  # only to start the journal: no Edge call
        if sh.journal is not None:
            return False  # a build is already running
        sh.journal = []
        src = sh.path
    dim = int((shard_dir / "ragline_dim").read_text())
    gen = generations.next_generation(shard_dir)
    dst = shard_dir / gen
    new: Any = None
    swapped = False
    t_flush = t_locked = t_recopy = 0.0
    try:
        t0 = phases["copy"] = time.monotonic()
        # a copy equal to the live files at one instant -- what a SIGKILL leaves, which
        # Edge recovers from its WAL -- without flushing the live generation (a flush holds
        # the GIL of the process serving it for 0.05-1 s under load: every search waits)
        before = _stats(src)
        time.sleep(0.02)  # later writes get a later mtime (the kernel's clock is coarse)
        _presync(src)  # clean pages: the next mmap write to a file updates its mtime
        _copy(src, dst, store.config.build_nice)
        t_copy = time.monotonic() - t0
        phases["recopy"] = time.monotonic()
        with sh.write_lock:  # writers wait while the files written meanwhile are re-copied
            t_recopy = time.monotonic()
            _recopy(src, dst, before)
            # the operations journaled so far are in the copy (in its segments or WAL)
            copied = len(sh.journal)
            t_recopy = time.monotonic() - t_recopy
        # ... and are applied to it once more by the build process before it optimizes
        # (idempotent: a torn file in the copy is made whole). Replayed after the
        # build instead, each re-upsert would delete its point from the fresh HNSW
        # segment, and once most of a segment is deleted Edge's walk, which does not
        # cross deleted points, cannot reach the rest (measured: 49 of the 50 points
        # written before a build's journal started unreachable by any ef)
        phases["build"] = time.monotonic()
        _write_journal(dst, sh.journal[:copied])
        _run_worker(store, dst, dim, should_stop)
        t_build = time.monotonic() - t0 - t_copy
        t_load = phases["open"] = time.monotonic()
        # in a shard process the load is that process's work; in this process Edge holds
        # the GIL while it loads (payload indexes kept 'cold' make it mostly mmap)
        new = store._start_generation("open", dst, dim, should_stop)
        t_load = time.monotonic() - t_load
        done, rounds = copied, 0
        flushed = False
        phases["replay"] = time.monotonic()
        while True:  # replay rounds without the lock: writes keep flowing
            journal = sh.journal
            assert journal is not None
            pending = len(journal)
            if should_stop():
                break
            # writers as fast as the replay would never leave it a short tail: after
            # _MAX_ROUNDS the rest is replayed under the write lock (writers wait for it)
            if pending - done <= _FINAL_REPLAY or rounds >= _MAX_ROUNDS:
                if flushed:
                    break
                # flushed before the lock: the locked step is then a few journal entries
                # (in the new generation's WAL, like any acknowledged write)
                t_flush = phases["new_flush"] = time.monotonic()
                new.flush()
                t_flush = time.monotonic() - t_flush
                new.warm(dim)
                flushed = True
                continue
            _replay(new, journal[done:pending])
            done = pending
            rounds += 1
        if should_stop():
            raise StoreError("index build stopped")
        t_locked = phases["locked"] = time.monotonic()
        with sh.write_lock:
            if sh.closed or store._shards.get(key) is not sh:
                raise StoreError("the shard was dropped during the index build")
            assert sh.journal is not None
            _replay(new, sh.journal[done:])
            # Edge's per-segment counters (no live optimizer: a point is in one
            # segment): ~0.1 ms, where an exact count walked 1M ids for 60-85 ms with
            # the GIL of the old generation's process held, and searches waited for it
            have = int(new.status()[0])
            want = int(sh.gen.status()[0])
            if have != want:
                raise StoreError(f"index build of {key} holds {have} points, not {want}")
            generations.point_to(shard_dir, gen)
            successor = _Shard(new, dst, sh.fields)
            successor.has_text = sh.has_text
            with store._open_lock:
                store._shards[key] = successor
            sh.successor = successor
            sh.journal = None
            swapped = True
        t_locked = time.monotonic() - t_locked
    finally:
        if not swapped:
            sh.journal = None
            if new is not None:
                discard = getattr(new, "discard", None)
                (discard or new.close)()
            shutil.rmtree(dst, ignore_errors=True)
    with sh.lock.exclusive():  # waits for searches still running on the old generation
        sh.closed = True  # later callers of it move on to the successor
    t_close = phases["retire"] = time.monotonic()
    sh.retire()  # a shard process is killed; in this process: Edge work under the GIL
    t_close = time.monotonic() - t_close
    hosted = store.config.shard_processes
    # what requests waited for: writers, the re-copy and the locked step; in-process every
    # request also waits for Edge's load, flush and close (they hold the GIL)
    stall = t_recopy + t_locked + (0.0 if hosted else t_load + t_flush + t_close)
    store.last_build = {"recopy_s": t_recopy, "copy_s": t_copy, "build_s": t_build,
                        "load_s": t_load, "flush_s": t_flush, "locked_s": t_locked,
                        "close_s": t_close, "stall_s": stall, "replayed": len(journal),
                        "total_s": time.monotonic() - t0, "shard_processes": float(hosted)}
    phases["end"] = time.monotonic()
    store.last_phases = phases  # monotonic start of each step (benchmarks)
    log.info("index build of %s: %s", key, store.last_build)
    # when each step began (CLOCK_MONOTONIC, one clock for every process of the machine):
    # what a benchmark needs to tell which step a slow request ran into
    log.info("index build steps of %s: %s", key,
             {name: round(at, 4) for name, at in phases.items()})
    if src == shard_dir:
        generations.remove_stale(shard_dir)  # a shard from before generations
    else:  # by a process: a Python walk of the files holds the GIL between unlinks
        subprocess.run(["rm", "-rf", "--", str(src)], capture_output=True, check=False,
                       preexec_fn=lambda: os.nice(19))
    return True


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


_JOURNAL = "ragline_journal.pkl"


def _write_journal(dst: Path, ops: list[WriteOp]) -> None:
    """The operations the build process applies to the copy before optimizing it (a
    file in the copy, removed by that process; the copy is deleted if the build fails).
    One pickle per operation, yielding between them: this runs in the serving process,
    and one dump of a large journal would hold the GIL for all of it."""
    with open(dst / _JOURNAL, "wb") as fh:
        for op in ops:
            pickle.dump(op, fh, protocol=pickle.HIGHEST_PROTOCOL)
            time.sleep(0)


def _run_worker(store: QdrantEdgeStore, dst: Path, dim: int,
                should_stop: Callable[[], bool]) -> None:
    cfg = store.config.model_dump(mode="json")
    cmd = [sys.executable, "-m", "ragline.providers.stores.qdrant_edge.rebuild",
           str(dst), str(dim), json.dumps(cfg)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            preexec_fn=die_with_parent)
    while True:
        try:
            _, err = proc.communicate(timeout=0.5)
            break
        except subprocess.TimeoutExpired:
            if should_stop():
                proc.kill()
                proc.wait()
                raise StoreError("index build stopped") from None
    if proc.returncode != 0:
        tail = err.decode(errors="replace")[-500:] if err else ""
        raise StoreError(f"index build process failed ({proc.returncode}): {tail}")


def main(argv: list[str]) -> int:
    """The build process: ``python -m ...rebuild DIR DIM CONFIG_JSON``."""
    from ragline.providers.stores.qdrant_edge.provider import (
        QdrantEdgeConfig,
        QdrantEdgeStore,
    )

    path, dim, cfg_json = argv[0], int(argv[1]), argv[2]
    hold_shard(Path(path).parent)  # until this process exits
    config = QdrantEdgeConfig(**json.loads(cfg_json))
    os.nice(config.build_nice)
    store = QdrantEdgeStore.__new__(QdrantEdgeStore)
    store.config = config
    shard = q.EdgeShard.load(path, store._edge_config(dim))
    journal = Path(path) / _JOURNAL
    if journal.exists():
        from ragline.providers.stores.qdrant_edge.generation import Generation
        from ragline.providers.stores.qdrant_edge.host import search_config

        gen = Generation(shard, search_config(config))
        with open(journal, "rb") as fh:
            while fh.peek(1):
                gen.write([pickle.load(fh)])
        journal.unlink()
    for field, info in shard.info().payload_schema.items():
        params = reindex_params(field, info, config.filter_links, config.index_memory)
        if params is not None:  # links or placement as configured, for older shards too
            shard.update(q.UpdateOperation.delete_field_index(field))
            shard.update(q.UpdateOperation.create_field_index(field, params))
    shard.optimize()
    shard.flush()
    shard.close()
    return 0


def reindex_params(field: str, info: Any, links: bool, memory_name: str) -> Any | None:
    """New index parameters for ``field`` when its index lacks the per-value links or the
    memory placement the config asks for; None when it is as configured."""
    from ragline.providers.stores.qdrant_edge.provider import (
        _index_params,
        base_index_params,
        index_memory,
    )

    memory = index_memory(memory_name)
    base = base_index_params(field, memory)
    if base is not None:
        placed = getattr(info.params, "memory", None) == getattr(base, "memory", None)
        return None if placed else base
    placed = getattr(info.params, "memory", None) == memory
    kind = {q.PayloadSchemaType.Keyword: "keyword", q.PayloadSchemaType.Integer: "integer",
            q.PayloadSchemaType.Float: "float"}.get(info.data_type)
    if kind is None:
        return None
    want_links = links and kind != "float" and field.startswith("metadata.")
    linked = bool(getattr(info.params, "enable_hnsw", False))
    if placed and linked == want_links:
        return None
    return _index_params(kind, want_links, memory)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
