"""The Qdrant Edge store: one Edge shard per collection generation.

Design points, each from the engine bake-off (``research/engine-bakeoff.md``):

* A batch that fails inside Edge can be partly written, so the service
  validates everything before calling :meth:`upsert`, and a request's records
  go to Edge as one update operation (SIGKILL leaves it whole or absent).
* ``optimize()`` holds the GIL for its whole run (measured: a Python thread got
  0.05 % of its normal speed during a 10 s optimize), so it is never run on the
  serving path; unindexed segments are searched exactly, which is fast at the
  sizes one process serves. See ``docs/storage.md``.
* Filtered HNSW loses recall silently on some filters, so a filtered search
  first counts its matches and searches exactly when the count is small.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import qdrant_edge as q
from pydantic import Field

from ragline.core.filters import Node
from ragline.core.ids import point_id
from ragline.core.types import Page, Record, Scalar, ScoredRecord, StoreQuery
from ragline.errors import ShardGone, StoreError
from ragline.providers.base import Health, ProviderConfig
from ragline.providers.stores.qdrant_common.fields import FieldKinds
from ragline.providers.stores.qdrant_common.filters import bool_path, field_path, point_payload
from ragline.providers.stores.qdrant_edge.locks import RWLock
from ragline.providers.stores.qdrant_edge.queries import (
    TEXT,
    VECTOR,
    build_request,
    search_params,
)
from ragline.providers.stores.qdrant_edge.translate import tenant_filter

log = logging.getLogger(__name__)


def _text_index() -> Any:
    """BM25 over chunk text: word tokens, lower-cased, English stopwords and stemming."""
    return q.TextIndexParams(
        tokenizer=q.TokenizerType.Word, lowercase=True, ascii_folding=True,
        stopwords=q.Language.English, stemmer=q.SnowballParams(q.SnowballLanguage.English),
        scoring=True, enable_hnsw=False,
    )
_INDEX_PARAMS: dict[str, Any] = {
    "keyword": lambda: q.KeywordIndexParams(enable_hnsw=False),
    "integer": lambda: q.IntegerIndexParams(lookup=True, range=True, enable_hnsw=False),
    "float": lambda: q.FloatIndexParams(enable_hnsw=False),
    "bool": lambda: q.KeywordIndexParams(enable_hnsw=False),  # on the bools.* shadow
}


def _index_path(field: str, kind: str) -> str:
    return bool_path(field) if kind == "bool" else field_path(field)


class QdrantEdgeConfig(ProviderConfig):
    path: Path = Field(description="Directory holding one sub-directory per shard.")
    exact_search_max_matches: int = 25_000
    hnsw_ef: int = 256
    search_threads: int = Field(
        1, ge=1, le=64, description="Threads of each shard's search pool. 1 by default: under "
        "concurrent requests the requests already fill the cores, and measured on 2 cores "
        "(hybrid search over HTTP, 100 connections) 1 thread gave 1.2x the QPS of Edge's "
        "CPU-derived default (8) and of 2.")
    payload_memory: Literal["cold", "cached"] = Field(
        "cached", description="Where Edge keeps payloads (chunk text and metadata): 'cached' "
        "keeps them in memory once read (every search returns them), 'cold' reads them from "
        "disk each time (less RAM for very large collections).")


class _Shard:
    def __init__(self, shard: Any, path: Path) -> None:
        self.shard = shard
        self.path = path
        self.fields = FieldKinds(path / "ragline_fields.json")
        self.lock = RWLock()
        self.write_lock = threading.Lock()
        self.closed = False
        self.has_text: bool | None = None  # read once: the text index is made with the shard


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
                shard = q.EdgeShard.load(str(path), self._edge_config(dim))
            except Exception as exc:
                raise StoreError(f"cannot open shard {key}: {exc}") from exc
            sh = self._shards[key] = _Shard(shard, path)
            return sh

    def _edge_config(self, dimension: int) -> Any:
        """The shard config for create and load (load rewrites the runtime settings,
        so changing them in ragline's settings applies to existing shards too)."""
        return q.EdgeConfig(
            vectors={VECTOR: q.EdgeVectorParams(size=dimension, distance=q.Distance.Cosine)},
            max_search_threads=self.config.search_threads,
            payload_memory=q.Memory.Cached if self.config.payload_memory == "cached"
            else q.Memory.Cold,
        )

    def _require(self, key: str) -> _Shard | None:
        return self._open(key)

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
            shard = q.EdgeShard.create(str(path), self._edge_config(dimension))
            shard.update(q.UpdateOperation.create_field_index(
                "tenant", q.KeywordIndexParams(is_tenant=True)))
            shard.update(q.UpdateOperation.create_field_index(
                "doc_id", q.KeywordIndexParams(enable_hnsw=False)))
            shard.update(q.UpdateOperation.create_field_index(TEXT, _text_index()))
            shard.flush()
            tmp = path / "ragline_dim.tmp"
            tmp.write_text(str(dimension))
            tmp.replace(marker)  # the marker makes the shard visible, atomically
            self._shards[key] = _Shard(shard, path)

    @contextmanager
    def _use(self, sh: _Shard) -> Iterator[None]:
        """Hold a shard for one operation; a shard dropped meanwhile is an error, not a crash."""
        with sh.lock.shared():
            if sh.closed:
                raise ShardGone(
                    "The collection was emptied or deleted while this request ran; retry it"
                )
            yield

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

    # -- writes ------------------------------------------------------------------
    def upsert(self, key: str, records: list[Record]) -> None:
        if not records:
            return
        sh = self._require(key)
        if sh is None:
            raise StoreError(f"shard {key} does not exist")
        points = []
        for r in records:
            assert r.embedding is not None
            vec = np.asarray(r.embedding, dtype=np.float32)
            norm = float(np.linalg.norm(vec))
            payload = point_payload(r.id, r.text, r.tenant, r.metadata, norm)
            points.append(q.Point(point_id(r.tenant, r.id), {VECTOR: vec.tolist()}, payload))
        with self._use(sh), sh.write_lock:
            to_index, to_drop = sh.fields.observe([r.metadata for r in records])
            for f, kind in to_drop:
                sh.shard.update(q.UpdateOperation.delete_field_index(_index_path(f, kind)))
            sh.shard.update(q.UpdateOperation.upsert_points(points))
            for f, kind in to_index.items():
                sh.shard.update(q.UpdateOperation.create_field_index(
                    _index_path(f, kind), _INDEX_PARAMS[kind]()))
            if to_index or to_drop:
                sh.fields.save()

    def delete_ids(self, key: str, tenant: str, ids: list[str]) -> int:
        sh = self._require(key)
        if sh is None or not ids:
            return 0
        pids = [point_id(tenant, i) for i in dict.fromkeys(ids)]
        with self._use(sh), sh.write_lock:
            found = sh.shard.retrieve(pids, False, False)
            if found:
                sh.shard.update(q.UpdateOperation.delete_points([p.id for p in found]))
            return len(found)

    def delete_where(self, key: str, tenant: str, where: Node | None) -> int:
        sh = self._require(key)
        if sh is None:
            return 0
        flt = tenant_filter(tenant, where)
        with self._use(sh), sh.write_lock:
            n = sh.shard.count(q.CountRequest(filter=flt, exact=True))
            if n:
                sh.shard.update(q.UpdateOperation.delete_points_by_filter(flt))
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
        sh = self._require(key)
        if sh is None or not ids:
            return []
        with self._use(sh):
            pts = sh.shard.retrieve([point_id(tenant, i) for i in ids], True, with_vectors)
        by_id = {r.id: r for r in (self._record(p, with_vectors) for p in pts)}
        return [by_id[i] for i in dict.fromkeys(ids) if i in by_id]

    def count(self, key: str, tenant: str, where: Node | None) -> int:
        sh = self._require(key)
        if sh is None:
            return 0
        with self._use(sh):
            return int(sh.shard.count(q.CountRequest(filter=tenant_filter(tenant, where),
                                                      exact=True)))

    def list_page(self, key: str, tenant: str, where: Node | None, limit: int, offset: int) -> Page:
        sh = self._require(key)
        if sh is None:
            return Page([], 0)
        flt = tenant_filter(tenant, where)
        with self._use(sh):
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

    def query_batch(self, key: str, queries: list[StoreQuery]) -> list[list[ScoredRecord]]:
        """Several searches on one shard in one Edge call (``EdgeShard.query_batch``)."""
        sh = self._require(key)
        if sh is None:
            return [[] for _ in queries]
        slots: list[int] = []
        reqs: list[Any] = []
        with self._use(sh):
            info = sh.shard.info() if any(sq.mode != "sparse" for sq in queries) else None
            for i, sq in enumerate(queries):
                flt = tenant_filter(sq.tenant, sq.where)
                params = None if info is None or sq.mode == "sparse" else search_params(
                    sh.shard, info, flt, self.config.exact_search_max_matches,
                    self.config.hnsw_ef)
                req = build_request(sq, flt, params)
                if req is not None:
                    slots.append(i)
                    reqs.append(req)
            if len(reqs) == 1:
                found = [sh.shard.query(reqs[0])]
            else:
                found = sh.shard.query_batch(q.QueryBatchRequest(reqs)) if reqs else []
        out: list[list[ScoredRecord]] = [[] for _ in queries]
        for i, pts in zip(slots, found, strict=True):
            out[i] = self._scored(pts, queries[i].with_vectors)
        return out

    def _scored(self, pts: list[Any], with_vectors: bool) -> list[ScoredRecord]:
        out = []
        for p in pts:
            r = self._record(p, with_vectors)
            out.append(ScoredRecord(r.id, r.text, r.metadata, float(p.score), r.embedding))
        return out

    def has_text_index(self, key: str) -> bool:
        sh = self._require(key)
        if sh is None:
            return False
        if sh.has_text is None:  # every search asks; an Edge call per request is not free
            sh.has_text = TEXT in sh.shard.info().payload_schema
        return sh.has_text

    def distinct(self, key: str, tenant: str, field: str) -> list[Scalar]:
        sh = self._require(key)
        if sh is None:
            return []
        flt = tenant_filter(tenant, None)
        values: set[Any] = set()
        path = field_path(field)
        with self._use(sh):
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
        sh = self._require(key)
        if sh is None:
            return False
        with self._use(sh), sh.write_lock:
            return bool(sh.shard.optimize())

    @classmethod
    def connection_schema(cls) -> dict[str, Any]:
        return QdrantEdgeConfig.model_json_schema()

    def capabilities(self) -> list[str]:
        return list(self.CAPABILITIES)

    def health(self) -> Health:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            probe = self.root / ".health"
            probe.write_text("ok")
            probe.unlink()
            return Health.now("ok", {"engine": "qdrant-edge", "open_shards": len(self._shards),
                                     "path": str(self.root)})
        except OSError as exc:
            return Health.now("down", {"engine": "qdrant-edge"}, error=str(exc))


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
