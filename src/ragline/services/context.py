"""Context around a hit: ``/context/{chunk_id}`` (neighbours) and ``/lesson/{id}`` (a whole
source), scoped to the caller's tenant like every other read."""

from __future__ import annotations

from typing import Any

from ragline.catalog.tables import SourceStates
from ragline.providers.stores.base import VectorStore
from ragline.services.collections import CollectionService
from ragline.services.expand import get_context, get_lesson
from ragline.services.searching import SearchService


class ContextService:
    def __init__(self, collections: CollectionService, store: VectorStore,
                 state: SourceStates, search: SearchService) -> None:
        self.collections = collections
        self.store = store
        self.state = state
        self.search = search

    def context(self, tenant: str, chunk_id: str, collection: str | None,
                window: int | None) -> dict[str, Any]:
        info = self.collections.get(self.search.existing_default(collection))
        return get_context(self.store, info, tenant, chunk_id, window)

    def lesson(self, tenant: str, parent_doc_id: str, collection: str | None) -> dict[str, Any]:
        info = self.collections.get(self.search.existing_default(collection))
        state = self.state.source(info.name, info.shard, tenant, parent_doc_id)
        return get_lesson(self.store, info, tenant, parent_doc_id,
                          state.chunk_ids if state and state.source_hash else None)
