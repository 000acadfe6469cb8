"""The Qdrant server store, through ``qdrant-client``: one Qdrant collection per shard.

Design points:

* **A collection per ragline shard** (one collection generation), not one shared
  collection keyed by a payload field. A shard has its own dimension, which a
  shared collection's single vector space could not hold; dropping a generation
  (emptying or deleting a ragline collection, a pointer swap in the catalog) is
  then ``delete_collection``, instant, instead of a delete-by-filter over every
  point followed by Qdrant's vacuum. Tenants share a collection, each request
  filtered by the ``tenant`` payload field, indexed with ``is_tenant`` so Qdrant
  lays points out per tenant.
* The ``where`` translation and the payload layout are the embedded store's
  (:mod:`ragline.providers.stores.qdrant_common`), so both Qdrant providers
  filter identically. Metadata fields get payload indexes by the same policy
  (one kind of value seen so far), its state kept in the collection's metadata.
* A batch upsert is one ``upsert`` request, which Qdrant applies as one update
  operation on a single-shard collection; across the shards of a distributed
  collection it is not atomic (Qdrant has no cross-shard transactions).
* Searches of a batch go as one ``query_batch_points`` request.

``location`` selects ``qdrant-client``'s *local mode* (an in-process Python
engine, ``":memory:"`` or a directory): the only Qdrant available offline in
ragline's test environment, and what the conformance tests run against. It has
no payload indexes, no sharding or replication, and ranks text only with the
default tokenizer (no stemming or stopwords: ``text_analysis="plain"``).
"""

from __future__ import annotations

import logging
import re
import threading
import warnings
from collections.abc import Callable, Iterable
from typing import Any, ClassVar, TypeVar

import numpy as np
from qdrant_client import QdrantClient
from qdrant_client import models as m

from ragline.core.filters import Node
from ragline.core.ids import point_id
from ragline.core.tenancy import TenantScope, first_by_id, tenants_of
from ragline.core.types import Page, Record, Scalar, ScoredRecord, StoreQuery
from ragline.errors import InvalidInput, StoreError, StoreUnavailable
from ragline.providers.base import Health, ProviderConfig, config_schema
from ragline.providers.stores.base import scalar_sort_key
from ragline.providers.stores.qdrant_common.fields import FieldKinds
from ragline.providers.stores.qdrant_common.filters import (
    bool_path,
    field_path,
    point_payload,
    tenant_filter,
)
from ragline.providers.stores.qdrant_server.config import QdrantServerConfig

__all__ = ["QdrantServerConfig", "QdrantServerStore"]

log = logging.getLogger(__name__)
T = TypeVar("T")

VECTOR = "dense"
TEXT = "text"
_KEY = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_DIM = "ragline_dimension"
_FIELDS = "ragline_fields"


class _Shard:
    """What a process remembers of a collection: its payload-index state."""

    def __init__(self, fields: FieldKinds) -> None:
        self.fields = fields
        self.lock = threading.Lock()


class QdrantServerStore:
    name: ClassVar[str] = "qdrant"
    kind: ClassVar[str] = "store"
    Config: ClassVar[type[ProviderConfig]] = QdrantServerConfig
    CAPABILITIES: ClassVar[list[str]] = [
        "collections", "search", "metadata_filtering", "hybrid", "facets", "persistence",
        "shared",
    ]

    def __init__(self, config: QdrantServerConfig) -> None:
        self.config = config
        self.local = config.location is not None
        self.text_analysis = config.text_analysis or ("plain" if self.local else "english")
        if self.local:
            loc = str(config.location)
            self.client = (QdrantClient(location=":memory:") if loc == ":memory:"
                           else QdrantClient(path=loc))
        else:
            self.client = QdrantClient(
                url=config.url, prefer_grpc=config.prefer_grpc, grpc_port=config.grpc_port,
                api_key=config.api_key.get_secret_value() if config.api_key else None,
                timeout=config.timeout_s)
        # local mode is a plain Python object: one call at a time
        self._local_lock = threading.Lock() if self.local else None
        self._shards: dict[str, _Shard] = {}
        self._shards_lock = threading.Lock()

    # -- plumbing ----------------------------------------------------------------------
    def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """One client call, with SDK errors turned into ragline errors (no URL or key)."""
        try:
            if self._local_lock is None:
                return fn(*args, **kwargs)
            with self._local_lock, warnings.catch_warnings():
                # "payload indexes have no effect in the local Qdrant": known, documented
                warnings.simplefilter("ignore", UserWarning)
                return fn(*args, **kwargs)
        except (StoreError, InvalidInput):
            raise
        except Exception as exc:
            raise _translate(exc) from None

    def _name(self, key: str) -> str:
        if not _KEY.match(key):
            raise StoreError(f"bad shard key {key!r}")
        return f"{self.config.collection_prefix}{key}"

    def _shard(self, key: str) -> _Shard | None:
        """The collection's remembered state, loaded on first use; None if it is gone."""
        sh = self._shards.get(key)
        if sh is not None:
            return sh
        meta = self._metadata(key)
        if meta is None:
            return None
        with self._shards_lock:
            return self._shards.setdefault(key, _Shard(FieldKinds(None, meta.get(_FIELDS))))

    def _metadata(self, key: str) -> dict[str, Any] | None:
        try:
            info = self._call(self.client.get_collection, self._name(key))
        except StoreError as exc:
            if exc.details.get("missing"):
                return None
            raise
        return dict(info.config.metadata or {})

    # -- shard lifecycle -----------------------------------------------------------------
    def create_shard(self, key: str, dimension: int) -> None:
        name = self._name(key)
        meta = self._metadata(key)
        if meta is None:
            try:
                self._call(
                    self.client.create_collection, name,
                    vectors_config={VECTOR: m.VectorParams(size=dimension,
                                                           distance=m.Distance.COSINE)},
                    shard_number=self.config.shard_number,
                    replication_factor=self.config.replication_factor,
                    on_disk_payload=self.config.on_disk_payload,
                    metadata={_DIM: dimension, _FIELDS: {}})
            except StoreError as exc:
                if not exc.details.get("exists"):
                    raise
                # another process created it meanwhile: check its dimension below
            else:
                self._create_base_indexes(name)
            meta = self._metadata(key) or {}
        existing = int(meta.get(_DIM, dimension))
        if existing != dimension:
            raise StoreError(f"shard {key} has dimension {existing}, not {dimension}")

    def _create_base_indexes(self, name: str) -> None:
        self._call(self.client.create_payload_index, name, "tenant",
                   m.KeywordIndexParams(type=m.KeywordIndexType.KEYWORD, is_tenant=True))
        self._call(self.client.create_payload_index, name, "doc_id",
                   m.PayloadSchemaType.KEYWORD)
        text = m.TextIndexParams(type=m.TextIndexType.TEXT, tokenizer=m.TokenizerType.WORD,
                                 lowercase=True, scoring=True)
        if self.text_analysis == "english":
            text = m.TextIndexParams(
                type=m.TextIndexType.TEXT, tokenizer=m.TokenizerType.WORD, lowercase=True,
                ascii_folding=True, stopwords=m.Language.ENGLISH, scoring=True,
                stemmer=m.SnowballParams(type=m.Snowball.SNOWBALL,
                                         language=m.SnowballLanguage.ENGLISH))
        self._call(self.client.create_payload_index, name, TEXT, text)

    def has_shard(self, key: str) -> bool:
        return bool(self._call(self.client.collection_exists, self._name(key)))

    def shard_keys(self) -> list[str]:
        prefix = self.config.collection_prefix
        cols = self._call(self.client.get_collections).collections
        return sorted(c.name[len(prefix):] for c in cols
                      if c.name.startswith(prefix) and _KEY.match(c.name[len(prefix):]))

    def drop_shard(self, key: str) -> None:
        name = self._name(key)
        with self._shards_lock:
            self._shards.pop(key, None)
        try:
            self._call(self.client.delete_collection, name)
        except StoreError as exc:
            if not exc.details.get("missing"):
                raise

    def close(self) -> None:
        self._call(self.client.close)

    # -- writes --------------------------------------------------------------------------
    def upsert_parts(self, key: str, parts: Iterable[list[Record]]) -> None:
        self.upsert(key, [r for part in parts for r in part])  # nothing to overlap here

    def upsert(self, key: str, records: list[Record]) -> None:
        if not records:
            return
        name = self._name(key)
        sh = self._shard(key)
        if sh is None:
            raise StoreError(f"shard {key} does not exist")
        points = []
        for r in records:
            if r.embedding is None:
                raise StoreError(f"record {r.id!r} has no embedding")
            vec = np.asarray(r.embedding, dtype=np.float32)
            norm = float(np.linalg.norm(vec))
            points.append(m.PointStruct(
                id=point_id(r.tenant, r.id), vector={VECTOR: vec.tolist()},
                payload=point_payload(r.id, r.text, r.tenant, r.metadata, norm)))
        with sh.lock:
            to_index, to_drop = sh.fields.observe([r.metadata for r in records])
            for f, kind in to_drop:
                self._call(self.client.delete_payload_index, name, _index_path(f, kind))
            self._call(self.client.upsert, name, points, wait=True)  # one update operation
            for f, kind in to_index.items():
                self._call(self.client.create_payload_index, name, _index_path(f, kind),
                           _INDEX_SCHEMA[kind])
            if to_index or to_drop:
                self._call(self.client.update_collection, name,
                           metadata={_FIELDS: dict(sh.fields.kinds)})

    def delete_ids(self, key: str, tenant: str, ids: list[str]) -> int:
        if not ids:
            return 0
        name = self._name(key)
        found = self._retrieve(name, tenant, [point_id(tenant, i) for i in dict.fromkeys(ids)],
                               False)
        if found:
            self._call(self.client.delete, name, m.PointIdsList(points=[p.id for p in found]),
                       wait=True)
        return len(found)

    def delete_where(self, key: str, tenant: str, where: Node | None) -> int:
        name = self._name(key)
        flt = _filter(tenant, where)
        n = self._count(name, flt)
        if n:
            self._call(self.client.delete, name, m.FilterSelector(filter=flt), wait=True)
        return n

    # -- reads ---------------------------------------------------------------------------
    def _retrieve(self, name: str, tenant: TenantScope, pids: list[str], with_vectors: bool
                  ) -> list[Any]:
        try:
            pts = self._call(self.client.retrieve, name, pids, with_payload=True,
                             with_vectors=[VECTOR] if with_vectors else False)
        except StoreError as exc:
            if exc.details.get("missing"):
                return []
            raise
        # the point id already encodes the tenant; checking the payload costs nothing
        tenants = tenants_of(tenant)
        return [p for p in pts if (p.payload or {}).get("tenant") in tenants]

    def _count(self, name: str, flt: m.Filter) -> int:
        try:
            return int(self._call(self.client.count, name, count_filter=flt, exact=True).count)
        except StoreError as exc:
            if exc.details.get("missing"):
                return 0
            raise

    def get(
        self, key: str, tenant: TenantScope, ids: list[str], with_vectors: bool = False
    ) -> list[Record]:
        if not ids:
            return []
        pids = [point_id(t, i) for t in tenants_of(tenant) for i in dict.fromkeys(ids)]
        pts = self._retrieve(self._name(key), tenant, pids, with_vectors)
        return first_by_id((_record(p, with_vectors) for p in pts), ids, tenant)

    def count(self, key: str, tenant: TenantScope, where: Node | None) -> int:
        return self._count(self._name(key), _filter(tenant, where))

    def list_page(self, key: str, tenant: TenantScope, where: Node | None, limit: int,
                  offset: int) -> Page:
        """Point-id-ordered pages (scroll); an offset skips by ids only, without payloads."""
        name = self._name(key)
        flt = _filter(tenant, where)
        total = self._count(name, flt)
        if limit <= 0 or offset >= total:
            return Page([], total)
        cursor = None
        try:
            if offset:
                _, cursor = self._call(self.client.scroll, name, scroll_filter=flt,
                                       limit=offset, with_payload=False, with_vectors=False)
                if cursor is None:
                    return Page([], total)
            pts, _ = self._call(self.client.scroll, name, scroll_filter=flt, limit=limit,
                                offset=cursor, with_payload=True, with_vectors=False)
        except StoreError as exc:
            if exc.details.get("missing"):
                return Page([], 0)
            raise
        return Page([_record(p, False) for p in pts], total)

    def query_batch(self, key: str, queries: list[StoreQuery]) -> list[list[ScoredRecord]]:
        """Every search of the batch in one ``query_batch_points`` request."""
        if not queries:
            return []
        name = self._name(key)
        slots: list[int] = []
        reqs: list[m.QueryRequest] = []
        for i, sq in enumerate(queries):
            req = self._request(sq)
            if req is not None:
                slots.append(i)
                reqs.append(req)
        out: list[list[ScoredRecord]] = [[] for _ in queries]
        if not reqs:
            return out
        try:
            found = self._call(self.client.query_batch_points, name, reqs)
        except StoreError as exc:
            if exc.details.get("missing"):
                return out
            raise
        for i, resp in zip(slots, found, strict=True):
            out[i] = [_scored(p, queries[i].with_vectors) for p in resp.points]
        return out

    def _request(self, sq: StoreQuery) -> m.QueryRequest | None:
        """The Qdrant request for ``sq``; None when it cannot match (no words to rank).
        Hybrid fuses a dense and a BM25 prefetch inside Qdrant (RRF with ``k``, or DBSF),
        exactly as the embedded store does."""
        flt = _filter(sq.tenant, sq.where)
        with_vector: Any = [VECTOR] if sq.with_vectors else False
        if sq.mode == "sparse":
            if not sq.text.strip():
                return None
            return m.QueryRequest(query=m.TextQuery(text=sq.text), using=TEXT, filter=flt,
                                  limit=sq.limit, with_payload=True, with_vector=with_vector)
        if sq.vector is None:
            raise ValueError(f"a {sq.mode} query needs a vector")
        vec = np.asarray(sq.vector, dtype=np.float32).tolist()
        params = m.SearchParams(hnsw_ef=self.config.hnsw_ef)
        if sq.mode == "dense":
            return m.QueryRequest(query=vec, using=VECTOR, filter=flt, limit=sq.limit,
                                  params=params, with_payload=True, with_vector=with_vector,
                                  score_threshold=sq.score_threshold)
        depth = max(sq.candidates, sq.limit)
        fusion: Any = (m.FusionQuery(fusion=m.Fusion.DBSF) if sq.fusion == "dbsf"
                       else m.RrfQuery(rrf=m.Rrf(k=sq.rrf_k)))
        return m.QueryRequest(
            prefetch=[m.Prefetch(query=vec, using=VECTOR, filter=flt, limit=depth,
                                 params=params),
                      m.Prefetch(query=m.TextQuery(text=sq.text), using=TEXT, filter=flt,
                                 limit=depth)],
            query=fusion, limit=sq.limit, with_payload=True, with_vector=with_vector)

    def has_text_index(self, key: str) -> bool:
        try:
            info = self._call(self.client.get_collection, self._name(key))
        except StoreError as exc:
            if exc.details.get("missing"):
                return False
            raise
        return TEXT in (info.payload_schema or {}) or self.local  # local: made with the shard

    def distinct(self, key: str, tenant: TenantScope, field: str) -> list[Scalar]:
        name = self._name(key)
        sh = self._shard(key)
        if sh is None:
            return []
        flt = _filter(tenant, None)
        values: set[Any] = set()
        kind = sh.fields.indexed(field)
        if not self.local and kind in ("keyword", "integer"):  # facets need the index
            resp = self._call(self.client.facet, name, field_path(field), facet_filter=flt,
                              limit=1_000_000, exact=True)
            return sorted({h.value for h in resp.hits}, key=scalar_sort_key)
        cursor = None
        while True:
            pts, cursor = self._call(self.client.scroll, name, scroll_filter=flt, limit=5000,
                                     offset=cursor, with_payload=[field_path(field)],
                                     with_vectors=False)
            for p in pts:
                v = ((p.payload or {}).get("metadata") or {}).get(field)
                for x in v if isinstance(v, list) else [v]:
                    if x is not None:
                        values.add((type(x) is bool, x))
            if cursor is None:
                break
        return sorted((x for _, x in values), key=scalar_sort_key)

    # -- housekeeping --------------------------------------------------------------------
    def size_bytes(self, key: str) -> int:
        """Not reported: Qdrant's API gives point counts, not bytes on disk."""
        return 0

    def optimize(self, key: str) -> bool:
        """Nothing to do: the Qdrant server runs its optimizers in the background."""
        return False

    @classmethod
    def connection_schema(cls) -> dict[str, Any]:
        return config_schema(QdrantServerConfig)

    def capabilities(self) -> list[str]:
        return list(self.CAPABILITIES)

    def health(self) -> Health:
        details: dict[str, Any] = {"engine": "qdrant",
                                   "mode": "local" if self.local else "server",
                                   "text_analysis": self.text_analysis}
        try:
            if not self.local:
                info = self._call(self.client.info)
                details["server_version"] = info.version
            details["collections"] = details["collection_count"] = len(self.shard_keys())
            return Health.now("ok", details)
        except Exception as exc:  # health reports, it does not raise
            return Health.now("down", details, error=type(exc).__name__)


_INDEX_SCHEMA: dict[str, Any] = {
    "keyword": m.PayloadSchemaType.KEYWORD,
    "integer": m.IntegerIndexParams(type=m.IntegerIndexType.INTEGER, lookup=True, range=True),
    "float": m.PayloadSchemaType.FLOAT,
    "bool": m.PayloadSchemaType.KEYWORD,  # on the bools.* shadow
}


def _index_path(field: str, kind: str) -> str:
    return bool_path(field) if kind == "bool" else field_path(field)


def _filter(tenant: TenantScope, where: Node | None) -> m.Filter:
    """The shared JSON filter, validated into qdrant-client's models."""
    return m.Filter.model_validate(tenant_filter(tenant, where))


def _translate(exc: Exception) -> StoreError | StoreUnavailable:
    """A ragline error naming what failed, never the URL or the API key."""
    text = str(exc)
    status = getattr(exc, "status_code", None)
    code = getattr(exc, "code", None)
    grpc_code = str(code()) if callable(code) else ""
    if status == 404 or "NOT_FOUND" in grpc_code or (
            isinstance(exc, ValueError) and "not found" in text.lower()):
        return StoreError("Qdrant collection not found", details={"missing": True})
    if status == 409 or "ALREADY_EXISTS" in grpc_code or "already exists" in text.lower():
        return StoreError("Qdrant collection already exists", details={"exists": True})
    name = type(exc).__name__
    if name in ("ResponseHandlingException", "ConnectError", "ConnectTimeout") or (
            "UNAVAILABLE" in grpc_code or "DEADLINE_EXCEEDED" in grpc_code):
        return StoreUnavailable("Qdrant is unreachable")
    if status is not None:
        return StoreError(f"Qdrant answered HTTP {status}")
    return StoreError(f"Qdrant request failed ({name})")


def _record(p: Any, with_vector: bool) -> Record:
    pl = p.payload or {}
    emb = None
    if with_vector and p.vector is not None:
        v = p.vector[VECTOR] if isinstance(p.vector, dict) else p.vector
        emb = np.asarray(v, dtype=np.float32) * np.float32(pl.get("norm", 1.0))
    return Record(pl.get("doc_id", str(p.id)), pl.get("text", ""), pl.get("metadata") or {},
                  emb, pl.get("tenant", "default"))


def _scored(p: Any, with_vector: bool) -> ScoredRecord:
    r = _record(p, with_vector)
    return ScoredRecord(r.id, r.text, r.metadata, float(p.score), r.embedding, r.tenant)
