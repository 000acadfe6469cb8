"""Where a shard's Edge data lives: one directory per index generation.

A background index build (:mod:`.rebuild`) optimizes a *copy* of the shard in
another process and swaps it in. So that the swap is one atomic step and a
crash at any moment leaves one complete, readable generation, the data of
shard ``key`` lives in ``<root>/<key>/<gen>/`` and the small file
``<root>/<key>/ragline_current`` names the live ``<gen>``; it is replaced with
``os.replace`` only after the new generation holds every acknowledged write and
is flushed. Shards created before generations existed keep their data in
``<root>/<key>/`` itself (no pointer file) until their first build.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

POINTER = "ragline_current"
JOURNAL = "ragline_journal.pkl"
"""In a build's copy: the write operations the build applies before optimizing (one
pickle each, written by :mod:`.builder`, removed by the build in :mod:`.host`)."""
_GEN = re.compile(r"^g(\d+)$")


def current(shard_dir: Path) -> Path:
    """The directory holding the live Edge data of the shard at ``shard_dir``."""
    pointer = shard_dir / POINTER
    if pointer.exists():
        return shard_dir / pointer.read_text().strip()
    return shard_dir


def is_generation(name: str) -> bool:
    return _GEN.match(name) is not None


def next_generation(shard_dir: Path) -> str:
    numbers = [int(m.group(1)) for p in shard_dir.iterdir() if (m := _GEN.match(p.name))]
    return f"g{max(numbers, default=0) + 1}"


def point_to(shard_dir: Path, gen: str) -> None:
    """Make ``gen`` the live generation, atomically and durably."""
    tmp = shard_dir / (POINTER + ".tmp")
    with open(tmp, "w") as fh:
        fh.write(gen)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, shard_dir / POINTER)
    fd = os.open(shard_dir, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_stale(shard_dir: Path) -> None:
    """Remove generations that are not live: unfinished builds (a crash or a failed
    build) and replaced ones; and the top-level Edge data of a shard that moved
    into generations. Called when a shard is opened, before Edge loads it."""
    live = current(shard_dir)
    for p in shard_dir.iterdir():
        if p == live or p.name.startswith("ragline_"):
            continue
        if _GEN.match(p.name) or (live != shard_dir and p.name in _EDGE_TOP_LEVEL):
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)


_EDGE_TOP_LEVEL = {"wal", "segments", "edge_config.json", "snapshots", "shard_config.json"}
