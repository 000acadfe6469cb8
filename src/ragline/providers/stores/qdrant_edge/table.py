"""The open generations of a store's shards, and the only code that touches them.

Each open shard has one :class:`Entry`: its live generation (a :class:`.hosts.Host`),
the locks that order calls to it, and, while a background build runs, the *journal*
of its writes. The :class:`ShardTable` opens, creates, reads, writes, journals,
swaps, retires and drops them; :mod:`.builder` and the store go through its methods.

Locks, per entry: ``lock`` (a readers-writer lock) is held shared by every call and
exclusively to retire the generation (no call runs on a generation being ended);
``write_lock`` orders writes and is what a build's locked steps hold. An entry a
build replaced has a ``successor``: callers that waited for it move on.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ragline.core.sparse import copy_tree_sparse
from ragline.errors import ShardGone, StoreError
from ragline.providers.stores.qdrant_common.fields import FieldKinds
from ragline.providers.stores.qdrant_edge import generations
from ragline.providers.stores.qdrant_edge.config import QdrantEdgeConfig
from ragline.providers.stores.qdrant_edge.hosts import Host, Spawner
from ragline.providers.stores.qdrant_edge.lifetime import wait_for_previous_owners
from ragline.providers.stores.qdrant_edge.locks import RWLock
from ragline.providers.stores.qdrant_edge.wire import WriteOp

DIM_MARKER = "ragline_dim"


class Entry:
    """One open generation of a shard (see the module's docstring)."""

    def __init__(self, host: Host, path: Path, fields: FieldKinds) -> None:
        self.gen = host
        self.path = path  # the generation's Edge directory
        self.fields = fields
        self.lock = RWLock()
        self.write_lock = threading.Lock()
        self.closed = False
        self.has_text: bool | None = None  # read once: the text index is made with the shard
        self.journal: list[WriteOp] | None = None
        self.successor: Entry | None = None


class ShardTable:
    def __init__(self, root: Path, config: QdrantEdgeConfig) -> None:
        self.root = root
        self.config = config
        self._entries: dict[str, Entry] = {}
        self._open_lock = threading.Lock()
        self.hosts = Spawner(prestart=bool(self.keys()))

    # -- shards on disk ------------------------------------------------------------
    def dir(self, key: str) -> Path:
        if not key or "/" in key or key.startswith("."):
            raise StoreError(f"bad shard key {key!r}")
        return self.root / key

    def exists(self, key: str) -> bool:
        return key in self._entries or (self.dir(key) / DIM_MARKER).exists()

    def keys(self) -> list[str]:
        return sorted(p.name for p in self.root.iterdir()
                      if p.is_dir() and not p.name.startswith("."))

    def open_keys(self) -> list[str]:
        return list(self._entries)

    def dimension(self, key: str) -> int:
        return int((self.dir(key) / DIM_MARKER).read_text())

    def start_host(self, mode: str, path: Path, dim: int,
                   should_stop: Callable[[], bool] | None = None, *, nice: int = 0,
                   refill: bool = True) -> Host:
        """A host for the generation at ``path`` (:meth:`.hosts.Spawner.start`)."""
        return self.hosts.start(mode, path, dim, self.config.model_dump(mode="json"),
                                should_stop, nice=nice, refill=refill)

    def refill_hosts(self) -> None:
        """Replace the spare host a ``refill=False`` start took."""
        self.hosts.refill()

    # -- open, create, drop, close ---------------------------------------------------
    def _open(self, key: str) -> Entry | None:
        entry = self._entries.get(key)  # the hot path: no lock
        if entry is not None:
            return entry
        with self._open_lock:
            entry = self._entries.get(key)
            if entry is not None:
                return entry
            path = self.dir(key)
            if not (path / DIM_MARKER).exists():
                return None
            try:
                wait_for_previous_owners(path)
                generations.remove_stale(path)
                data = generations.current(path)
                host = self.start_host("open", data, self.dimension(key))
            except Exception as exc:
                raise StoreError(f"cannot open shard {key}: {exc}") from exc
            entry = self._entries[key] = Entry(host, data, FieldKinds(path / "ragline_fields.json"))
            return entry

    def create(self, key: str, dimension: int) -> None:
        with self._open_lock:
            path = self.dir(key)
            marker = path / DIM_MARKER
            if marker.exists() or key in self._entries:
                existing = int(marker.read_text())
                if existing != dimension:
                    raise StoreError(f"shard {key} has dimension {existing}, not {dimension}")
                return
            if path.exists():  # leftover of a crash before the marker was written
                wait_for_previous_owners(path)
                shutil.rmtree(path)
            path.mkdir(parents=True)
            host = self.start_host("create", path / "g1", dimension)
            generations.point_to(path, "g1")
            tmp = path / (DIM_MARKER + ".tmp")
            tmp.write_text(str(dimension))
            tmp.replace(marker)  # the marker makes the shard visible, atomically
            self._entries[key] = Entry(host, path / "g1", FieldKinds(path / "ragline_fields.json"))

    def drop(self, key: str) -> None:
        path = self.dir(key)
        with self._open_lock:
            entry = self._entries.pop(key, None)
            # without its marker the shard can no longer be (re)opened by a racing reader
            (path / DIM_MARKER).unlink(missing_ok=True)
        if entry is not None:
            self.retire(entry)  # its directory goes next: nothing to flush
        if path.exists():
            shutil.rmtree(path, ignore_errors=True)

    def close(self) -> None:
        with self._open_lock:
            for entry in self._entries.values():
                entry.gen.close()
            self._entries.clear()
        self.hosts.close()

    def snapshot(self, dest: Path) -> list[str]:
        """Copy every shard into ``dest/<key>/`` while writes wait (no shard created,
        dropped or opened; every open one flushed); searches go on. A shard without
        its marker is half-created or being dropped and is left out."""
        dest.mkdir(parents=True, exist_ok=True)
        copied: list[str] = []
        with self._open_lock:
            opened = [self._entries[k] for k in sorted(self._entries)]
            held: list[threading.Lock] = []
            try:
                for entry in opened:
                    entry.write_lock.acquire()
                    held.append(entry.write_lock)
                for entry in opened:
                    if not entry.closed:
                        entry.gen.flush()
                for key in self.keys():
                    if (self.root / key / DIM_MARKER).exists():
                        copy_tree_sparse(self.root / key, dest / key)  # Edge files are sparse
                        copied.append(key)
            finally:
                for lock in reversed(held):
                    lock.release()
        return copied

    # -- calls -----------------------------------------------------------------------
    @contextmanager
    def reading(self, key: str) -> Iterator[Entry | None]:
        """The live generation of ``key``, held for one call (None: no such shard). A
        generation replaced by a build while we waited hands over to its successor; a
        dropped shard is :class:`ShardGone`."""
        for _ in range(8):
            entry = self._open(key)
            if entry is None:
                yield None
                return
            with entry.lock.shared():
                if not entry.closed:
                    yield entry
                    return
                if entry.successor is None:
                    raise ShardGone("The collection was emptied or deleted while this "
                                    "request ran; retry it")
        raise ShardGone("The collection changed repeatedly while this request ran; retry it")

    @contextmanager
    def writing(self, key: str) -> Iterator[Entry]:
        """The live generation of ``key`` with its write lock: no write lands in a
        generation that a build has just replaced."""
        for _ in range(8):
            with self.reading(key) as entry:
                if entry is None:
                    raise StoreError(f"shard {key} does not exist")
                with entry.write_lock:
                    if entry.successor is None:
                        yield entry
                        return
        raise ShardGone("The collection changed repeatedly while this request ran; retry it")

    @staticmethod
    def write(entry: Entry, ops: list[WriteOp], sent: list[WriteOp] | None = None) -> list[int]:
        """Writes, in order (the caller holds ``write_lock``); journaled during a build.
        ``sent``: what the generation gets instead (an upsert replaced by the token of
        its prepared points); the journal always gets ``ops``."""
        out: list[int] = entry.gen.write(sent if sent is not None else ops)
        if entry.journal is not None:
            entry.journal.extend(ops)
        return out

    # -- what a background build does (:mod:`.builder`) ---------------------------------
    def start_journal(self, key: str) -> Entry | None:
        """Journal every write of ``key`` from now on; None when a build already runs."""
        with self.writing(key) as entry:
            if entry.journal is not None:
                return None
            entry.journal = []
            return entry

    @staticmethod
    def journal(entry: Entry) -> list[WriteOp]:
        assert entry.journal is not None
        return entry.journal

    @staticmethod
    @contextmanager
    def writes_held(entry: Entry) -> Iterator[None]:
        with entry.write_lock:
            yield

    @staticmethod
    def end_journal(entry: Entry) -> None:
        entry.journal = None

    def swap(self, key: str, entry: Entry, host: Host, path: Path,
             finish: Callable[[list[WriteOp]], None]) -> None:
        """Make the generation ``host`` serves (at ``path``) the live one of ``key``.
        Under the write lock: ``finish`` gets the journal (it replays what is left);
        both generations must then hold as many points, and the pointer file moves."""
        with entry.write_lock:
            if entry.closed or self._entries.get(key) is not entry:
                raise StoreError("the shard was dropped during the index build")
            finish(self.journal(entry))
            # Edge's per-segment counters: ~0.1 ms, where an exact count walked 1M ids
            # for 60-85 ms in the old generation's host, and searches waited for it
            have, want = int(host.status()[0]), int(entry.gen.status()[0])
            if have != want:
                raise StoreError(f"index build of {key} holds {have} points, not {want}")
            generations.point_to(self.dir(key), path.name)
            successor = Entry(host, path, entry.fields)
            successor.has_text = entry.has_text
            with self._open_lock:
                self._entries[key] = successor
            entry.successor = successor
            entry.journal = None

    @staticmethod
    def retire(entry: Entry) -> None:
        """End a generation that was replaced or dropped, once its callers are done
        (later ones move on to its successor); its host is killed: the directory goes."""
        with entry.lock.exclusive():
            entry.closed = True
        entry.gen.kill()

    def host(self, key: str) -> Host | None:
        """The host serving the live generation of ``key`` (tests, benchmarks: its pid)."""
        with self.reading(key) as entry:
            return None if entry is None else entry.gen

    def call(self, key: str, method: str, *args: Any, default: Any = None) -> Any:
        """``method`` of the live generation of ``key`` (``default`` without the shard)."""
        with self.reading(key) as entry:
            return default if entry is None else entry.gen.call(method, *args)
