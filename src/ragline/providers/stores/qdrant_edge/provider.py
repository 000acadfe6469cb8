"""The Qdrant Edge store: one Edge shard per collection, served by host processes.

This class is the store protocol's adapter: it turns each call into calls of the
live generation of a shard, which the :class:`.table.ShardTable` owns and a host
process serves (:mod:`.host`: Edge's binding holds the GIL in every call, so no
Edge call is made in the server's process); :mod:`.builder` runs background index
builds. ``docs/storage.md`` describes the whole model. Design points, each from
the engine bake-off (``research/engine-bakeoff.md``):

* A batch that fails inside Edge can be partly written, so the service validates
  everything before calling :meth:`upsert`, and a request's records go to Edge as
  one update operation (SIGKILL leaves it whole or absent).
* Keyword and integer payload indexes get per-value HNSW links, so filtered HNSW
  keeps its recall; the search plan is chosen per query from Edge's match-count
  estimate (:func:`.queries.dense_plan`), and a graph search that returns fewer hits
  than asked for is redone exactly, never answered short.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ragline.core.filters import Node
from ragline.core.ids import point_id
from ragline.core.tenancy import TenantScope
from ragline.core.types import Page, Record, Scalar, ScoredRecord, StoreQuery
from ragline.core.usage import UsageCache, disk_usage
from ragline.errors import StoreError
from ragline.providers.base import Health, ProviderConfig, config_schema
from ragline.providers.stores.base import scalar_sort_key
from ragline.providers.stores.qdrant_common.filters import bool_path, field_path, point_payload
from ragline.providers.stores.qdrant_edge.builder import Builder
from ragline.providers.stores.qdrant_edge.config import QdrantEdgeConfig
from ragline.providers.stores.qdrant_edge.table import Entry, ShardTable
from ragline.providers.stores.qdrant_edge.wire import WriteOp

if TYPE_CHECKING:
    from ragline.providers.stores.qdrant_edge.queries import DensePlan

__all__ = ["QdrantEdgeConfig", "QdrantEdgeStore"]

log = logging.getLogger(__name__)

PREPARES_IN_FLIGHT = 2
"""Prepare calls of one write sent and not yet answered. The host makes one part's
points at a time (``Generation.prepare``), so two keep it busy while the caller checks
the next part; more would only hold more sockets and serving threads."""

SHARD_REOPEN_SLACK = 8 * 1024 * 1024
"""What opening a shard writes besides replaying its WAL (a fresh WAL segment's first
pages, the segments' status and tracker pages), with room to spare."""

Upsert = tuple[list[Any], np.ndarray, list[dict[str, Any]]]


def _answers(pending: list[Callable[[], int]], tokens: list[int]) -> Exception | None:
    """Wait for every prepare sent (appending the tokens); the first failure, if any."""
    failure: Exception | None = None
    for finish in pending:
        try:
            tokens.append(finish())
        except Exception as exc:
            failure = failure or exc
    return failure


def _index_path(field: str, kind: str) -> str:
    return bool_path(field) if kind == "bool" else field_path(field)


def wal_bytes(root: Path) -> int:
    """Bytes the WALs of every shard under ``root`` hold on disk."""
    try:
        shards = [p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")]
    except OSError:
        return 0
    return sum(disk_usage(wal) for shard in shards for wal in shard.glob("*/wal"))


class QdrantEdgeStore:
    name: ClassVar[str] = "qdrant-edge"
    kind: ClassVar[str] = "store"
    Config: ClassVar[type[ProviderConfig]] = QdrantEdgeConfig
    CAPABILITIES: ClassVar[list[str]] = [
        "collections", "search", "metadata_filtering", "hybrid", "facets", "persistence",
    ]

    def __init__(self, config: QdrantEdgeConfig) -> None:
        self.root = Path(config.path)
        self.root.mkdir(parents=True, exist_ok=True)
        self.table = ShardTable(self.root, config)
        self._usage = UsageCache(self.root)  # health's storage_bytes: one walk per 5 s
        self.wal_usage = UsageCache(self.root, walk=wal_bytes)  # the disk reserve's floor
        self._sizes: dict[str, UsageCache] = {}  # size_bytes per shard, likewise
        self.last_build: dict[str, float] = {}  # timings of the last background build
        self.last_phases: dict[str, float] = {}  # when each of its phases began (monotonic)

    @property
    def config(self) -> QdrantEdgeConfig:
        """The options (the table's: generations opened later get a new value)."""
        return self.table.config

    @config.setter
    def config(self, value: QdrantEdgeConfig) -> None:
        self.table.config = value

    # -- shards -------------------------------------------------------------------
    def has_shard(self, key: str) -> bool:
        return self.table.exists(key)

    def shard_keys(self) -> list[str]:
        return self.table.keys()

    def create_shard(self, key: str, dimension: int) -> None:
        self.table.create(key, dimension)

    def drop_shard(self, key: str) -> None:
        self._sizes.pop(key, None)
        self.table.drop(key)

    def close(self) -> None:
        self.table.close()

    def snapshot(self, dest: Path) -> list[str]:
        """Copy every shard into ``dest/<key>/`` while writes wait; return the keys copied.
        Qdrant Edge has no snapshot *writer* (only ``unpack_snapshot`` and
        ``update_from_snapshot`` for snapshots made by a Qdrant server), so the online
        copy is the table's (:meth:`.table.ShardTable.snapshot`)."""
        return self.table.snapshot(dest)

    # -- writes ------------------------------------------------------------------
    def upsert(self, key: str, records: list[Record]) -> None:
        if records:  # nothing to write is not an error, shard or none (as before parts)
            self.upsert_parts(key, [records])

    def upsert_parts(self, key: str, parts: Iterable[list[Record]]) -> None:
        """One write of every part's records. Edge's points are made before the write
        lock (``Generation.prepare``: most of the time of a bulk write), part by part as
        ``parts`` yields them: the host makes one part's points while the caller
        produces (validates) the next, then one update writes them all. Measured with
        ``store_batch`` (``benchmarks/bench_bulk_write.py --library``): see BENCHMARKS.md."""
        if not self.has_shard(key):
            raise StoreError(f"shard {key} does not exist")
        records: list[Record] = []
        args: list[Upsert] = []
        tokens: list[int] = []
        prepared_in: Entry | None = None
        used = False
        try:
            with self.table.reading(key) as prepared_in:
                if prepared_in is None:
                    raise StoreError(f"shard {key} does not exist")
                self._prepare_parts(prepared_in, parts, records, args, tokens)
            if not records:
                return
            ids, rows, payloads = args[0] if len(args) == 1 else (  # what the journal keeps
                [i for part in args for i in part[0]], np.concatenate([a[1] for a in args]),
                [p for part in args for p in part[2]])
            with self.table.writing(key) as sh:
                to_index, to_drop = sh.fields.observe([r.metadata for r in records])
                ops: list[WriteOp] = [("delete_index", _index_path(f, kind))
                                      for f, kind in to_drop]
                upsert = len(ops)
                ops.append(("upsert", ids, rows, payloads))
                ops += [("create_index", _index_path(f, kind), kind)
                        for f, kind in to_index.items()]
                sent = None
                if sh is prepared_in:  # else a build swapped generations meanwhile
                    sent = list(ops)
                    sent[upsert] = ("upsert_prepared", *tokens)
                self.table.write(sh, ops, sent)
                used = sent is not None
                if to_index or to_drop:
                    sh.fields.save()
        finally:
            if not used and prepared_in is not None:
                for token in tokens:  # points made for a write that did not happen
                    with contextlib.suppress(Exception):  # a replaced generation may be gone
                        prepared_in.gen.forget(token)

    def _prepare_parts(self, sh: Entry, parts: Iterable[list[Record]], records: list[Record],
                       args: list[Upsert], tokens: list[int]) -> None:
        """Send each part's points to be made as ``parts`` yields it (filling ``records``,
        ``args`` and ``tokens``), at most :data:`PREPARES_IN_FLIGHT` at a time; every
        call sent is answered before this returns or raises, so its connection goes
        back and its token can be forgotten."""
        pending: list[Callable[[], int]] = []  # answers not read yet, oldest first
        try:
            for part in parts:
                if part:
                    args.append(self._point_args(part))
                    if len(pending) >= PREPARES_IN_FLIGHT:  # each holds a connection
                        tokens.append(pending.pop(0)())
                    pending.append(sh.gen.begin("prepare", *args[-1]))
                    records += part
        except BaseException:  # e.g. the caller's validation of a later part failed
            _answers(pending, tokens)
            raise
        failure = _answers(pending, tokens)
        if failure is not None:
            raise failure

    @staticmethod
    def _point_args(records: list[Record]) -> Upsert:
        """Point ids, rows (one float32 matrix: norms in one numpy call, pickled in one
        piece) and payloads of ``records``."""
        mat = np.asarray([r.embedding for r in records], dtype=np.float32)
        norms = np.linalg.norm(mat, axis=1).tolist()
        ids = [point_id(r.tenant, r.id) for r in records]
        payloads = [point_payload(r.id, r.text, r.tenant, r.metadata, norm)
                    for r, norm in zip(records, norms, strict=True)]
        return ids, mat, payloads

    def delete_ids(self, key: str, tenant: str, ids: list[str]) -> int:
        if not ids or not self.has_shard(key):
            return 0
        with self.table.writing(key) as sh:
            return self.table.write(sh, [("delete_ids", tenant, list(dict.fromkeys(ids)))])[0]

    def delete_where(self, key: str, tenant: str, where: Node | None) -> int:
        if not self.has_shard(key):
            return 0
        with self.table.writing(key) as sh:
            return self.table.write(sh, [("delete_where", tenant, where)])[0]

    def optimize(self, key: str) -> bool:
        """Optimize in the shard's host, writes held throughout: for ``ragline optimize``
        on a stopped server only; a running server uses :meth:`build_index`."""
        if not self.has_shard(key):
            return False
        with self.table.writing(key) as sh:
            return bool(sh.gen.optimize())

    # -- reads (one call of the live generation: .generation.Generation) ---------------
    def get(
        self, key: str, tenant: TenantScope, ids: list[str], with_vectors: bool = False
    ) -> list[Record]:
        if not ids:
            return []
        out: list[Record] = self.table.call(key, "get", tenant, ids, with_vectors, default=[])
        return out

    def count(self, key: str, tenant: TenantScope, where: Node | None) -> int:
        return int(self.table.call(key, "count", tenant, where, default=0))

    def list_page(self, key: str, tenant: TenantScope, where: Node | None, limit: int,
                  offset: int) -> Page:
        page: Page = self.table.call(key, "list_page", tenant, where, limit, offset,
                                     default=Page([], 0))
        return page

    def query_batch(self, key: str, queries: list[StoreQuery]) -> list[list[ScoredRecord]]:
        """Several searches on one shard in one call: the plan per query, per-value walks
        and the never-short rule are :meth:`.generation.Generation.query_batch`'s."""
        out: list[list[ScoredRecord]] = self.table.call(
            key, "query_batch", queries, default=[[] for _ in queries])
        return out

    def plan(self, key: str, sq: StoreQuery) -> DensePlan | None:
        """The plan :meth:`query_batch` would use for a dense or hybrid search ``sq``
        (None: sparse, or no shard); for benchmarks and tests."""
        plan: DensePlan | None = self.table.call(key, "plan", sq)
        return plan

    def has_text_index(self, key: str) -> bool:
        with self.table.reading(key) as sh:
            if sh is None:
                return False
            if sh.has_text is None:  # every search asks; a call per request is not free
                sh.has_text = bool(sh.gen.has_text())
            return sh.has_text

    def distinct(self, key: str, tenant: TenantScope, field: str) -> list[Scalar]:
        with self.table.reading(key) as sh:
            if sh is None:
                return []
            values = sh.gen.distinct(tenant, field, sh.fields.indexed(field))
        return sorted(values, key=scalar_sort_key)

    def index_status(self, key: str) -> tuple[int, int]:
        """(points, points in HNSW-indexed segments) of the shard; (0, 0) if it is gone."""
        points, indexed = self.table.call(key, "status", default=(0, 0))
        return int(points), int(indexed)

    # -- housekeeping ------------------------------------------------------------
    def reopen_bytes(self) -> int:
        """Free space reopening every shard may take: the disk reserve never goes below
        it (services/corpus/diskspace.py, issue 32). Replaying a shard's WAL writes its
        operations into the segments' preallocated (sparse) files, so each shard counts
        the bytes its WAL holds (walked at most every 5 s) plus
        :data:`SHARD_REOPEN_SLACK`."""
        return len(self.shard_keys()) * SHARD_REOPEN_SLACK + self.wal_usage.get()

    def size_bytes(self, key: str) -> int:
        """Bytes the shard holds on disk, at most 5 s old (``/info`` asks for every shard)."""
        path = self.table.dir(key)
        if not path.exists():
            return 0
        cache = self._sizes.get(key)
        if cache is None:
            cache = self._sizes.setdefault(key, UsageCache(path))
        return cache.get()

    def open_keys(self) -> list[str]:
        """Shards open in this process (the ones being written and searched)."""
        return self.table.open_keys()

    def build_index(self, key: str, should_stop: Callable[[], bool] | None = None) -> bool:
        """Build HNSW and payload indexes on a copy in a host process and swap it in
        (:mod:`.builder`); requests keep being served from the live generation
        meanwhile. False when there was nothing to do or the shard went away."""
        if not self.has_shard(key):
            return False
        builder = Builder(self.table, key, should_stop or (lambda: False))
        if not builder.run():
            return False
        self.last_build = builder.timings()
        self.last_phases = {**builder.phases.began, "end": time.monotonic()}
        log.info("index build of %s: %s", key,
                 {name: round(v, 4) for name, v in self.last_build.items()})
        return True

    @classmethod
    def connection_schema(cls) -> dict[str, Any]:
        return config_schema(QdrantEdgeConfig)

    def capabilities(self) -> list[str]:
        return list(self.CAPABILITIES)

    def health(self) -> Health:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            probe = self.root / ".health"
            probe.write_text("ok")
            probe.unlink()
            return Health.now("ok", {"engine": "qdrant-edge",
                                     "open_shards": len(self.table.open_keys()),
                                     "collection_count": len(self.shard_keys()),
                                     "storage_bytes": self._usage.get()})
        except OSError as exc:  # the reason, never the server's path
            return Health.now("down", {"engine": "qdrant-edge"},
                              error=f"the data directory is not writable ({exc.strerror})")


