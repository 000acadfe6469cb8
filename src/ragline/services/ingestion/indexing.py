"""Background index builds: collections that grow get their HNSW and payload
indexes built without stopping the server.

A store that can build indexes off the serving path (Qdrant Edge:
:meth:`QdrantEdgeStore.build_index`, a copy optimized in a subprocess and
swapped in) is watched by one daemon thread. A shard is rebuilt when the points
outside indexed segments reach ``min_points`` and ``growth`` times the indexed ones:
below that, exhaustive search over the unindexed part costs a few ms, and every
build copies the whole shard. One build runs at a time (the machine's cores are
also serving).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Protocol, runtime_checkable

log = logging.getLogger(__name__)


@runtime_checkable
class BackgroundIndexing(Protocol):
    """What a store offers for building its indexes in the background."""

    def open_keys(self) -> list[str]: ...

    def index_status(self, key: str) -> tuple[int, int]: ...

    def build_index(self, key: str, should_stop: Callable[[], bool] | None = None) -> bool: ...


class IndexingService:
    def __init__(self, store: object, min_points: int, growth: float,
                 interval_s: float) -> None:
        self.store = store if isinstance(store, BackgroundIndexing) else None
        self.min_points = min_points
        self.growth = growth
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.builds = 0
        self.failures = 0
        self.building: str | None = None
        self._built_at: dict[str, int] = {}  # points at the last build, per shard

    def start(self) -> None:
        """Start watching (no-op for stores without background builds, or twice)."""
        if self.store is None or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="ragline-indexing",
                                        daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop; a build in progress is abandoned (its copy is removed, nothing is lost)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def due(self, points: int, indexed: int, built_at: int = 0) -> bool:
        """A build is due when enough points are unindexed; and, after a build, only once
        the shard has grown again (points Edge chose not to index do not loop builds)."""
        unindexed = points - indexed
        grown = points - built_at >= self.min_points
        return unindexed >= self.min_points and unindexed >= self.growth * indexed and grown

    def run_once(self) -> int:
        """Build every shard that is due; returns how many were built."""
        assert self.store is not None
        built = 0
        for key in self.store.open_keys():
            if self._stop.is_set():
                break
            try:
                points, indexed = self.store.index_status(key)
                if not self.due(points, indexed, self._built_at.get(key, 0)):
                    continue
                self.building = key
                self._built_at[key] = points
                if self.store.build_index(key, self._stop.is_set):
                    built += 1
                    self.builds += 1
            except Exception as exc:  # the next round tries again; serving goes on
                self.failures += 1
                log.warning("background index build of shard %s failed: %s", key, exc)
            finally:
                self.building = None
        return built

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.run_once()

    def pending(self) -> int:
        """Open shards whose build is due now (the next rounds will build them)."""
        if self.store is None:
            return 0
        n = 0
        for key in self.store.open_keys():
            try:
                points, indexed = self.store.index_status(key)
            except Exception:  # dropped while we looked
                continue
            n += self.due(points, indexed, self._built_at.get(key, 0)) and key != self.building
        return n

    def stats(self) -> dict[str, object]:
        """For ``/info``: builds so far, whether one runs, how many are due, and the
        timings of the last one. ``last_swap_stall_ms`` is how long requests were held
        by the build (the store's ``stall_s``: with shard processes the flush that starts
        it and the final replay under the write lock; in-process also Edge's load and
        close of the generations, which hold the GIL)."""
        last = getattr(self.store, "last_build", None) or {}
        stall = float(last.get("stall_s", sum(
            float(last.get(k, 0.0)) for k in ("load_s", "locked_s", "close_s"))))
        return {"enabled": self.store is not None and self._thread is not None,
                "builds": self.builds, "failures": self.failures,
                "building": self.building is not None, "pending": self.pending(),
                "last_swap_stall_ms": round(stall * 1000, 1) if last else None,
                "last_build": {k: round(float(v), 3) for k, v in last.items()}}
