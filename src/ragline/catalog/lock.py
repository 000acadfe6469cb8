"""One process per data directory, said clearly.

The embedded store and the catalog belong to one process. Without this lock a
second ``ragline serve`` on the same directory started "healthy" and answered
500 ``Can't init WAL`` on every request. The lock is an exclusive ``flock`` on
``<data_dir>/ragline.lock``, which holds the holder's pid and address, so the
second process can say who holds the directory; the kernel releases it when the
holder dies, so a crash never leaves a stale lock.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import IO, Any

from ragline.errors import DataDirInUse

LOCK_FILE = "ragline.lock"


class DataDirLock:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / LOCK_FILE
        self._file: IO[str] | None = None

    def acquire(self, address: str | None) -> None:
        f = open(self.path, "a+")  # noqa: SIM115 - held open for the process's lifetime
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.seek(0)
            holder = _holder(f.read())
            f.close()
            pid = holder.get("pid", "?")
            where = f", serving {holder['address']}" if holder.get("address") else ""
            raise DataDirInUse(
                f"The data directory is in use by another ragline process (pid {pid}{where}). "
                "Stop it first, or talk to it over HTTP.") from None
        f.seek(0)
        f.truncate()
        f.write(json.dumps({"pid": os.getpid(), "address": address}))
        f.flush()
        self._file = f

    def release(self) -> None:
        if self._file is not None:
            try:
                self._file.seek(0)
                self._file.truncate()
                fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
            finally:
                self._file.close()
                self._file = None


def _holder(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}
