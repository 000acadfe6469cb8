"""The Qdrant Edge store: one Edge shard per collection generation.

Design points, each from the engine bake-off (``research/engine-bakeoff.md``):

* A batch that fails inside Edge can be partly written, so the service
  validates everything before calling :meth:`upsert`, and a request's records
  go to Edge as one update operation (SIGKILL leaves it whole or absent).
* ``optimize()`` holds the GIL for its whole run (measured: a Python thread got
  0.05 % of its normal speed during a 10 s optimize), so it is never run in the
  serving process: :meth:`QdrantEdgeStore.build_index` optimizes a copy of the
  shard in a subprocess and swaps it in (:mod:`.rebuild`, ``docs/storage.md``).
* Keyword and integer payload indexes get per-value HNSW links, so filtered
  HNSW keeps its recall; the search plan is chosen per query from Edge's
  match-count estimate (:func:`.queries.dense_plan`), and a graph search that
  returns fewer hits than asked for is redone exactly, never answered short.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import qdrant_edge as q
from pydantic import Field

from ragline.core.filters import Node
from ragline.core.ids import point_id
from ragline.core.sparse import copy_tree_sparse
from ragline.core.tenancy import TenantScope
from ragline.core.types import Page, Record, Scalar, ScoredRecord, StoreQuery
from ragline.core.usage import UsageCache, disk_usage
from ragline.errors import ShardGone, StoreError
from ragline.observability.memory import release_freed_memory
from ragline.providers.base import Health, ProviderConfig, config_schema
from ragline.providers.stores.qdrant_common.fields import FieldKinds
from ragline.providers.stores.qdrant_common.filters import bool_path, field_path, point_payload
from ragline.providers.stores.qdrant_edge import generations
from ragline.providers.stores.qdrant_edge.generation import (
    Generation,
    WriteOp,
    base_index_params,
    index_memory,
    index_params,
    sort_values,
)
from ragline.providers.stores.qdrant_edge.locks import RWLock
from ragline.providers.stores.qdrant_edge.orphans import (
    wait_for_previous_owners,
    wait_until_released,
)
from ragline.providers.stores.qdrant_edge.queries import VECTOR, DensePlan
from ragline.providers.stores.qdrant_edge.resident import read_ahead

# re-exported for the build process and older callers
__all__ = [
    "QdrantEdgeConfig",
    "QdrantEdgeStore",
    "base_index_params",
    "index_memory",
    "index_params",
]
_index_params = index_params

log = logging.getLogger(__name__)


def _joined(args: list[tuple[list[Any], Any, list[dict[str, Any]]]]
            ) -> tuple[list[Any], Any, list[dict[str, Any]]]:
    """The parts' point ids, rows and payloads as one upsert (what the journal keeps)."""
    if len(args) == 1:
        return args[0]
    ids = [i for part in args for i in part[0]]
    payloads = [p for part in args for p in part[2]]
    if all(isinstance(part[1], np.ndarray) for part in args):
        return ids, np.concatenate([part[1] for part in args]), payloads
    rows = [r.tolist() if isinstance(r, np.ndarray) else r for part in args for r in part[1]]
    return ids, rows, payloads


PREPARES_IN_FLIGHT = 2
"""Prepare calls of one write sent and not yet answered. The shard process makes one
part's points at a time (``Generation._edge_writes``), so two keep it busy while the
caller checks the next part; more would only hold more connections and serving threads
(a batch of 100,000 would otherwise open 800)."""


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



SHARD_REOPEN_SLACK = 8 * 1024 * 1024
"""What opening a shard writes besides replaying its WAL (a fresh WAL segment's first
pages, the segments' status and tracker pages), with room to spare."""


def wal_bytes(root: Path) -> int:
    """Bytes the WALs of every shard under ``root`` hold on disk."""
    try:
        shards = [p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")]
    except OSError:
        return 0
    return sum(disk_usage(wal) for shard in shards for wal in shard.glob("*/wal"))

class QdrantEdgeConfig(ProviderConfig):
    path: Path = Field(description="Directory holding one sub-directory per shard.")
    exact_search_max_matches: int = Field(
        25_000, ge=0, description="Filtered searches matching at most this many points are "
        "exact (brute force over the matches), the fastest correct plan for small sets.")
    hnsw_ef: int = Field(
        128, ge=1, description="HNSW search breadth (ef). 128: measured at 1M points (HNSW "
        "built, one query at a time), p95 2.1-2.9 ms with recall@10 0.995-1.000 for every "
        "filter shape and plan, against 3.6-5.5 ms (recall 0.999-1.000) at 256, the default "
        "before (BENCHMARKS.md).")
    hnsw_m: int = Field(16, ge=4, description="HNSW graph degree (m), used at index builds.")
    hnsw_ef_construct: int = Field(100, ge=4, description="HNSW build breadth.")
    hnsw_full_scan_threshold_kb: int = Field(
        10_000, ge=1, description="Edge searches a segment (or one filter value's points) by "
        "full scan below this many KB of vectors; also the size from which a payload value "
        "gets its own HNSW links.")
    indexing_threshold_kb: int = Field(
        10_000, ge=1, description="Segments with more KB of vectors than this get an HNSW "
        "index at a build (Edge's optimizer indexing threshold; 10 MB = ~6,500 384-d "
        "vectors); smaller ones are searched by full scan.")
    filter_links: bool = Field(
        True, description="Per-value HNSW links for keyword and integer metadata fields "
        "(Qdrant's filter-aware HNSW). Costs index build time; without them filtered HNSW "
        "loses recall and mid-selectivity filters fall back to ACORN.")
    build_nice: int = Field(10, ge=0, le=19, description="Niceness of the background index "
                            "build process, so serving keeps the cores it needs.")
    search_threads: int = Field(
        1, ge=1, le=64, description="Threads of each shard's search pool. 1 by default: under "
        "concurrent requests the requests already fill the cores, and measured on 2 cores "
        "(hybrid search over HTTP, 100 connections) 1 thread gave 1.2x the QPS of Edge's "
        "CPU-derived default (8) and of 2.")
    index_memory: Literal["cold", "pinned"] = Field(
        "cold", description="Where payload indexes (ids, BM25 text, metadata; the tenant "
        "index is always in memory) live: "
        "'cold' keeps Edge's on-disk structures, memory-mapped, so opening a shard (and the "
        "swap after a background index build, which holds the GIL) only maps files; "
        "'pinned' rebuilds them as in-memory maps at every open: measured 1.7-2x slower to "
        "open at 50k points, 1.1-1.5x faster filtered searches. Existing indexes are converted "
        "at the next background build.")
    payload_memory: Literal["cold", "cached"] = Field(
        "cached", description="Where Edge keeps payloads (chunk text and metadata): 'cached' "
        "keeps them in memory once read (every search returns them), 'cold' reads them from "
        "disk each time (less RAM for very large collections).")
    warm_open: bool = Field(
        True, description="Open generations warm: read the vectors, HNSW links and payload "
        "indexes of their built segments in order before Edge loads them, and (in shard "
        "processes) keep the payload indexes mapped while they are open (at most half and a "
        "quarter of the memory available then). Measured at 1M points: the first searches after a "
        "background build's swap waited 206-761 ms without, and later ones ran 4-7x slower "
        "when the files had come into memory through Edge's own page faults.")
    shard_processes: bool = Field(
        True, description="Serve each open shard generation from a process of its own "
        "(calls pickled over a Unix socket), so that Edge's GIL-holding load, flush and "
        "close of generations (0.3-1.5 s and 0.05-8 s at 100k points, measured) never "
        "stall the server's requests when a background index build swaps generations; "
        "the processes die with the server. Off: Edge runs in the server process (no "
        "per-call round trip, but every swap freezes the server for the load and close).")


class _Shard:
    """One open generation of a shard. ``gen``: the :class:`.generation.Generation`, in
    this process or in a shard process of its own (:mod:`.host`). ``journal`` records
    every write while a background build runs (replayed into the new generation);
    ``successor`` is set when a build replaced this generation, so late callers move
    on to it."""

    def __init__(self, gen: Any, path: Path, fields: FieldKinds) -> None:
        self.gen = gen
        self.path = path  # the generation's Edge directory
        self.fields = fields
        self.lock = RWLock()
        self.write_lock = threading.Lock()
        self.closed = False
        self.has_text: bool | None = None  # read once: the text index is made with the shard
        self.journal: list[WriteOp] | None = None
        self.successor: _Shard | None = None

    @property
    def shard(self) -> Any:
        """The EdgeShard itself (benchmarks and tests; in this process only)."""
        shard = getattr(self.gen, "shard", None)
        if not isinstance(shard, q.EdgeShard):
            raise StoreError("this shard is served by a shard process")
        return shard

    def write(self, ops: list[WriteOp], sent: list[WriteOp] | None = None) -> list[int]:
        """Writes, in order; the caller holds ``write_lock``. Journaled during a build.
        ``sent``: what the generation is sent instead (``ops`` with an upsert replaced by
        the token of its prepared points); the journal always gets ``ops``."""
        out: list[int] = self.gen.write(sent if sent is not None else ops)
        if self.journal is not None:
            self.journal.extend(ops)
        return out

    def retire(self) -> None:
        """End a generation that a build replaced (its directory is deleted next): a
        shard process is killed, an in-process one closed (Edge work under the GIL)."""
        discard = getattr(self.gen, "discard", None)
        if discard is not None:
            discard()
        else:
            self.gen.close()


class QdrantEdgeStore:
    name: ClassVar[str] = "qdrant-edge"
    kind: ClassVar[str] = "store"
    Config: ClassVar[type[ProviderConfig]] = QdrantEdgeConfig
    CAPABILITIES: ClassVar[list[str]] = [
        "collections", "search", "metadata_filtering", "hybrid", "facets", "persistence",
    ]

    def __init__(self, config: QdrantEdgeConfig) -> None:
        self.config = config
        self.root = Path(config.path)
        self.root.mkdir(parents=True, exist_ok=True)
        self._shards: dict[str, _Shard] = {}
        self._open_lock = threading.Lock()
        self._usage = UsageCache(self.root)  # health's storage_bytes: one walk per 5 s
        self.wal_usage = UsageCache(self.root, walk=wal_bytes)  # the disk reserve's floor
        self._sizes: dict[str, UsageCache] = {}  # size_bytes per shard, likewise
        self.last_build: dict[str, float] = {}  # timings of the last background build
        self.last_phases: dict[str, float] = {}  # when each of its steps began (monotonic)
        if config.shard_processes:
            from ragline.providers.stores.qdrant_edge.host import warm_up

            warm_up()

    # -- shard lifecycle --------------------------------------------------------
    def _dir(self, key: str) -> Path:
        if not key or "/" in key or key.startswith("."):
            raise StoreError(f"bad shard key {key!r}")
        return self.root / key

    def has_shard(self, key: str) -> bool:
        return key in self._shards or (self._dir(key) / "ragline_dim").exists()

    def shard_keys(self) -> list[str]:
        return sorted(p.name for p in self.root.iterdir()
                      if p.is_dir() and not p.name.startswith("."))

    def _open(self, key: str) -> _Shard | None:
        sh = self._shards.get(key)  # the hot path: no lock
        if sh is not None:
            return sh
        with self._open_lock:
            sh = self._shards.get(key)
            if sh is not None:
                return sh
            path = self._dir(key)
            if not (path / "ragline_dim").exists():
                return None
            try:
                dim = int((path / "ragline_dim").read_text())
                wait_for_previous_owners(path)
                generations.remove_stale(path)
                data = generations.current(path)
                gen = self._start_generation("open", data, dim)
            except Exception as exc:
                raise StoreError(f"cannot open shard {key}: {exc}") from exc
            sh = self._shards[key] = _Shard(gen, data, FieldKinds(path / "ragline_fields.json"))
            return sh

    def _start_generation(self, mode: str, data: Path, dim: int,
                          should_stop: Callable[[], bool] | None = None) -> Any:
        """Open (``open``) or create (``create``) the generation in ``data``: in a shard
        process of its own (:mod:`.host`), or here when ``shard_processes`` is off."""
        if self.config.shard_processes:
            from ragline.providers.stores.qdrant_edge.host import (
                RemoteGeneration,
                ShardProcess,
            )

            cfg = self.config.model_dump(mode="json")
            return RemoteGeneration(ShardProcess.start(mode, data, dim, cfg, should_stop))
        from ragline.providers.stores.qdrant_edge.host import search_config

        edge = self.edge_config(self.config, dim)
        if mode == "create":
            gen = Generation(q.EdgeShard.create(str(data), edge), search_config(self.config))
            gen.create_base_indexes()
            gen.flush()
            return gen
        wait_until_released(data)
        if self.config.warm_open:  # a niced child process reads: no GIL held here
            read_ahead(data, self.config.build_nice)
        gen = Generation(q.EdgeShard.load(str(data), edge), search_config(self.config))
        # loading replays the shard's WAL; what that freed stayed in the heap: a restart
        # after large writes held ~900 MB instead of ~540 MB (BENCHMARKS.md)
        release_freed_memory()
        # no keep_resident here: mmap(2) with MAP_POPULATE holds the GIL for its whole run
        # (measured 0.6 s for 1.5 GB); a shard process does it (host._open)
        return gen

    def _edge_config(self, dimension: int) -> Any:
        return self.edge_config(self.config, dimension)

    @staticmethod
    def edge_config(c: QdrantEdgeConfig, dimension: int) -> Any:
        """The shard config for create and load (load rewrites the runtime settings,
        so changing them in ragline's settings applies to existing shards too)."""
        return q.EdgeConfig(
            vectors={VECTOR: q.EdgeVectorParams(size=dimension, distance=q.Distance.Cosine)},
            hnsw_config=q.HnswIndexConfig(
                m=c.hnsw_m, ef_construct=c.hnsw_ef_construct,
                full_scan_threshold=c.hnsw_full_scan_threshold_kb),
            optimizers=q.EdgeOptimizersConfig(indexing_threshold=c.indexing_threshold_kb),
            max_search_threads=c.search_threads,
            payload_memory=q.Memory.Cached if c.payload_memory == "cached"
            else q.Memory.Cold,
        )

    def _require(self, key: str) -> _Shard | None:
        return self._open(key)

    @contextmanager
    def _reading(self, key: str) -> Iterator[_Shard | None]:
        """The live generation of ``key``, held for one read (None: no such shard).
        A generation replaced by a build while we waited hands over to its successor;
        a dropped shard is :class:`ShardGone`."""
        for _ in range(8):
            sh = self._open(key)
            if sh is None:
                yield None
                return
            with sh.lock.shared():
                if not sh.closed:
                    yield sh
                    return
                if sh.successor is None:
                    raise ShardGone(
                        "The collection was emptied or deleted while this request ran; "
                        "retry it")
        raise ShardGone("The collection changed repeatedly while this request ran; retry it")

    @contextmanager
    def _writing(self, key: str) -> Iterator[_Shard]:
        """The live generation of ``key`` with its write lock: no write lands in a
        generation that a build has just replaced."""
        for _ in range(8):
            with self._reading(key) as sh:
                if sh is None:
                    raise StoreError(f"shard {key} does not exist")
                with sh.write_lock:
                    if sh.successor is None:
                        yield sh
                        return
        raise ShardGone("The collection changed repeatedly while this request ran; retry it")

    def create_shard(self, key: str, dimension: int) -> None:
        with self._open_lock:
            path = self._dir(key)
            marker = path / "ragline_dim"
            if marker.exists() or key in self._shards:
                existing = int(marker.read_text())
                if existing != dimension:
                    raise StoreError(f"shard {key} has dimension {existing}, not {dimension}")
                return
            if path.exists():  # leftover of a crash before the marker was written
                wait_for_previous_owners(path)
                shutil.rmtree(path)
            path.mkdir(parents=True)
            data = path / "g1"
            gen = self._start_generation("create", data, dimension)
            generations.point_to(path, "g1")
            tmp = path / "ragline_dim.tmp"
            tmp.write_text(str(dimension))
            tmp.replace(marker)  # the marker makes the shard visible, atomically
            self._shards[key] = _Shard(gen, data, FieldKinds(path / "ragline_fields.json"))

    def drop_shard(self, key: str) -> None:
        path = self._dir(key)
        with self._open_lock:
            sh = self._shards.pop(key, None)
            self._sizes.pop(key, None)
            # without its marker the shard can no longer be (re)opened by a racing reader
            (path / "ragline_dim").unlink(missing_ok=True)
        if sh is not None:
            with sh.lock.exclusive():  # waits for operations in flight
                sh.closed = True
                sh.retire()  # its directory goes next: nothing to flush
        if path.exists():
            shutil.rmtree(path, ignore_errors=True)

    def close(self) -> None:
        with self._open_lock:
            for sh in self._shards.values():
                try:
                    sh.gen.close()
                except Exception as exc:  # closing must go on for the other shards
                    log.warning("closing shard %s failed: %s", sh.path, exc)
            self._shards.clear()

    def snapshot(self, dest: Path) -> list[str]:
        """Copy every shard into ``dest/<key>/`` while writes wait; return the keys copied.

        Qdrant Edge has no snapshot *writer* (only ``unpack_snapshot`` and
        ``update_from_snapshot`` for snapshots made by a Qdrant server), so the
        online copy is ours: holding the open lock (no shard created, dropped or
        opened) and every open shard's write lock (no upsert, delete or optimize),
        each shard is flushed and its files copied. Searches go on meanwhile. A
        shard without its ``ragline_dim`` marker is half-created or being dropped
        and is left out.
        """
        dest.mkdir(parents=True, exist_ok=True)
        copied: list[str] = []
        with self._open_lock:
            opened = [self._shards[k] for k in sorted(self._shards)]
            held: list[threading.Lock] = []
            try:
                for sh in opened:
                    sh.write_lock.acquire()
                    held.append(sh.write_lock)
                for sh in opened:
                    if not sh.closed:
                        sh.gen.flush()
                for key in self.shard_keys():
                    src = self.root / key
                    if (src / "ragline_dim").exists():
                        copy_tree_sparse(src, dest / key)  # Edge files are sparse
                        copied.append(key)
            finally:
                for lock in reversed(held):
                    lock.release()
        return copied

    # -- writes ------------------------------------------------------------------
    def upsert(self, key: str, records: list[Record]) -> None:
        if records:  # nothing to write is not an error, shard or none (as before parts)
            self.upsert_parts(key, [records])

    def upsert_parts(self, key: str, parts: Iterable[list[Record]]) -> None:
        """One write of every part's records. Edge's points are made before the write
        lock (``Generation.prepare``: most of the time of a bulk write), part by part as
        ``parts`` yields them: a shard process makes one part's points while the caller
        produces (validates) the next, then one update writes them all. Measured with
        ``store_batch`` (``benchmarks/bench_bulk_write.py --library``): see BENCHMARKS.md."""
        if not self.has_shard(key):
            raise StoreError(f"shard {key} does not exist")
        records: list[Record] = []
        args: list[tuple[list[Any], Any, list[dict[str, Any]]]] = []
        tokens: list[int] = []
        prepared_in: _Shard | None = None
        used = False
        try:
            with self._reading(key) as prepared_in:
                if prepared_in is None:
                    raise StoreError(f"shard {key} does not exist")
                self._prepare_parts(prepared_in, parts, records, args, tokens)
            if not records:
                return
            ids, rows, payloads = _joined(args)
            with self._writing(key) as sh:
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
                sh.write(ops, sent)
                used = sent is not None
                if to_index or to_drop:
                    sh.fields.save()
        finally:
            if not used and prepared_in is not None:
                for token in tokens:  # points made for a write that did not happen
                    with contextlib.suppress(Exception):  # a replaced generation may be gone
                        prepared_in.gen.forget(token)

    def _prepare_parts(self, sh: _Shard, parts: Iterable[list[Record]], records: list[Record],
                       args: list[tuple[list[Any], Any, list[dict[str, Any]]]],
                       tokens: list[int]) -> None:
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
                    pending.append(sh.gen.begin_prepare(*args[-1]))
                    records += part
        except BaseException:  # e.g. the caller's validation of a later part failed
            _answers(pending, tokens)
            raise
        failure = _answers(pending, tokens)
        if failure is not None:
            raise failure

    def _point_args(self, records: list[Record]) -> tuple[list[Any], Any, list[dict[str, Any]]]:
        """Point ids, rows and payloads of ``records``. One matrix for the batch: norms in
        one numpy call; the generation makes Edge's points from the rows as Python lists
        (q.Point from numpy rows measured 104 ms per 1,000 384-d points with payloads,
        from lists 43 ms + 11 ms of tolist). In this process the lists the caller sent are
        used as they are (``values``: validated to round to these float32 rows, which is
        what Edge stores); a shard process gets the float32 matrix (pickled in one piece;
        its tolist() is its own)."""
        mat = np.asarray([r.embedding for r in records], dtype=np.float32)
        norms = np.linalg.norm(mat, axis=1).tolist()
        given = [r.values for r in records]
        rows: Any = mat if self.config.shard_processes or None in given else given
        ids = [point_id(r.tenant, r.id) for r in records]
        payloads = [point_payload(r.id, r.text, r.tenant, r.metadata, norm)
                    for r, norm in zip(records, norms, strict=True)]
        return ids, rows, payloads

    def delete_ids(self, key: str, tenant: str, ids: list[str]) -> int:
        if not ids or not self.has_shard(key):
            return 0
        with self._writing(key) as sh:
            return sh.write([("delete_ids", tenant, list(dict.fromkeys(ids)))])[0]

    def delete_where(self, key: str, tenant: str, where: Node | None) -> int:
        if not self.has_shard(key):
            return 0
        with self._writing(key) as sh:
            return sh.write([("delete_where", tenant, where)])[0]

    # -- reads -------------------------------------------------------------------
    def get(
        self, key: str, tenant: TenantScope, ids: list[str], with_vectors: bool = False
    ) -> list[Record]:
        if not ids:
            return []
        with self._reading(key) as sh:
            if sh is None:
                return []
            out: list[Record] = sh.gen.get(tenant, ids, with_vectors)
            return out

    def count(self, key: str, tenant: TenantScope, where: Node | None) -> int:
        with self._reading(key) as sh:
            if sh is None:
                return 0
            return int(sh.gen.count(tenant, where))

    def list_page(self, key: str, tenant: TenantScope, where: Node | None, limit: int,
                  offset: int) -> Page:
        with self._reading(key) as sh:
            if sh is None:
                return Page([], 0)
            page: Page = sh.gen.list_page(tenant, where, limit, offset)
            return page

    def query_batch(self, key: str, queries: list[StoreQuery]) -> list[list[ScoredRecord]]:
        """Several searches on one shard in one call: the plan per query, per-value walks
        and the never-short rule are :meth:`.generation.Generation.query_batch`'s."""
        with self._reading(key) as sh:
            if sh is None:
                return [[] for _ in queries]
            out: list[list[ScoredRecord]] = sh.gen.query_batch(queries)
            return out

    def plan(self, key: str, sq: StoreQuery) -> DensePlan | None:
        """The plan :meth:`query_batch` would use for a dense or hybrid search ``sq``
        (None: sparse, or no shard); for benchmarks and tests."""
        with self._reading(key) as sh:
            if sh is None:
                return None
            plan: DensePlan | None = sh.gen.plan(sq)
            return plan

    def has_text_index(self, key: str) -> bool:
        with self._reading(key) as sh:
            if sh is None:
                return False
            if sh.has_text is None:  # every search asks; a call per request is not free
                sh.has_text = bool(sh.gen.has_text())
            return sh.has_text

    def distinct(self, key: str, tenant: TenantScope, field: str) -> list[Scalar]:
        with self._reading(key) as sh:
            if sh is None:
                return []
            values = sh.gen.distinct(tenant, field, sh.fields.indexed(field))
        return sort_values(values)

    # -- housekeeping ------------------------------------------------------------
    def reopen_bytes(self) -> int:
        """Free space reopening every shard may take: the disk reserve never goes below
        it (services/diskspace.py, issue 32). Replaying a shard's WAL writes its
        operations into the segments' preallocated (sparse) files, so each shard counts
        the bytes its WAL holds (walked at most every 5 s) plus
        :data:`SHARD_REOPEN_SLACK`."""
        return len(self.shard_keys()) * SHARD_REOPEN_SLACK + self.wal_usage.get()

    def size_bytes(self, key: str) -> int:
        """Bytes the shard holds on disk, at most 5 s old (``/info`` asks for every shard)."""
        path = self._dir(key)
        if not path.exists():
            return 0
        cache = self._sizes.get(key)
        if cache is None:
            cache = self._sizes.setdefault(key, UsageCache(path))
        return cache.get()

    def optimize(self, key: str) -> bool:
        """Optimize in this process, holding the GIL throughout: for ``ragline optimize``
        on a stopped server only; a running server uses :meth:`build_index`."""
        if not self.has_shard(key):
            return False
        with self._writing(key) as sh:
            return bool(sh.gen.optimize())

    # -- background index builds (see .rebuild) ----------------------------------------
    def open_keys(self) -> list[str]:
        """Shards open in this process (the ones being written and searched)."""
        return list(self._shards)

    def index_status(self, key: str) -> tuple[int, int]:
        """(points, points in HNSW-indexed segments) of the shard; (0, 0) if it is gone."""
        with self._reading(key) as sh:
            if sh is None:
                return 0, 0
            points, indexed = sh.gen.status()
            return int(points), int(indexed)

    def build_index(self, key: str, should_stop: Callable[[], bool] | None = None) -> bool:
        """Build HNSW and payload indexes on a copy in a subprocess and swap it in;
        requests keep being served from the live generation meanwhile. False when
        there was nothing to do or the shard went away."""
        from ragline.providers.stores.qdrant_edge.rebuild import rebuild

        return rebuild(self, key, should_stop or (lambda: False))

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
            return Health.now("ok", {"engine": "qdrant-edge", "open_shards": len(self._shards),
                                     "collection_count": len(self.shard_keys()),
                                     "storage_bytes": self._usage.get()})
        except OSError as exc:  # the reason, never the server's path
            return Health.now("down", {"engine": "qdrant-edge"},
                              error=f"the data directory is not writable ({exc.strerror})")


