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
    def __init__(self, path: Path, reserve_bytes: int, free: FreeBytes = statvfs_free) -> None:
        self.path = path
        self.reserve = reserve_bytes
        self.free = free

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
        return {"free_bytes": free, "reserve_bytes": self.reserve,
                "writes_allowed": free >= self.reserve}

    def check(self, what: str, need: int = 0) -> None:
        """Raise 507 unless ``need`` bytes fit and ``reserve`` bytes stay free."""
        if self.reserve <= 0 and need <= 0:
            return
        try:
            free = self.free(self.path)
        except OSError as exc:  # cannot tell: let the write try (and fail on its own)
            log.warning("cannot read free disk space: %s", exc)
            return
        if free - need < self.reserve:
            log.warning("refusing to %s: %d bytes free, %d needed, reserve %d", what, free,
                        need, self.reserve)
            raise InsufficientStorage(
                f"Not enough free disk space to {what}: {free // (1024 * 1024)} MiB free, "
                f"{self.reserve // (1024 * 1024)} MiB must stay free (setting "
                "disk_reserve_bytes); free some space and retry")
