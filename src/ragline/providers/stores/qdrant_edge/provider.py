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

import logging
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import qdrant_edge as q
from pydantic import Field

from ragline.core.filters import Node
from ragline.core.ids import point_id
from ragline.core.sparse import copy_tree_sparse
from ragline.core.types import Page, Record, Scalar, ScoredRecord, StoreQuery
from ragline.errors import ShardGone, StoreError
from ragline.observability.memory import release_freed_memory
from ragline.providers.base import Health, ProviderConfig, config_schema
from ragline.providers.stores.qdrant_common.fields import FieldKinds
from ragline.providers.stores.qdrant_common.filters import bool_path, field_path, point_payload
from ragline.providers.stores.qdrant_edge import generations
from ragline.providers.stores.qdrant_edge.locks import RWLock
from ragline.providers.stores.qdrant_edge.queries import (
    EXACT,
    TEXT,
    VECTOR,
    DensePlan,
    build_request,
    dense_plan,
)
from ragline.providers.stores.qdrant_edge.translate import tenant_filter

log = logging.getLogger(__name__)


def index_memory(name: str) -> Any:
    """Edge's placement for payload indexes: ``cold`` (mmap'd on-disk structures) or
    ``pinned`` (Edge's default: rebuilt as in-memory maps and trees when a shard loads)."""
    return q.Memory.Cold if name == "cold" else None


def _text_index(memory: Any = None) -> Any:
    """BM25 over chunk text: word tokens, lower-cased, English stopwords and stemming."""
    return q.TextIndexParams(
        tokenizer=q.TokenizerType.Word, lowercase=True, ascii_folding=True,
        stopwords=q.Language.English, stemmer=q.SnowballParams(q.SnowballLanguage.English),
        scoring=True, enable_hnsw=False, memory=memory,
    )


def _index_params(kind: str, links: bool, memory: Any = None) -> Any:
    """Payload index parameters; ``links``: per-value HNSW links (keyword and integer
    fields), which let filtered HNSW keep its recall at every selectivity."""
    if kind == "keyword":
        return q.KeywordIndexParams(enable_hnsw=links, memory=memory)
    if kind == "integer":
        return q.IntegerIndexParams(lookup=True, range=True, enable_hnsw=links, memory=memory)
    if kind == "float":
        return q.FloatIndexParams(enable_hnsw=False, memory=memory)
    return q.KeywordIndexParams(enable_hnsw=False, memory=memory)  # bool, bools.* shadow


def base_index_params(field: str, memory: Any = None) -> Any | None:
    """The parameters of the indexes every shard has (None for metadata fields). The
    tenant index stays pinned whatever ``memory`` says: with it cold, unfiltered HNSW
    searches (which filter by tenant at every step) measured 6.6x slower at 50k points."""
    if field == "tenant":  # always in memory: every search checks it at every graph step
        return q.KeywordIndexParams(is_tenant=True)  # (one value per tenant: cheap to load)
    if field == "doc_id":
        return q.KeywordIndexParams(enable_hnsw=False, memory=memory)
    if field == TEXT:
        return _text_index(memory)
    return None


def _index_path(field: str, kind: str) -> str:
    return bool_path(field) if kind == "bool" else field_path(field)


class QdrantEdgeConfig(ProviderConfig):
    path: Path = Field(description="Directory holding one sub-directory per shard.")
    exact_search_max_matches: int = Field(
        25_000, ge=0, description="Filtered searches matching at most this many points are "
        "exact (brute force over the matches), the fastest correct plan for small sets.")
    hnsw_ef: int = Field(256, ge=1, description="HNSW search breadth (ef).")
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


class _Shard:
    """One open generation of a shard. ``journal`` records every update while a
    background build runs (replayed into the new generation); ``successor`` is set
    when a build replaced this generation, so late callers move on to it."""

    def __init__(self, shard: Any, path: Path, fields: FieldKinds) -> None:
        self.shard = shard
        self.path = path  # the generation's Edge directory
        self.fields = fields
        self.lock = RWLock()
        self.write_lock = threading.Lock()
        self.closed = False
        self.has_text: bool | None = None  # read once: the text index is made with the shard
        self.journal: list[Any] | None = None
        self.successor: _Shard | None = None

    def apply(self, op: Any, points: list[Any] | None = None) -> None:
        """One update; the caller holds ``write_lock``. ``points``: the points of an
        upsert, journaled as such so a replay can apply them in short slices."""
        self.shard.update(op)
        if self.journal is not None:
            self.journal.append(points if points is not None else op)


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
        self.last_build: dict[str, float] = {}  # timings of the last background build

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
                generations.remove_stale(path)
                data = generations.current(path)
                shard = q.EdgeShard.load(str(data), self._edge_config(dim))
            except Exception as exc:
                raise StoreError(f"cannot open shard {key}: {exc}") from exc
            sh = self._shards[key] = _Shard(shard, data, FieldKinds(path / "ragline_fields.json"))
            # loading replays the shard's WAL; what that freed stayed in the heap: a restart
            # after large writes held ~900 MB instead of ~540 MB (BENCHMARKS.md)
            release_freed_memory()
            return sh

    def _edge_config(self, dimension: int) -> Any:
        """The shard config for create and load (load rewrites the runtime settings,
        so changing them in ragline's settings applies to existing shards too)."""
        c = self.config
        return q.EdgeConfig(
            vectors={VECTOR: q.EdgeVectorParams(size=dimension, distance=q.Distance.Cosine)},
            hnsw_config=q.HnswIndexConfig(
                m=c.hnsw_m, ef_construct=c.hnsw_ef_construct,
                full_scan_threshold=c.hnsw_full_scan_threshold_kb),
            optimizers=q.EdgeOptimizersConfig(indexing_threshold=c.indexing_threshold_kb),
            max_search_threads=self.config.search_threads,
            payload_memory=q.Memory.Cached if self.config.payload_memory == "cached"
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
                shutil.rmtree(path)
            path.mkdir(parents=True)
            data = path / "g1"
            shard = q.EdgeShard.create(str(data), self._edge_config(dimension))
            memory = index_memory(self.config.index_memory)
            for field in ("tenant", "doc_id", TEXT):
                params = base_index_params(field, memory)
                assert params is not None
                shard.update(q.UpdateOperation.create_field_index(field, params))
            shard.flush()
            generations.point_to(path, "g1")
            tmp = path / "ragline_dim.tmp"
            tmp.write_text(str(dimension))
            tmp.replace(marker)  # the marker makes the shard visible, atomically
            self._shards[key] = _Shard(shard, data, FieldKinds(path / "ragline_fields.json"))

    def drop_shard(self, key: str) -> None:
        path = self._dir(key)
        with self._open_lock:
            sh = self._shards.pop(key, None)
            # without its marker the shard can no longer be (re)opened by a racing reader
            (path / "ragline_dim").unlink(missing_ok=True)
        if sh is not None:
            with sh.lock.exclusive():  # waits for operations in flight
                sh.closed = True
                sh.shard.close()
        if path.exists():
            shutil.rmtree(path, ignore_errors=True)

    def close(self) -> None:
        with self._open_lock:
            for sh in self._shards.values():
                try:
                    sh.shard.close()
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
                        sh.shard.flush()
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
        if not records:
            return
        if not self.has_shard(key):
            raise StoreError(f"shard {key} does not exist")
        # one matrix for the whole batch: norms in one numpy call, and the rows handed to
        # Edge as Python lists (measured per 1,000 384-d points with payloads: q.Point
        # from numpy rows 104 ms, from lists 43 ms + 11 ms of tolist). The lists the
        # caller sent are used as they are when the service passed them on (``values``:
        # validated to round to these float32 rows, which is what Edge stores); a
        # tolist() of the matrix otherwise.
        mat = np.asarray([r.embedding for r in records], dtype=np.float32)
        norms = np.linalg.norm(mat, axis=1).tolist()
        given = [r.values for r in records]
        rows = given if None not in given else mat.tolist()
        points = [
            q.Point(point_id(r.tenant, r.id), {VECTOR: vec},
                    point_payload(r.id, r.text, r.tenant, r.metadata, norm))
            for r, vec, norm in zip(records, rows, norms, strict=True)]
        links = self.config.filter_links
        memory = index_memory(self.config.index_memory)
        with self._writing(key) as sh:
            to_index, to_drop = sh.fields.observe([r.metadata for r in records])
            for f, kind in to_drop:
                sh.apply(q.UpdateOperation.delete_field_index(_index_path(f, kind)))
            sh.apply(q.UpdateOperation.upsert_points(points), points)
            for f, kind in to_index.items():
                sh.apply(q.UpdateOperation.create_field_index(
                    _index_path(f, kind), _index_params(kind, links, memory)))
            if to_index or to_drop:
                sh.fields.save()

    def delete_ids(self, key: str, tenant: str, ids: list[str]) -> int:
        if not ids or not self.has_shard(key):
            return 0
        pids = [point_id(tenant, i) for i in dict.fromkeys(ids)]
        with self._writing(key) as sh:
            found = sh.shard.retrieve(pids, False, False)
            if found:
                sh.apply(q.UpdateOperation.delete_points([p.id for p in found]))
            return len(found)

    def delete_where(self, key: str, tenant: str, where: Node | None) -> int:
        if not self.has_shard(key):
            return 0
        flt = tenant_filter(tenant, where)
        with self._writing(key) as sh:
            n = sh.shard.count(q.CountRequest(filter=flt, exact=True))
            if n:
                sh.apply(q.UpdateOperation.delete_points_by_filter(flt))
            return int(n)

    # -- reads -------------------------------------------------------------------
    @staticmethod
    def _record(p: Any, with_vector: bool = False) -> Record:
        pl = p.payload or {}
        emb = None
        if with_vector and p.vector is not None:
            v = p.vector[VECTOR] if isinstance(p.vector, dict) else p.vector
            emb = np.asarray(v, dtype=np.float32) * np.float32(pl.get("norm", 1.0))
        return Record(pl.get("doc_id", str(p.id)), pl.get("text", ""),
                      pl.get("metadata") or {}, emb, pl.get("tenant", "default"))

    def get(
        self, key: str, tenant: str, ids: list[str], with_vectors: bool = False
    ) -> list[Record]:
        if not ids:
            return []
        with self._reading(key) as sh:
            if sh is None:
                return []
            pts = sh.shard.retrieve([point_id(tenant, i) for i in ids], True, with_vectors)
        by_id = {r.id: r for r in (self._record(p, with_vectors) for p in pts)}
        return [by_id[i] for i in dict.fromkeys(ids) if i in by_id]

    def count(self, key: str, tenant: str, where: Node | None) -> int:
        with self._reading(key) as sh:
            if sh is None:
                return 0
            return int(sh.shard.count(q.CountRequest(filter=tenant_filter(tenant, where),
                                                      exact=True)))

    def list_page(self, key: str, tenant: str, where: Node | None, limit: int, offset: int) -> Page:
        flt = tenant_filter(tenant, where)
        with self._reading(key) as sh:
            if sh is None:
                return Page([], 0)
            total = int(sh.shard.count(q.CountRequest(filter=flt, exact=True)))
            if limit <= 0 or offset >= total:
                return Page([], total)
            cursor = None
            if offset:  # scroll is id-ordered; skip by ids only, without payloads
                _, cursor = sh.shard.scroll(q.ScrollRequest(
                    limit=offset, filter=flt, with_payload=False, with_vector=False))
                if cursor is None:
                    return Page([], total)
            pts, _ = sh.shard.scroll(q.ScrollRequest(
                offset=cursor, limit=limit, filter=flt, with_payload=True, with_vector=False))
        return Page([self._record(p) for p in pts], total)

    def _linked(self, sh: _Shard, info: Any) -> frozenset[str]:
        """Metadata fields whose per-value HNSW links keep a walk's recall: keyword
        fields with links. Integer fields get links too, but a walk for one integer
        value does not reliably keep its recall (``tier = 0``, 25 %: recall@10
        0.931-0.947 at 100k, 0.997 at 1M), so their filters are planned like unlinked
        ones."""
        prefix = "metadata."
        return frozenset(
            path[len(prefix):] for path, pi in info.payload_schema.items()
            if path.startswith(prefix) and pi.data_type == q.PayloadSchemaType.Keyword
            and getattr(pi.params, "enable_hnsw", False))

    def query_batch(self, key: str, queries: list[StoreQuery]) -> list[list[ScoredRecord]]:
        """Several searches on one shard in one Edge call (``EdgeShard.query_batch``).

        Each dense search gets a plan from Edge's match-count estimate
        (:func:`.queries.dense_plan`); an ``$in`` of a few values of a linked field too
        large for exact search runs as one graph walk per value, merged by score. A
        graph search that returns fewer hits than it asked for is run again exactly, so
        an index never answers short silently (a filter matching fewer points than the
        limit makes that exact run small).
        """
        plans: list[_Plan] = []
        reqs: list[Any] = []
        with self._reading(key) as sh:
            if sh is None:
                return [[] for _ in queries]
            info = sh.shard.info() if any(sq.mode != "sparse" for sq in queries) else None
            linked = self._linked(sh, info) if info is not None else frozenset()
            for i, sq in enumerate(queries):
                plan = self._plan(sh, info, linked, i, sq)
                if plan is None:
                    continue
                plans.append(plan)
                if len(plan.requests) == 1:
                    plan.first = len(reqs)
                    reqs.append(plan.requests[0])
                else:  # per-value walks one by one: Edge's query_batch ran 3 filtered
                    # walks 6.5x slower than 3 single queries (measured at 50k points)
                    plan.found = [sh.shard.query(r) for r in plan.requests]
            if len(reqs) == 1:
                found = [sh.shard.query(reqs[0])]
            else:
                found = sh.shard.query_batch(q.QueryBatchRequest(reqs)) if reqs else []
            out: list[list[ScoredRecord]] = [[] for _ in queries]
            for plan in plans:
                sq = queries[plan.slot]
                pts = (found[plan.first] if plan.found is None
                       else _merge(plan.found, sq.limit))
                if plan.guarded and len(pts) < sq.limit:
                    pts = sh.shard.query(build_request(
                        sq, tenant_filter(sq.tenant, sq.where), EXACT))
                out[plan.slot] = self._scored(pts, sq.with_vectors)
        return out

    def plan(self, key: str, sq: StoreQuery) -> DensePlan | None:
        """The plan :meth:`query_batch` would use for a dense or hybrid search ``sq``
        (None: sparse, or no shard); for benchmarks and tests."""
        with self._reading(key) as sh:
            if sh is None or sq.mode == "sparse":
                return None
            info = sh.shard.info()
            return self._dense_plan(sh, info, self._linked(sh, info), sq)

    def _dense_plan(self, sh: _Shard, info: Any, linked: frozenset[str],
                    sq: StoreQuery) -> DensePlan:
        # Edge's full-scan threshold in points: values with at least this many get links
        dim = len(sq.vector) if sq.vector is not None else 1
        links_min = self.config.hnsw_full_scan_threshold_kb * 1024 // (4 * max(dim, 1))
        return dense_plan(sh.shard, info, tenant_filter(sq.tenant, sq.where), sq.where,
                          linked, self.config.exact_search_max_matches, self.config.hnsw_ef,
                          links_min, split=sq.mode == "dense")

    def _plan(self, sh: _Shard, info: Any, linked: frozenset[str], slot: int,
              sq: StoreQuery) -> _Plan | None:
        """The Edge requests for one query (None: it cannot match anything)."""
        if info is None or sq.mode == "sparse":
            req = build_request(sq, tenant_filter(sq.tenant, sq.where), None)
            return None if req is None else _Plan(slot, [req], False)
        dp = self._dense_plan(sh, info, linked, sq)
        # a score threshold makes short answers legitimate: no exact re-run then
        guarded = dp.guarded and sq.score_threshold is None
        if dp.kind == "split":  # one walk per value, merged by score
            return _Plan(slot, [build_request(sq, tenant_filter(sq.tenant, part), dp.params)
                                for part in dp.parts], guarded)
        req = build_request(sq, tenant_filter(sq.tenant, sq.where), dp.params)
        return None if req is None else _Plan(slot, [req], guarded)

    def _scored(self, pts: list[Any], with_vectors: bool) -> list[ScoredRecord]:
        out = []
        for p in pts:
            r = self._record(p, with_vectors)
            out.append(ScoredRecord(r.id, r.text, r.metadata, float(p.score), r.embedding))
        return out

    def has_text_index(self, key: str) -> bool:
        with self._reading(key) as sh:
            if sh is None:
                return False
            if sh.has_text is None:  # every search asks; an Edge call per request is not free
                sh.has_text = TEXT in sh.shard.info().payload_schema
            return sh.has_text

    def distinct(self, key: str, tenant: str, field: str) -> list[Scalar]:
        flt = tenant_filter(tenant, None)
        values: set[Any] = set()
        path = field_path(field)
        with self._reading(key) as sh:
            if sh is None:
                return []
            kind = sh.fields.indexed(field)
            if kind in ("keyword", "integer"):
                resp = sh.shard.facet(q.FacetRequest(path, limit=1_000_000, exact=True,
                                                     filter=flt))
                values = {h.value for h in resp.hits}
            else:
                cursor = None
                sel = q.PayloadSelector.Include([path])
                while True:
                    pts, cursor = sh.shard.scroll(q.ScrollRequest(
                        offset=cursor, limit=5000, filter=flt, with_payload=sel,
                        with_vector=False))
                    for p in pts:
                        v = ((p.payload or {}).get("metadata") or {}).get(field)
                        for x in v if isinstance(v, list) else [v]:
                            if x is not None:
                                values.add((type(x) is bool, x))
                    if cursor is None:
                        break
                values = {x for _, x in values}
        return sorted(values, key=_sort_key)

    # -- housekeeping ------------------------------------------------------------
    def size_bytes(self, key: str) -> int:
        path = self._dir(key)
        if not path.exists():
            return 0
        return disk_usage(path)

    def optimize(self, key: str) -> bool:
        """Optimize in this process, holding the GIL throughout: for ``ragline optimize``
        on a stopped server only; a running server uses :meth:`build_index`."""
        if not self.has_shard(key):
            return False
        with self._writing(key) as sh:
            return bool(sh.shard.optimize())

    # -- background index builds (see .rebuild) ----------------------------------------
    def open_keys(self) -> list[str]:
        """Shards open in this process (the ones being written and searched)."""
        return list(self._shards)

    def index_status(self, key: str) -> tuple[int, int]:
        """(points, points in HNSW-indexed segments) of the shard; (0, 0) if it is gone."""
        with self._reading(key) as sh:
            if sh is None:
                return 0, 0
            info = sh.shard.info()
            return int(info.points_count), int(info.indexed_vectors_count)

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
                                     "storage_bytes": disk_usage(self.root)})
        except OSError as exc:  # the reason, never the server's path
            return Health.now("down", {"engine": "qdrant-edge"},
                              error=f"the data directory is not writable ({exc.strerror})")


@dataclass
class _Plan:
    """The Edge requests of one query in a batch: one, or one per ``$in`` value.
    ``guarded``: the plan can answer short (graph walks), so a short answer is redone
    exactly."""

    slot: int
    requests: list[Any]
    guarded: bool
    first: int = 0  # the position of a single request in the shard's batch
    found: list[list[Any]] | None = None  # the answers of per-value walks


def _merge(parts: list[list[Any]], limit: int) -> list[Any]:
    """The best ``limit`` points of several walks, each point once (a list-valued field
    can put a point under two values)."""
    best: dict[Any, Any] = {}
    for pts in parts:
        for p in pts:
            if p.id not in best or p.score > best[p.id].score:
                best[p.id] = p
    return sorted(best.values(), key=lambda p: p.score, reverse=True)[:limit]


def disk_usage(path: Path) -> int:
    """Bytes really allocated (Edge preallocates sparse 32 MiB files; st_size overstates).

    Files and folders that vanish while they are counted (a shard dropped in the
    background after an empty or delete) count as nothing: ``/info`` and
    ``/health`` must not fail because of a concurrent drop.
    """
    total = 0
    for root, _dirs, files in os.walk(path):  # os.walk skips folders that vanish
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_blocks * 512
            except FileNotFoundError:
                continue
    return total


def _sort_key(v: Any) -> tuple[int, Any]:
    if isinstance(v, bool):
        return (0, v)
    if isinstance(v, int | float):
        return (1, v)
    return (2, str(v))
