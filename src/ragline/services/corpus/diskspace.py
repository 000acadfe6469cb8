"""Free disk space as a resource: refuse writes (507) before the disk is full.

Qdrant Edge writes through memory-mapped, pre-allocated sparse files; when the
disk fills, a write into such a page is not an error the engine can report but
a SIGBUS that kills the process with every request in flight, and reopening a
shard needs tens of MB, so after freeing a few MB the restart crashed again
(issue 10). So every write path (documents, ingestion, empty, shard creation,
uploads queued on disk) first checks that the data directory's filesystem keeps
``disk_reserve_bytes`` free after the write, and answers
:class:`~ragline.errors.InsufficientStorage` *before* the store is touched.
Reads never check, so the server keeps serving; once space is freed writes
succeed again without any manual step, because the check is made each time.

The reserve always covers reopening every shard (issue 32: a lowered
``disk_reserve_bytes`` let a clean restart fail to reopen one): a store that can tell
what reopening its shards may write (``reopen_bytes``, the embedded store: each shard's
WAL, replayed into its segments, plus a margin) raises the reserve to that figure.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from ragline.errors import InsufficientStorage

log = logging.getLogger(__name__)

FreeBytes = Callable[[Path], int]


def statvfs_free(path: Path) -> int:
    """Bytes an unprivileged process may still write on ``path``'s filesystem."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


class DiskGuard:
    def __init__(self, path: Path, reserve_bytes: int, free: FreeBytes = statvfs_free,
                 floor: Callable[[], int] | None = None) -> None:
        self.path = path
        self.setting = reserve_bytes
        self.free = free
        self.floor = floor  # bytes reopening every shard may write (the store's figure)

    @property
    def reserve(self) -> int:
        """``disk_reserve_bytes``, raised to what reopening every shard needs (0: off)."""
        if self.setting <= 0 or self.floor is None:
            return self.setting
        try:
            return max(self.setting, self.floor())
        except OSError:
            return self.setting

    @reserve.setter
    def reserve(self, value: int) -> None:
        self.setting = value

    @classmethod
    def unlimited(cls) -> DiskGuard:
        """No check at all (services built without a facade, e.g. in unit tests)."""
        return cls(Path("."), 0, lambda _p: 1 << 62)

    def status(self) -> dict[str, object]:
        """For ``/health``: free bytes, the reserve, and whether writes are accepted."""
        try:
            free = self.free(self.path)
        except OSError:
            return {"free_bytes": None, "reserve_bytes": self.reserve, "writes_allowed": True}
        reserve = self.reserve
        return {"free_bytes": free, "reserve_bytes": reserve, "writes_allowed": free >= reserve}

    def check(self, what: str, need: int = 0) -> None:
        """Raise 507 unless ``need`` bytes fit and ``reserve`` bytes stay free."""
        if self.setting <= 0 and need <= 0:
            return
        try:
            free = self.free(self.path)
        except OSError as exc:  # cannot tell: let the write try (and fail on its own)
            log.warning("cannot read free disk space: %s", exc)
            return
        reserve = self.reserve
        if free - need < reserve:
            log.warning("refusing to %s: %d bytes free, %d needed, reserve %d", what, free,
                        need, reserve)
            raised = (", raised to what reopening every shard needs"
                      if reserve > self.setting else "")
            raise InsufficientStorage(
                f"Not enough free disk space to {what}: {free // (1024 * 1024)} MiB free, "
                f"{reserve // (1024 * 1024)} MiB must stay free (setting "
                f"disk_reserve_bytes{raised}); free some space and retry")
