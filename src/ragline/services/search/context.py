"""Context around a hit: ``/context/{chunk_id}`` (neighbours) and ``/lesson/{id}`` (a whole
source), scoped to the caller's tenant like every other read."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ragline.catalog.tables import SourceStates
from ragline.core.tenancy import TenantScope, tenants_of
from ragline.core.types import CollectionInfo
from ragline.errors import InvalidInput, RaglineError
from ragline.providers.stores.base import VectorStore
from ragline.services.corpus.collections import CollectionService
from ragline.services.search.expand import get_context, get_lesson
from ragline.services.search.searching import SearchService


class ContextService:
    def __init__(self, collections: CollectionService, store: VectorStore,
                 state: SourceStates, search: SearchService) -> None:
        self.collections = collections
        self.store = store
        self.state = state
        self.search = search

    def context(self, tenant: TenantScope, chunk_id: str, collection: str | None,
                window: int | None) -> dict[str, Any]:
        info = self.collections.get(self.search.existing_default(collection))
        return get_context(self.store, info, tenant, chunk_id, window)

    def holder(self, tenant: TenantScope, chunk_id: str,
               visible: Callable[[CollectionInfo], bool]) -> str | None:
        """The collection holding ``chunk_id`` for ``tenant`` among those ``visible`` to the
        caller (spec 004's ``/context/{id}`` names no collection): the default collection
        when it holds it, else the only other one that does; None when none does (the
        default collection's 404 follows); 400 naming ``collection`` when several do."""
        default = self.search.collection_name(None)
        infos = [c for c in self.collections.all() if c.dimension and visible(c)]
        infos.sort(key=lambda c: c.name != default)
        found: list[str] = []
        for info in infos:
            try:
                hit = self.store.get(info.shard, tenant, [chunk_id])
            except RaglineError:  # dropped while we looked
                continue
            if hit:
                if info.name == default:
                    return default
                found.append(info.name)
        if len(found) > 1:
            raise InvalidInput(f"Chunk '{chunk_id}' is in several collections "
                               f"({', '.join(sorted(found))}): pass the 'collection' "
                               "query parameter", details={"collections": sorted(found)})
        return found[0] if found else None

    def lesson(self, tenant: TenantScope, parent_doc_id: str,
               collection: str | None) -> dict[str, Any]:
        """The source ``parent_doc_id`` whole: of the first of the scope's tenants that
        ingested one (the caller's own before the shared corpus's)."""
        info = self.collections.get(self.search.existing_default(collection))
        for t in tenants_of(tenant):
            state = self.state.source(info.name, info.shard, t, parent_doc_id)
            if state is not None:
                return get_lesson(self.store, info, t, parent_doc_id,
                                  state.chunk_ids if state.source_hash else None)
        return get_lesson(self.store, info, tenant, parent_doc_id, None)
