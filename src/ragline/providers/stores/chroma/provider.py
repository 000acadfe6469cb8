"""The Chroma store: ragline's store protocol on a Chroma database.

**Shards and tenants are collections.** A ragline shard (one per collection
generation, keyed by the catalog) is a *marker* Chroma collection
``<collection_prefix><key>`` that holds the dimension (metadata ``ragline_dim``)
and no records, plus one Chroma collection per ragline tenant that has written
to it, ``<collection_prefix><key>.t<sha256(tenant)[:24]>`` (cosine space, no
embedding function: ragline always sends embeddings). Collections without the
prefix are invisible to ragline, so it never lists, empties or drops another
application's data in a shared database. Collection names, metadata and embedding
settings stay in ragline's catalog, as with every store.

**The tenant condition is the collection.** Every call names its tenant and
touches only that tenant's collection, so no filter, however crafted, can reach
another tenant's records. A ``rl:tenant = <tenant>`` filter on a shared
collection would do the same, but Chroma evaluates metadata filters by listing
every matching row from SQLite before the vector search: measured on 5,000
records, an unfiltered top-10 took 1.1 ms and the same search with a tenant
filter that every record matches 43 ms (the cost grows with the number of
matches), so separate collections are what keeps unfiltered search and
``count`` cheap.

**Records.** A record's Chroma id is ``point_id(tenant, id)``; text is the Chroma
document, the embedding is stored as given, and the metadata is written as
described in :mod:`ragline.providers.stores.chroma.encoding` (verbatim JSON for
reads, typed scalar shadow keys for filters).

**What Chroma cannot do here.** No BM25 text index: sparse and hybrid queries are
refused with ``InvalidInput`` and capabilities leave out ``hybrid``. A write of
more than Chroma's maximum batch (``get_max_batch_size()``, 5461 in-process) is
split; if a later part fails the earlier parts are undone (previous versions put
back, new ids deleted), but a process killed between parts leaves them written,
unlike Qdrant Edge where a request is one operation. Replacing existing records
is slow in Chroma (measured ~10x slower per record than adding new ones). Dense
search is Chroma's HNSW (exact below its ``sync_threshold`` of unindexed points),
so recall is Chroma's, not the Edge store's exact-when-filtered search.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterable
from typing import Any, ClassVar

import numpy as np

from ragline.core.filters import Node
from ragline.core.ids import point_id
from ragline.core.tenancy import TenantScope, first_by_id, tenants_of
from ragline.core.types import Page, Record, Scalar, ScoredRecord, SearchMode, StoreQuery
from ragline.errors import (
    InvalidInput,
    StoreError,
)
from ragline.providers.base import Health, ProviderConfig, config_schema
from ragline.providers.stores.base import scalar_sort_key
from ragline.providers.stores.chroma.client import (
    DIM_KEY,
    calls,
    collection_name,
    connect,
    health_of,
    missing,
    size_of,
    translate,
    where_of,
)
from ragline.providers.stores.chroma.config import ChromaConfig
from ragline.providers.stores.chroma.encoding import (
    SUPPORTED_OPERATORS,
    decode,
    encode,
)

log = logging.getLogger(__name__)

SCAN_PAGE = 5000  # rows per get() when a call has to read every match


class ChromaStore:
    name: ClassVar[str] = "chroma"
    kind: ClassVar[str] = "store"
    Config: ClassVar[type[ProviderConfig]] = ChromaConfig
    CAPABILITIES: ClassVar[list[str]] = [
        "collections", "search", "metadata_filtering", "facets", "persistence",
    ]
    FILTER_OPERATORS: ClassVar[frozenset[str]] = SUPPORTED_OPERATORS

    def __init__(self, config: ChromaConfig) -> None:
        self.config = config
        self._cols: dict[tuple[str, str | None], Any] = {}  # (key, tenant); None: marker
        self._write_locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        self._client = connect(config)
        self._max_batch: int | None = None

    # -- shard lifecycle -------------------------------------------------------------
    def _name(self, key: str, tenant: str | None = None) -> str:
        return collection_name(self.config.collection_prefix, key, tenant)

    def _lookup(self, key: str, tenant: str | None) -> Any | None:
        """A collection handle (cached), or None if Chroma has no such collection."""
        col = self._cols.get((key, tenant))
        if col is not None:
            return col
        try:
            col = self._client.get_collection(self._name(key, tenant), embedding_function=None)
        except Exception as exc:
            if missing(exc):
                return None
            raise translate(exc, "get collection") from exc
        with self._lock:
            self._cols[(key, tenant)] = col
        return col

    def _col(self, key: str, tenant: str) -> Any | None:
        """The tenant's collection of shard ``key``; None if the shard or the tenant's part
        of it does not exist (reads then find nothing)."""
        return self._lookup(key, tenant)

    def _collections(self) -> list[str]:
        with calls("list collections"):
            return [c.name if hasattr(c, "name") else str(c)
                    for c in self._client.list_collections()]

    def has_shard(self, key: str) -> bool:
        return self._lookup(key, None) is not None

    def shard_keys(self) -> list[str]:
        """Every shard with a marker or any tenant collection (a drop removes the marker
        last, so an interrupted drop is still listed and can be finished)."""
        prefix = self.config.collection_prefix
        return sorted({n[len(prefix):].split(".", 1)[0] for n in self._collections()
                       if n.startswith(prefix)})

    def create_shard(self, key: str, dimension: int) -> None:
        col = self._lookup(key, None)
        if col is None:
            with calls("create collection"):
                col = self._client.get_or_create_collection(
                    self._name(key), metadata={DIM_KEY: int(dimension)},
                    configuration=self._hnsw(), embedding_function=None)
        existing = (col.metadata or {}).get(DIM_KEY)
        if existing is not None and int(existing) != dimension:
            raise StoreError(f"shard {key} has dimension {existing}, not {dimension}")
        with self._lock:
            self._cols[(key, None)] = col

    def _hnsw(self) -> dict[str, Any]:
        c = self.config
        return {"hnsw": {"space": "cosine", "ef_search": c.hnsw_ef,
                         "ef_construction": c.hnsw_ef_construction,
                         "max_neighbors": c.hnsw_max_neighbors}}

    def _tenant_col(self, key: str, tenant: str) -> Any:
        """The tenant's collection, created on its first write."""
        col = self._lookup(key, tenant)
        if col is not None:
            return col
        marker = self._lookup(key, None)
        if marker is None:
            raise StoreError(f"shard {key} does not exist")
        with calls("create collection"):
            col = self._client.get_or_create_collection(
                self._name(key, tenant), metadata={DIM_KEY: marker.metadata[DIM_KEY]},
                configuration=self._hnsw(), embedding_function=None)
        with self._lock:
            self._cols[(key, tenant)] = col
        return col

    def drop_shard(self, key: str) -> None:
        marker = self._name(key)
        with self._lock:
            for k in [k for k in self._cols if k[0] == key]:
                del self._cols[k]
            self._write_locks.pop(key, None)
        names = [n for n in self._collections() if n.startswith(marker + ".")]
        for name in [*names, marker]:  # the marker last: see shard_keys
            try:
                self._client.delete_collection(name)
            except Exception as exc:
                if not missing(exc):  # a missing collection: dropping is idempotent
                    raise translate(exc, "delete collection") from exc

    def close(self) -> None:
        with self._lock:
            self._cols.clear()
        with contextlib.suppress(Exception):  # closing must not fail shutdown
            self._client.close()

    # -- writes --------------------------------------------------------------------
    def _batch(self) -> int:
        if self._max_batch is None:
            with calls("batch size"):
                self._max_batch = int(self._client.get_max_batch_size())
        return self._max_batch

    def _write_lock(self, key: str) -> threading.Lock:
        with self._lock:
            return self._write_locks.setdefault(key, threading.Lock())

    def upsert_parts(self, key: str, parts: Iterable[list[Record]]) -> None:
        self.upsert(key, [r for part in parts for r in part])  # nothing to overlap here

    def upsert(self, key: str, records: list[Record]) -> None:
        if not records:
            return
        if self._lookup(key, None) is None:
            raise StoreError(f"shard {key} does not exist")
        metas = [encode(r.tenant, r.id, r.metadata) for r in records]  # refuses before writing
        by_tenant: dict[str, list[int]] = {}
        for i, r in enumerate(records):
            by_tenant.setdefault(r.tenant, []).append(i)
        with self._write_lock(key):
            for tenant, rows in by_tenant.items():
                self._upsert(self._tenant_col(key, tenant), [records[i] for i in rows],
                             [metas[i] for i in rows])

    def _upsert(self, col: Any, records: list[Record], metas: list[dict[str, Any]]) -> None:
        pids = [point_id(r.tenant, r.id) for r in records]
        embs = np.stack([np.asarray(r.embedding, dtype=np.float32) for r in records])
        docs = [r.text for r in records]
        step = self._batch()
        if len(pids) <= step:
            self._write(col, pids, embs, docs, metas)
            return
        # Over Chroma's batch limit: write in parts, and undo the earlier parts if a
        # later one fails (a killed process still leaves them; see the module doc).
        before = self._snapshot(col, pids)
        done = 0
        try:
            for start in range(0, len(pids), step):
                part = slice(start, start + step)
                self._write(col, pids[part], embs[part], docs[part], metas[part])
                done = start + step
        except Exception:
            if done:
                self._undo(col, pids[:done], before)
            raise

    def _write(self, col: Any, pids: list[str], embs: Any, docs: list[str],
               metas: list[dict[str, Any]]) -> None:
        """One Chroma upsert that *replaces* records: Chroma merges the metadata of an
        existing id, so the keys of the version being replaced are cleared (None)."""
        with calls("get"):
            old = col.get(ids=pids, include=["metadatas"])
        previous = dict(zip(old["ids"], old["metadatas"], strict=True))
        metas = [{**{k: None for k in previous.get(pid) or {}}, **meta}
                 for pid, meta in zip(pids, metas, strict=True)]
        with calls("upsert"):
            col.upsert(ids=pids, embeddings=embs, documents=docs, metadatas=metas)

    def _snapshot(self, col: Any, pids: list[str]) -> dict[str, tuple[Any, Any, Any]]:
        out: dict[str, tuple[Any, Any, Any]] = {}
        step = self._batch()
        for start in range(0, len(pids), step):
            with calls("get"):
                got = col.get(ids=pids[start:start + step],
                              include=["embeddings", "documents", "metadatas"])
            for i, pid in enumerate(got["ids"]):
                out[pid] = (got["embeddings"][i], got["documents"][i], got["metadatas"][i])
        return out

    def _undo(self, col: Any, pids: list[str], before: dict[str, tuple[Any, Any, Any]]
              ) -> None:
        try:
            self._delete(col, [p for p in pids if p not in before])
            old = [p for p in pids if p in before]
            step = self._batch()
            for start in range(0, len(old), step):
                part = old[start:start + step]
                self._write(col, part, np.stack([before[p][0] for p in part]),
                            [before[p][1] for p in part], [before[p][2] for p in part])
        except Exception as exc:  # the original error is the one to report
            log.error("chroma: undoing a partly written batch failed: %s", type(exc).__name__)

    def delete_ids(self, key: str, tenant: str, ids: list[str]) -> int:
        col = self._col(key, tenant)
        if col is None or not ids:
            return 0
        pids = [point_id(tenant, i) for i in dict.fromkeys(ids)]
        found: list[str] = []
        step = self._batch()
        for start in range(0, len(pids), step):
            with calls("get"):
                found += col.get(ids=pids[start:start + step], include=[])["ids"]
        self._delete(col, found)
        return len(found)

    def _delete(self, col: Any, pids: list[str]) -> None:
        step = self._batch()
        for start in range(0, len(pids), step):
            with calls("delete"):
                col.delete(ids=pids[start:start + step])

    def delete_where(self, key: str, tenant: str, where: Node | None) -> int:
        col = self._col(key, tenant)
        if col is None:
            return 0
        pids = self._ids(col, where)
        self._delete(col, pids)
        return len(pids)

    # -- reads ---------------------------------------------------------------------
    def _ids(self, col: Any, where: Node | None) -> list[str]:
        """Every matching id, in Chroma's (stable) order."""
        with calls("get"):
            return list(col.get(where=where_of(where), include=[])["ids"])

    @staticmethod
    def _record(meta: Any, text: Any, emb: Any = None) -> Record:
        tenant, doc_id, metadata = decode(meta)
        vec = None if emb is None else np.asarray(emb, dtype=np.float32)
        return Record(doc_id, text or "", metadata, vec, tenant)

    # -- reads: a scope of several tenants reads each one's collection and merges ---------
    def get(
        self, key: str, tenant: TenantScope, ids: list[str], with_vectors: bool = False
    ) -> list[Record]:
        tenants = tenants_of(tenant)
        if len(tenants) == 1:
            return self._get(key, tenants[0], ids, with_vectors)
        found = [r for t in tenants for r in self._get(key, t, ids, with_vectors)]
        return first_by_id(found, ids, tenant)

    def count(self, key: str, tenant: TenantScope, where: Node | None) -> int:
        return sum(self._count(key, t, where) for t in tenants_of(tenant))

    def list_page(self, key: str, tenant: TenantScope, where: Node | None, limit: int,
                  offset: int) -> Page:
        """The tenants' pages one after the other (a scope's own records first)."""
        tenants = tenants_of(tenant)
        if len(tenants) == 1:
            return self._list_page(key, tenants[0], where, limit, offset)
        records: list[Record] = []
        total = 0
        for t in tenants:
            n = self._count(key, t, where)
            skip = max(0, offset - total)
            want = max(0, limit - len(records))
            if want and skip < n:
                records += self._list_page(key, t, where, want, skip).records
            total += n
        return Page(records, total)

    def distinct(self, key: str, tenant: TenantScope, field: str) -> list[Scalar]:
        values = {(type(v) is bool, v) for t in tenants_of(tenant)
                  for v in self._distinct(key, t, field)}
        return sorted((v for _, v in values), key=scalar_sort_key)

    def _get(self, key: str, tenant: str, ids: list[str], with_vectors: bool) -> list[Record]:
        col = self._col(key, tenant)
        if col is None or not ids:
            return []
        include = ["documents", "metadatas"] + (["embeddings"] if with_vectors else [])
        wanted = list(dict.fromkeys(ids))
        by_id: dict[str, Record] = {}
        step = self._batch()
        for start in range(0, len(wanted), step):
            part = [point_id(tenant, i) for i in wanted[start:start + step]]
            with calls("get"):
                got = col.get(ids=part, include=include)
            for i in range(len(got["ids"])):
                emb = got["embeddings"][i] if with_vectors else None
                r = self._record(got["metadatas"][i], got["documents"][i], emb)
                by_id[r.id] = r
        return [by_id[i] for i in wanted if i in by_id]

    def _count(self, key: str, tenant: str, where: Node | None) -> int:
        col = self._col(key, tenant)
        if col is None:
            return 0
        if where is None:
            with calls("count"):
                return int(col.count())
        return len(self._ids(col, where))

    def _list_page(self, key: str, tenant: str, where: Node | None, limit: int,
                   offset: int) -> Page:
        col = self._col(key, tenant)
        if col is None:
            return Page([], 0)
        total = self._count(key, tenant, where)
        if limit <= 0 or offset >= total:
            return Page([], total)
        with calls("get"):
            got = col.get(where=where_of(where), limit=limit, offset=offset,
                          include=["documents", "metadatas"])
        return Page([self._record(m, d) for m, d in zip(got["metadatas"], got["documents"],
                                                        strict=True)], total)

    def query_batch(self, key: str, queries: list[StoreQuery]) -> list[list[ScoredRecord]]:
        """Dense queries; those with the same tenant, filter, limit and vector flag go to
        Chroma as one multi-vector ``query`` call (same limit: Chroma's HNSW widens its
        search with ``n_results``, so only equal limits give results equal to single
        queries)."""
        for sq in queries:
            if sq.mode != SearchMode.DENSE:
                raise InvalidInput(
                    f"Search mode '{sq.mode.value}' needs BM25 (capability 'hybrid'), which the "
                    "chroma store does not have; use mode 'dense'")
            if sq.vector is None:
                raise InvalidInput("a dense query needs a vector")
        out: list[list[ScoredRecord]] = [[] for _ in queries]
        groups: dict[tuple[Any, ...], list[int]] = {}
        for i, sq in enumerate(queries):
            groups.setdefault((sq.tenant, sq.where, sq.limit, sq.with_vectors), []).append(i)
        for (scope, where, limit, with_vectors), slots in groups.items():
            include = ["documents", "metadatas", "distances"]
            if with_vectors:
                include.append("embeddings")
            vecs = np.stack([np.asarray(queries[i].vector, dtype=np.float32) for i in slots])
            for tenant in tenants_of(scope):  # several: each collection's best, merged
                col = self._col(key, tenant)
                if col is None:
                    continue
                with calls("query"):
                    got = col.query(query_embeddings=vecs, n_results=limit,
                                    where=where_of(where), include=include)
                for j, i in enumerate(slots):
                    hits = out[i] + self._scored(got, j, with_vectors,
                                                 queries[i].score_threshold)
                    out[i] = sorted(hits, key=lambda h: -h.score)[:limit]
        return out

    def _scored(self, got: dict[str, Any], j: int, with_vectors: bool,
                threshold: float | None) -> list[ScoredRecord]:
        hits = []
        for k in range(len(got["ids"][j])):
            # Chroma's cosine distance is 1 - cosine similarity; ragline scores are the
            # similarity itself (-1..1), as in the Qdrant Edge store
            score = 1.0 - float(got["distances"][j][k])
            if threshold is not None and score < threshold:
                break
            emb = got["embeddings"][j][k] if with_vectors else None
            r = self._record(got["metadatas"][j][k], got["documents"][j][k], emb)
            hits.append(ScoredRecord(r.id, r.text, r.metadata, score, r.embedding, r.tenant))
        return hits

    def has_text_index(self, key: str) -> bool:
        return False  # Chroma has no BM25 index

    def _distinct(self, key: str, tenant: str, field: str) -> list[Scalar]:
        col = self._col(key, tenant)
        if col is None:
            return []
        values: set[tuple[bool, Any]] = set()
        offset = 0
        while True:
            with calls("get"):
                got = col.get(limit=SCAN_PAGE, offset=offset, include=["metadatas"])
            for meta in got["metadatas"]:
                v = decode(meta)[2].get(field)
                for x in v if isinstance(v, list) else [v]:
                    if x is not None:
                        values.add((type(x) is bool, x))
            if len(got["ids"]) < SCAN_PAGE:
                break
            offset += SCAN_PAGE
        return sorted((x for _, x in values), key=scalar_sort_key)

    # -- housekeeping --------------------------------------------------------------
    def size_bytes(self, key: str) -> int:
        """The shard's tenant collections (see :func:`size_of`)."""
        marker = self._lookup(key, None)
        if marker is None:
            return 0
        prefix = self._name(key) + "."
        return size_of(self._client, self.config,
                       [n for n in self._collections() if n.startswith(prefix)])

    def optimize(self, key: str) -> bool:
        return False  # Chroma maintains its index itself

    @classmethod
    def connection_schema(cls) -> dict[str, Any]:
        return config_schema(ChromaConfig)

    def capabilities(self) -> list[str]:
        return list(self.CAPABILITIES)

    def health(self) -> Health:
        return health_of(self._client, self.config, self.shard_keys)
