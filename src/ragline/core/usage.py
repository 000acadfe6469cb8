"""Bytes a directory really holds on disk, and a cache that walks it at most every few seconds.

Stores preallocate sparse files (Qdrant Edge keeps 32 MiB files for a few KB of data),
so the allocated blocks are counted, not ``st_size``. Counting stats every file, and
Edge keeps ~70 files in a shard: a data directory of many collections is thousands of
stats, and ``/health`` walked it twice per call (the store's directory, then the whole
data directory). Load balancers poll ``/health`` every few seconds and give up after one
or two, so :class:`UsageCache` answers from the last walk while it is younger than
``max_age_s`` and lets one caller at a time walk again; ``storage_bytes`` is at most that
old, which is what a figure of disk use is for.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

DEFAULT_MAX_AGE_S = 5.0


def disk_usage(path: Path) -> int:
    """Bytes really allocated under ``path``. Files and folders that vanish while they
    are counted (a shard dropped in the background after an empty or delete) count as
    nothing: ``os.walk`` skips folders it cannot list, where ``Path.rglob`` raised and
    made ``/info`` a 500 (issue 10)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                continue
    return total


class UsageCache:
    """``disk_usage(path)``, walked again only when the last walk is ``max_age_s`` old;
    concurrent callers of a stale value wait for one walk instead of each making one."""

    def __init__(self, path: Path, max_age_s: float = DEFAULT_MAX_AGE_S, *,
                 clock: Callable[[], float] = time.monotonic,
                 walk: Callable[[Path], int] = disk_usage) -> None:
        self.path = path
        self.max_age_s = max_age_s
        self._clock = clock
        self._walk = walk
        self._lock = threading.Lock()
        self._value = 0
        self._at: float | None = None  # when the last walk ended

    def _fresh(self) -> bool:
        return self._at is not None and self._clock() - self._at < self.max_age_s

    def get(self) -> int:
        if self._fresh():
            return self._value
        with self._lock:
            if not self._fresh():  # another caller may have walked while we waited
                self._value = self._walk(self.path)
                self._at = self._clock()
            return self._value
