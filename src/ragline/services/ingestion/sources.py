"""Ingested sources as first-class objects, and deletes that keep ingestion state true.

A *source* is one thing ingestion wrote: a file of a directory tree, an upload, a
text or a URL. Its row in the catalog (``ingest_sources``) records the SHA-256 of
its bytes and its chunk ids; its chunks live in the store. The two must never
disagree in the one way that loses data silently: a row that says "unchanged"
while the store no longer holds the chunks (re-sending the file then answers
``unchanged`` and nothing brings the text back — issue 12).

So every delete that can touch ingested chunks — the generic documents delete,
a tenant emptying a collection, deleting a source — runs in three steps under
the (collection, tenant) write lock that ingestion writes take too:

1. **mark**: the rows of the sources it touches become ``modified``, which is
   never "unchanged" (the next run or re-upload writes the source again);
2. **delete** the chunks in the store;
3. **settle**: each row lists the chunks it has left; a row with none left is
   dropped (re-ingesting the file writes it as new).

A crash after step 1 leaves ``modified`` rows whose chunks may or may not be
gone: both are safe (a rewrite restores the chunks), and ``ragline verify
--repair`` settles them without a rewrite.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ragline.catalog.ingest_state import SourceState
from ragline.catalog.tables import SourceStates
from ragline.core.filters import Node
from ragline.core.tenancy import SHARED, TenantScope, tenants_of
from ragline.core.types import CollectionInfo
from ragline.errors import SourceNotFound
from ragline.providers.stores.base import VectorStore
from ragline.services.corpus.collections import CollectionService
from ragline.services.corpus.documents import DocumentService
from ragline.services.ingestion.ingest import IngestService

PAGE = 1000


def origin_kind(origin: str) -> str:
    """``directory``, ``upload``, ``text`` or ``url`` (the stored origin names the
    directory's absolute path, which network callers are not shown)."""
    return "directory" if origin.startswith("dir:") else origin


@dataclass(frozen=True)
class SourceInfo:
    """A source as a caller sees it."""

    source_id: str
    origin: str
    source_path: str
    source_hash: str | None
    state: str
    chunk_count: int
    created_at: str
    updated_at: str
    root: str | None = None  # the directory it was read from (local callers only)
    shared: bool = False  # of the shared corpus (tenant '*'): read-only to user keys


@dataclass(frozen=True)
class SourceDetail(SourceInfo):
    """One source with its chunk ids and what the store holds of them."""

    chunk_ids: list[str] = field(default_factory=list)
    chunks_in_store: int = 0
    title: str | None = None


def _info(s: SourceState, local: bool, tenant: str = "") -> SourceInfo:
    root = s.origin[len("dir:"):] if local and s.origin.startswith("dir:") else None
    return SourceInfo(s.source_id, origin_kind(s.origin), s.source_path, s.source_hash,
                      s.state, len(s.chunk_ids), s.created_at, s.updated_at, root,
                      tenant == SHARED)


class SourceService:
    def __init__(self, collections: CollectionService, store: VectorStore, state: SourceStates,
                 documents: DocumentService, ingest: IngestService) -> None:
        self.collections = collections
        self.store = store
        self.state = state
        self.documents = documents
        self.ingest = ingest

    def _shard(self, collection: str) -> CollectionInfo:
        return self.collections.get(collection)

    # -- reads -------------------------------------------------------------------------
    def page(self, collection: str, tenant: TenantScope, limit: int, offset: int,
             local: bool = False) -> tuple[list[SourceInfo], int]:
        """The sources of the scope's tenants, one tenant's after the other (the caller's
        own first, then the shared corpus's), each tenant's ordered by id."""
        info = self._shard(collection)
        out: list[SourceInfo] = []
        total = 0
        for t in tenants_of(tenant):
            skip, want = max(0, offset - total), max(0, limit - len(out))
            rows, n = self.state.page(info.name, info.shard, t, want, skip)
            out += [_info(r, local, t) for r in rows]
            total += n
        return out, total

    def get(self, collection: str, tenant: TenantScope, source_id: str,
            local: bool = False) -> SourceDetail:
        """The source ``source_id`` of the first of the scope's tenants that has one."""
        info = self._shard(collection)
        found = ((t, self.state.source(info.name, info.shard, t, source_id))
                 for t in tenants_of(tenant))
        owner, row = next(((t, r) for t, r in found if r is not None), ("", None))
        if row is None:
            raise SourceNotFound(f"Source '{source_id}' not found in collection "
                                 f"'{collection}'")
        present = self._present(info, owner, row.chunk_ids)
        title = None
        if present:
            first = self.store.get(info.shard, owner, present[:1])
            raw = first[0].metadata.get("title") if first else None
            title = raw if isinstance(raw, str) else None
        base = _info(row, local, owner)
        return SourceDetail(**{k: getattr(base, k) for k in SourceInfo.__dataclass_fields__},
                            chunk_ids=list(row.chunk_ids), chunks_in_store=len(present),
                            title=title)

    def _present(self, info: CollectionInfo, tenant: str, ids: list[str]) -> list[str]:
        """Which of ``ids`` the store holds, in their order."""
        if not ids or info.dimension is None or not self.store.has_shard(info.shard):
            return []
        found: set[str] = set()
        for start in range(0, len(ids), PAGE):
            found.update(r.id for r in self.store.get(info.shard, tenant,
                                                      ids[start:start + PAGE]))
        return [i for i in ids if i in found]

    # -- deletes -----------------------------------------------------------------------
    def delete(self, collection: str, tenant: str, source_id: str) -> int:
        """One source's chunks and its state, together (see the module docstring)."""
        self._shard(collection)
        return self.ingest.delete_source(collection, tenant, source_id)

    def delete_documents(self, collection: str, tenant: str, ids: list[str] | None,
                         where: Node | None) -> int:
        """The generic documents delete, keeping the state of the sources it touches."""
        info = self._shard(collection)
        if info.dimension is None or not self.store.has_shard(info.shard):
            return self.documents.delete(collection, tenant, ids, where)
        with self.state.writing(info.name, tenant):
            info = self._shard(collection)  # the shard an empty may have swapped
            if not self.state.any(info.name, info.shard, tenant):  # nothing ingested here
                return self.documents.delete(collection, tenant, ids, where)
            touched = self._touched(info, tenant, ids, where)
            before = self.state.some(info.name, info.shard, tenant, touched)
            if not before:  # no ingested source involved: nothing to keep in step
                return self.documents.delete(collection, tenant, ids, where)
            self.state.mark_modified(info.name, info.shard, tenant, sorted(before))
            n = self.documents.delete(collection, tenant, ids, where)
            self._settle(info, tenant, before)
        return n

    def delete_all(self, collection: str, tenant: str) -> int:
        """Every document of one tenant (a user emptying a collection), and its state."""
        info = self._shard(collection)
        with self.state.writing(info.name, tenant):
            info = self._shard(collection)
            sids = list(self.state.sources(info.name, info.shard, tenant))
            self.state.mark_modified(info.name, info.shard, tenant, sids)
            n = self.documents.delete_all(collection, tenant)
            self.state.drop_tenant(info.name, info.shard, tenant)
        return n

    def forget_stale(self) -> int:
        """Rows of shards no collection points at any more (after an admin empty or a
        collection delete); they were harmless, now they are gone."""
        return self.state.purge_stale({c.name: c.shard for c in self.collections.all()})

    def _touched(self, info: CollectionInfo, tenant: str, ids: list[str] | None,
                 where: Node | None) -> set[str]:
        """Source ids of the ingested chunks a delete may remove (a superset is fine)."""
        sids: set[str] = set()
        if ids is not None:
            if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
                return sids  # the delete itself answers the 400
            for start in range(0, len(ids), PAGE):
                for rec in self.store.get(info.shard, tenant, ids[start:start + PAGE]):
                    _add_parent(sids, rec.metadata)
            return sids
        offset = 0
        while True:
            page = self.store.list_page(info.shard, tenant, where, PAGE, offset)
            for rec in page.records:
                _add_parent(sids, rec.metadata)
            offset += len(page.records)
            if not page.records or offset >= page.total:
                return sids

    def _settle(self, info: CollectionInfo, tenant: str,
                before: dict[str, SourceState]) -> None:
        remaining: dict[str, list[str]] = {}
        untouched: list[SourceState] = []
        for sid, old in before.items():
            left = self._present(info, tenant, old.chunk_ids)
            if left == old.chunk_ids and old.status != "modified":
                untouched.append(old)  # the delete took none of its chunks after all
            else:
                remaining[sid] = left
        self.state.settle(info.name, info.shard, tenant, remaining)
        if untouched:
            self.state.unmark(info.name, info.shard, tenant,
                              [s.source_id for s in untouched])


def _add_parent(sids: set[str], metadata: Mapping[str, object]) -> None:
    parent = metadata.get("parent_doc_id")
    if isinstance(parent, str):
        sids.add(parent)


def root_exists(origin: str) -> bool | None:
    """Whether a directory source's root is still there (None: not a directory source)."""
    if not origin.startswith("dir:"):
        return None
    return Path(origin[len("dir:"):]).is_dir()
