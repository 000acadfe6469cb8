"""Everything ragline asks of one open Edge shard generation, in plain data.

Every call that reaches Edge goes through a :class:`Generation`, in the host process
that serves the generation (:mod:`.host`); its public methods are what the store
calls over :mod:`.wire`, so their arguments and results are plain data (records,
queries, filter trees, *write operations* as tuples). The store (:mod:`.table`)
keeps the locks, field kinds and journals.

Write operations (:data:`WriteOp`), applied in order by :meth:`Generation.write`
and journaled as such during a background build (replaying them is correct:
each is idempotent):

* ``("upsert", ids, rows, payloads)``: point ids, the vectors (an ``(n, dim)``
  float32 matrix), the payload dicts;
* ``("upsert_prepared", token, ...)``: the points :meth:`Generation.prepare` made
  earlier from such an upsert, in parts (one token each), written in one update
  (never journaled: the store journals the upsert itself);
* ``("create_index", path, kind)`` / ``("delete_index", path)``;
* ``("delete_ids", tenant, ids)``: returns how many existed;
* ``("delete_where", tenant, where)``: returns how many matched.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

import numpy as np
import qdrant_edge as q

from ragline.core.filters import Node
from ragline.core.ids import point_id
from ragline.core.tenancy import TenantScope, first_by_id, tenants_of
from ragline.core.types import Page, Record, ScoredRecord, StoreQuery
from ragline.providers.stores.qdrant_common.filters import TENANT, field_path
from ragline.providers.stores.qdrant_edge import resident
from ragline.providers.stores.qdrant_edge.indexes import (
    base_index_params,
    index_memory,
    index_params,
)
from ragline.providers.stores.qdrant_edge.queries import (
    EXACT,
    TEXT,
    VECTOR,
    DensePlan,
    build_request,
    dense_plan,
)
from ragline.providers.stores.qdrant_edge.translate import scoped_filter, tenant_filter
from ragline.providers.stores.qdrant_edge.wire import WriteOp


def _points(ids: list[Any], rows: np.ndarray, payloads: list[dict[str, Any]]) -> list[Any]:
    """Edge's points. Rows as Python lists: q.Point from numpy rows measured 104 ms per
    1,000 384-d points with payloads, from lists 43 ms + 11 ms of one tolist()."""
    return [q.Point(pid, {VECTOR: vec}, pl)
            for pid, vec, pl in zip(ids, rows.tolist(), payloads, strict=True)]


@dataclass(frozen=True)
class SearchConfig:
    """What a generation needs of the store's options."""

    exact_search_max_matches: int
    hnsw_ef: int
    filter_links: bool
    index_memory: str
    full_scan_threshold_kb: int


class Generation:
    """One open Edge shard generation. Thread-safe as Edge is; the store serialises
    writes (its write lock)."""

    def __init__(self, shard: Any, cfg: SearchConfig) -> None:
        self.shard = shard
        self.cfg = cfg
        self._has_text: bool | None = None
        self._prepared: dict[int, list[Any]] = {}
        self._tokens = itertools.count(1)
        self._prepared_lock = threading.Lock()
        # one write-side Edge call at a time: see prepare
        self._edge_writes = threading.Lock()
        self._resident: list[Any] = []

    # -- writes ----------------------------------------------------------------------
    def prepare(self, ids: list[Any], rows: Any, payloads: list[dict[str, Any]]) -> int:
        """Make Edge's points of an upsert now, outside the store's write lock; a later
        ``("upsert_prepared", token)`` writes them. Making the points (the vectors and
        payloads converted by the binding, GIL held) is over half of a bulk write's time
        in Edge (measured: ~48 of ~90 ms per 1,000 384-d points), and outside the write
        lock it does not hold up deletes or index changes.

        It does not run beside another writer's Edge call, though (``_edge_writes``):
        two threads making points and updating at once cost more than one after the
        other. Measured in one process (``benchmarks/bench_edge_write_threads.py``),
        30,000 points in batches of 1,000 from two threads: 67.8 ms of wall time and
        79.0 ms of CPU per 1,000 unserialised, against 54.1 and 54.2 taking turns, and
        54.7 from one thread (Edge's update lets go of the GIL for part of its run and
        each time has to win it back). Through HTTP: 13,234 docs/s against 12,289."""
        with self._edge_writes:
            points = _points(ids, rows, payloads)
        with self._prepared_lock:
            token = next(self._tokens)
            self._prepared[token] = points
        return token

    def prepared_count(self) -> int:
        """Prepared parts not yet written or forgotten (0 between writes: a write that
        failed must not leave its points here)."""
        with self._prepared_lock:
            return len(self._prepared)

    def forget(self, token: int) -> None:
        """Drop prepared points that will not be written (the write failed before it,
        or a background build replaced this generation meanwhile)."""
        with self._prepared_lock:
            self._prepared.pop(token, None)

    def write(self, ops: list[WriteOp]) -> list[int]:
        """Apply ``ops`` in order; one result per op (counts for deletes, else 0)."""
        with self._edge_writes:
            return self._write(ops)

    def _write(self, ops: list[WriteOp]) -> list[int]:
        out: list[int] = []
        memory = index_memory(self.cfg.index_memory)
        for op in ops:
            kind = op[0]
            if kind == "upsert":
                _, ids, rows, payloads = op
                self.shard.update(q.UpdateOperation.upsert_points(_points(ids, rows, payloads)))
                out.append(0)
            elif kind == "upsert_prepared":
                points = self._take_prepared(op[1:])
                self.shard.update(q.UpdateOperation.upsert_points(points))
                out.append(0)
            elif kind == "create_index":
                _, path, field_kind = op
                self.shard.update(q.UpdateOperation.create_field_index(
                    path, index_params(field_kind, self.cfg.filter_links, memory)))
                out.append(0)
            elif kind == "delete_index":
                self.shard.update(q.UpdateOperation.delete_field_index(op[1]))
                out.append(0)
            elif kind == "delete_ids":
                _, tenant, ids = op
                found = self.shard.retrieve([point_id(tenant, i) for i in ids], False, False)
                if found:
                    self.shard.update(q.UpdateOperation.delete_points([p.id for p in found]))
                out.append(len(found))
            elif kind == "delete_where":
                flt = tenant_filter(op[1], op[2])
                n = int(self.shard.count(q.CountRequest(filter=flt, exact=True)))
                if n:
                    self.shard.update(q.UpdateOperation.delete_points_by_filter(flt))
                out.append(n)
            else:
                raise ValueError(f"unknown write operation {kind!r}")
        return out

    def _take_prepared(self, tokens: tuple[int, ...]) -> list[Any]:
        """The points of ``tokens``, in order; all or none are taken."""
        with self._prepared_lock:
            missing = [t for t in tokens if t not in self._prepared]
            if missing:
                raise ValueError(f"no prepared points for token {missing[0]!r}")
            parts = [self._prepared.pop(t) for t in tokens]
        return parts[0] if len(parts) == 1 else list(itertools.chain.from_iterable(parts))

    def create_base_indexes(self) -> None:
        memory = index_memory(self.cfg.index_memory)
        for field in ("tenant", "doc_id", TEXT):
            params = base_index_params(field, memory)
            assert params is not None
            self.shard.update(q.UpdateOperation.create_field_index(field, params))

    def flush(self) -> None:
        self.shard.flush()

    def warm(self, dim: int) -> None:
        """A few searches before the generation goes live, so that the first requests do
        not pay for what Edge and the page cache set up on first use (measured: the first
        searches after a swap waited 18-57 ms at 100k points, later ones 3 ms)."""
        rng = np.random.default_rng()
        for _ in range(4):
            vec = rng.normal(size=dim).astype(np.float32).tolist()
            self.shard.query(q.QueryRequest(query=q.Query.Nearest(vec, using=VECTOR),
                                            limit=10, with_payload=True))

    def optimize(self) -> bool:
        return bool(self.shard.optimize())

    def keep_resident(self, path: str) -> int:
        """Map and read in the payload indexes of this generation's built segments
        (``path``: its directory) and keep them mapped until :meth:`close`; returns the
        bytes held (:mod:`.resident` says why)."""
        resident.release(self._resident)
        self._resident, held = resident.hold(Path(path))
        return held

    def close(self) -> None:
        resident.release(self._resident)
        self.shard.close()

    # -- reads -----------------------------------------------------------------------
    def status(self) -> tuple[int, int]:
        """(points, points in HNSW-indexed segments)."""
        info = self.shard.info()
        return int(info.points_count), int(info.indexed_vectors_count)

    def schema(self) -> dict[str, tuple[str, bool, bool]]:
        """Payload index per path: (data type, per-value links, cold), for tests and
        the build process."""
        return {path: (str(i.data_type), bool(getattr(i.params, "enable_hnsw", False)),
                       getattr(i.params, "memory", None) == q.Memory.Cold)
                for path, i in self.shard.info().payload_schema.items()}

    def linked(self, info: Any = None) -> frozenset[str]:
        """Metadata fields whose per-value HNSW links keep a walk's recall: keyword
        fields with links. Integer fields get links too, but a walk for one integer
        value does not reliably keep its recall (``tier = 0``, 25 %: recall@10
        0.931-0.947 at 100k, 0.997 at 1M), so their filters are planned like unlinked
        ones."""
        info = info if info is not None else self.shard.info()
        prefix = "metadata."
        return frozenset(
            path[len(prefix):] for path, pi in info.payload_schema.items()
            if path.startswith(prefix) and pi.data_type == q.PayloadSchemaType.Keyword
            and getattr(pi.params, "enable_hnsw", False))

    def plan(self, sq: StoreQuery) -> DensePlan | None:
        """The plan :meth:`query_batch` would use for a dense or hybrid search ``sq``
        (None: sparse), without its Edge parameters (they do not cross a process
        boundary); for benchmarks, tests and diagnostics."""
        if sq.mode == "sparse":
            return None
        info = self.shard.info()
        dp = self._dense_plan(info, self.linked(info), sq, self.alone(sq.tenant, info))
        return DensePlan(dp.kind, None, dp.estimate, dp.parts)

    def alone(self, tenant: TenantScope, info: Any = None) -> bool:
        """Whether every point of the shard is of ``tenant``'s tenants (a reader's scope
        covers its own and the shared corpus: core/tenancy.py), by Edge's count of
        their points (the tenant index's, exact: ~6 us) against the shard's.

        Why: a search's tenant condition is checked by Edge at every point its graph
        walk visits; when it selects every point it only costs time (a ``cat`` search
        at 100k measured 3.1 ms with it, 1.6 without; unfiltered 0.85-1.5 against 0.7),
        so such a shard is searched without it. Safe whatever the count says: every
        hit's tenant is checked, and a hit of another tenant (a write racing the plan)
        makes :meth:`query_batch` run the query again with the condition."""
        info = info if info is not None else self.shard.info()
        # one count per tenant: the index answers a single value's count exactly, while
        # its count of a MatchAny is an estimate
        found = sum(int(self.shard.count(q.CountRequest(filter=tenant_filter(t, None),
                                                        exact=False)))
                    for t in tenants_of(tenant))
        return found == int(info.points_count)

    def _dense_plan(self, info: Any, linked: frozenset[str], sq: StoreQuery,
                    alone: bool) -> DensePlan:
        # Edge's full-scan threshold in points: values with at least this many get links
        dim = len(sq.vector) if sq.vector is not None else 1
        links_min = self.cfg.full_scan_threshold_kb * 1024 // (4 * max(dim, 1))
        return dense_plan(self.shard, info, scoped_filter(sq.tenant, sq.where, alone),
                          sq.where, linked, self.cfg.exact_search_max_matches,
                          self.cfg.hnsw_ef, links_min, split=sq.mode == "dense")

    def has_text(self) -> bool:
        if self._has_text is None:  # made with the shard: read once
            self._has_text = TEXT in self.shard.info().payload_schema
        return self._has_text

    def get(self, tenant: TenantScope, ids: list[str], with_vectors: bool) -> list[Record]:
        tenants = tenants_of(tenant)
        pts = self.shard.retrieve([point_id(t, i) for t in tenants for i in ids], True,
                                  with_vectors)
        # the point id encodes the tenant; the payload's is checked all the same
        return first_by_id((_record(p, with_vectors) for p in pts), ids, tenant)

    def count(self, tenant: TenantScope, where: Node | None) -> int:
        """The tenant's points matching ``where``. Unfiltered on a shard whose points are
        all the tenant's (:meth:`alone`), the shard's own point count: Edge's exact count
        visits every point (7-10 ms at 100k, ten times that at 1M, on every collection
        view, /info and documents page), its point count is kept per segment."""
        if where is None:
            info = self.shard.info()
            if self.alone(tenant, info):
                return int(info.points_count)
        return int(self.shard.count(q.CountRequest(filter=tenant_filter(tenant, where),
                                                    exact=True)))

    def list_page(self, tenant: TenantScope, where: Node | None, limit: int, offset: int) -> Page:
        flt = tenant_filter(tenant, where)
        total = self.count(tenant, where)
        if limit <= 0 or offset >= total:
            return Page([], total)
        cursor = None
        if offset:  # scroll is id-ordered; skip by ids only, without payloads
            _, cursor = self.shard.scroll(q.ScrollRequest(
                limit=offset, filter=flt, with_payload=False, with_vector=False))
            if cursor is None:
                return Page([], total)
        pts, _ = self.shard.scroll(q.ScrollRequest(
            offset=cursor, limit=limit, filter=flt, with_payload=True, with_vector=False))
        return Page([_record(p) for p in pts], total)

    def distinct(self, tenant: TenantScope, field: str, kind: str | None) -> list[Any]:
        """Distinct values of a metadata field (unsorted); ``kind``: its index kind."""
        flt = tenant_filter(tenant, None)
        values: set[Any] = set()
        path = field_path(field)
        if kind in ("keyword", "integer"):
            resp = self.shard.facet(q.FacetRequest(path, limit=1_000_000, exact=True,
                                                   filter=flt))
            return [h.value for h in resp.hits]
        cursor = None
        sel = q.PayloadSelector.Include([path])
        while True:
            pts, cursor = self.shard.scroll(q.ScrollRequest(
                offset=cursor, limit=5000, filter=flt, with_payload=sel, with_vector=False))
            for p in pts:
                v = ((p.payload or {}).get("metadata") or {}).get(field)
                for x in v if isinstance(v, list) else [v]:
                    if x is not None:
                        values.add((type(x) is bool, x))
            if cursor is None:
                break
        return [x for _, x in values]

    def query_batch(self, queries: list[StoreQuery]) -> list[list[ScoredRecord]]:
        """Several searches in one Edge call (``EdgeShard.query_batch``).

        Each dense search gets a plan from Edge's match-count estimate
        (:func:`.queries.dense_plan`); an ``$in`` of a few values of a linked field too
        large for exact search runs as one graph walk per value, merged by score. A
        graph search that returns fewer hits than it asked for is run again exactly, so
        an index never answers short silently (a filter matching fewer points than the
        limit makes that exact run small). A shard whose points are all the caller's
        tenant's is searched without the tenant condition (:meth:`alone`); a hit of
        another tenant there makes the query run again with it.
        """
        plans: list[_Plan] = []
        reqs: list[Any] = []
        info = self.shard.info()
        linked = self.linked(info) if any(sq.mode != "sparse" for sq in queries) else frozenset()
        alone: dict[TenantScope, bool] = {}
        for i, sq in enumerate(queries):
            if sq.tenant not in alone:
                alone[sq.tenant] = self.alone(sq.tenant, info)
            plan = self._plan(info, linked, i, sq, alone[sq.tenant])
            if plan is None:
                continue
            plans.append(plan)
            if len(plan.requests) == 1:
                plan.first = len(reqs)
                reqs.append(plan.requests[0])
            else:  # per-value walks one by one: Edge's query_batch ran 3 filtered
                # walks 6.5x slower than 3 single queries (measured at 50k points)
                plan.found = [self.shard.query(r) for r in plan.requests]
        if len(reqs) == 1:
            found = [self.shard.query(reqs[0])]
        else:
            found = self.shard.query_batch(q.QueryBatchRequest(reqs)) if reqs else []
        out: list[list[ScoredRecord]] = [[] for _ in queries]
        for plan in plans:
            sq = queries[plan.slot]
            pts = (found[plan.first] if plan.found is None
                   else _merge(plan.found, sq.limit))
            recs = _scored(pts, sq.with_vectors, sq.tenant if plan.alone else None)
            if recs is None:  # a point of another tenant: run again with the condition
                scoped = self._plan(info, linked, plan.slot, sq, False)
                assert scoped is not None  # the same query planned with the condition
                plan, pts = scoped, self._run(scoped, sq.limit)
            if plan.guarded and len(pts) < sq.limit:
                pts = self.shard.query(build_request(
                    sq, tenant_filter(sq.tenant, sq.where), EXACT))
                recs = None
            out[plan.slot] = recs if recs is not None else _scored(pts, sq.with_vectors)
        return out

    def _run(self, plan: _Plan, limit: int) -> list[Any]:
        """The points of one plan's requests, run on their own."""
        if len(plan.requests) == 1:
            return list(self.shard.query(plan.requests[0]))
        return _merge([self.shard.query(r) for r in plan.requests], limit)

    def _plan(self, info: Any, linked: frozenset[str], slot: int,
              sq: StoreQuery, alone: bool) -> _Plan | None:
        """The Edge requests for one query (None: it cannot match anything);
        ``alone``: without the tenant condition (see :meth:`alone`)."""
        if sq.mode == "sparse":
            req = build_request(sq, scoped_filter(sq.tenant, sq.where, alone), None)
            return None if req is None else _Plan(slot, [req], False, alone)
        dp = self._dense_plan(info, linked, sq, alone)
        # a score threshold makes short answers legitimate: no exact re-run then
        guarded = dp.guarded and sq.score_threshold is None
        if dp.kind == "split":  # one walk per value, merged by score
            return _Plan(slot, [build_request(sq, scoped_filter(sq.tenant, part, alone),
                                              dp.params) for part in dp.parts], guarded, alone)
        req = build_request(sq, scoped_filter(sq.tenant, sq.where, alone), dp.params)
        return None if req is None else _Plan(slot, [req], guarded, alone)


@dataclass
class _Plan:
    """The Edge requests of one query in a batch: one, or one per ``$in`` value.
    ``guarded``: the plan can answer short (graph walks), so a short answer is redone
    exactly."""

    slot: int
    requests: list[Any]
    guarded: bool
    alone: bool  # without the tenant condition (Generation.alone)
    first: int = 0  # the position of a single request in the shard's batch
    found: list[list[Any]] | None = None  # the answers of per-value walks


def _record(p: Any, with_vector: bool = False, pl: dict[str, Any] | None = None) -> Record:
    pl = pl if pl is not None else (p.payload or {})  # each access converts it again
    emb = None
    # the binding converts p.vector at each access (~10 us for 384-d); fromiter reads
    # the list at ~8 us where asarray took ~13 (values alike: Edge's float32s)
    vector = p.vector if with_vector else None
    if vector is not None:
        v = vector[VECTOR] if isinstance(vector, dict) else vector
        emb = np.fromiter(v, dtype=np.float32, count=len(v)) * np.float32(pl.get("norm", 1.0))
    return Record(pl.get("doc_id", str(p.id)), pl.get("text", ""),
                  pl.get("metadata") or {}, emb, pl.get(TENANT, "default"))


@overload
def _scored(pts: list[Any], with_vectors: bool) -> list[ScoredRecord]: ...


@overload
def _scored(pts: list[Any], with_vectors: bool, tenant: TenantScope | None,
            ) -> list[ScoredRecord] | None: ...


def _scored(pts: list[Any], with_vectors: bool, tenant: TenantScope | None = None,
            ) -> list[ScoredRecord] | None:
    """The hits as records; None when ``tenant`` is given and a point is not of its
    tenants (its payload names another, or none)."""
    tenants = tenants_of(tenant) if tenant is not None else ()
    out = []
    for p in pts:
        pl = p.payload or {}
        if tenant is not None and pl.get(TENANT) not in tenants:
            return None
        r = _record(p, with_vectors, pl)
        out.append(ScoredRecord(r.id, r.text, r.metadata, float(p.score), r.embedding,
                                r.tenant))
    return out


def _merge(parts: list[list[Any]], limit: int) -> list[Any]:
    """The best ``limit`` points of several walks, each point once (a list-valued field
    can put a point under two values)."""
    best: dict[Any, Any] = {}
    for pts in parts:
        for p in pts:
            if p.id not in best or p.score > best[p.id].score:
                best[p.id] = p
    return sorted(best.values(), key=lambda p: p.score, reverse=True)[:limit]
