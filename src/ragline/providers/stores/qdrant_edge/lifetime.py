"""Processes that must not outlive the server, and the locks that keep them apart.

A host process (:mod:`.host`: serving or building a generation) and a ``cp`` of a
shard work in a shard's directory. Should the server die, the next one removes
unfinished generations and opens the live one; a process of the dead server still
loading, flushing or writing there would race it. Two ways end them:

* everywhere: a host reads its control socket (its stdin) and exits at end of file,
  which the kernel gives it when the server is gone (:mod:`.host`);
* on Linux also :func:`die_with_parent` (``PR_SET_PDEATHSIG``): the kernel kills the
  process at once, whatever it is doing -- a host busy in a GIL-holding Edge call, or
  stopped, cannot read its stdin. The signal follows the *thread* that started the
  process, so hosts are started from one thread that lives as long as the store
  (:class:`.hosts.Spawner`).

Since neither is instantaneous, each such process holds a shared lock on the
shard's ``ragline_busy`` while it lives, and a server waits for the lock to be free
before it first touches the shard. This is the only module with Linux-only calls.
"""

from __future__ import annotations

import fcntl
import os
import signal
import time
from pathlib import Path

from ragline.errors import StoreError

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int | None = None) -> None:
    """SIGKILL this process when its parent dies (Linux; elsewhere a no-op). Also when
    the parent (``parent``: its pid, else the parent now) is already gone: the check
    after the call closes that race."""
    parent = os.getppid() if parent is None else parent
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:  # not Linux
        return
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)


def _wait_for_exclusive(path: Path, timeout: float) -> None:
    """Wait until nobody holds a ``flock`` on ``path`` (taken and released at once);
    nothing to wait for when ``path`` does not exist."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(fd, fcntl.LOCK_UN)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise StoreError("the shard is in use by another process") from None
                time.sleep(0.05)
    finally:
        os.close(fd)


def wait_until_released(generation: Path, timeout: float = 30.0) -> None:
    """Wait until no process holds the WAL lock of the Edge shard at ``generation``.

    Edge locks the WAL directory (``flock``) only after it has opened the segments,
    so a load that fails on the lock has already touched the files of a process that
    still works in them (the previous server's shard process, until the kernel kills
    it). Loading only once the lock is free keeps the two apart. A shard without a
    WAL directory yet (being created) has nothing to wait for."""
    _wait_for_exclusive(generation / "wal", timeout)


BUSY = "ragline_busy"


def hold_shard(shard_dir: Path) -> int:
    """Mark this process as working in the shard at ``shard_dir`` until it exits: a
    shared ``flock`` on its ``ragline_busy`` file, released by the kernel when the
    process dies (shard processes and build processes call this first)."""
    fd = os.open(shard_dir / BUSY, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_SH)
    return fd  # kept open for the life of the process


def wait_for_previous_owners(shard_dir: Path, timeout: float = 30.0) -> None:
    """Before a server first touches a shard (removes stale generations, recreates a
    half-created shard, loads the live generation): wait until no process of an
    earlier server still works in it. The kernel kills those with their parent, but
    not at once; under load that took long enough for the next server to delete files
    a dying host was writing, or the reverse (seen: `Failed to flush …
    tracker_journal.dat: No such file` in the chaos test)."""
    _wait_for_exclusive(shard_dir / BUSY, timeout)
