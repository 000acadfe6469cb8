"""The search door (``rl.search``): the one search pipeline, reading around a hit
(context, lesson) and ``/rerank``."""

from __future__ import annotations

import logging
from typing import Any

from ragline.core.principal import Principal
from ragline.doors.base import Door
from ragline.errors import ModelNotLoaded, RaglineError, RerankError
from ragline.services.search.searching import SearchRequest, SearchResponse
from ragline.settings import Settings
from ragline.wiring import Services, SyncBridge

# the logger the use case logged to before the doors (operators filter on it)
log = logging.getLogger("ragline.facade")

RERANKER_NOT_LOADED = "Cross-encoder not loaded. Start server with --cross-encoder flag."


class SearchDoor(Door):
    def __init__(self, services: Services, settings: Settings, bridge: SyncBridge) -> None:
        super().__init__(services, settings)
        self._bridge = bridge

    async def query(self, caller: Principal, request: SearchRequest) -> SearchResponse:
        """``POST /search``, the chat retriever and the library's ``find_similar``: one
        pipeline, in the collections and records the caller may read."""
        name = self._existing(request.collection)  # the one time
        self._access.collection(caller, name)
        return await self._sv.search.search(self._access.read_scope(caller), name, request)

    def query_sync(self, caller: Principal, request: SearchRequest) -> SearchResponse:
        """:meth:`query` for synchronous callers: the same pipeline on the root's loop."""
        return self._bridge.call(self.query, caller, request)

    def context(self, caller: Principal, chunk_id: str, collection: str | None = None,
                window: int | None = None) -> dict[str, Any]:
        """Without ``collection``, the collection the caller may read that holds the chunk
        (spec 004 names none; 400 naming ``collection`` when several do)."""
        if collection is None:
            collection = self._sv.context.holder(
                self._access.read_scope(caller), chunk_id,
                lambda c: self._access.may_use(caller, c))
        name = self._existing(collection)
        self._access.collection(caller, name)
        return self._sv.context.context(self._access.read_scope(caller), chunk_id, name,
                                        window)

    def lesson(self, caller: Principal, parent_doc_id: str,
               collection: str | None = None) -> dict[str, Any]:
        name = self._existing(collection)
        self._access.collection(caller, name)
        return self._sv.context.lesson(self._access.read_scope(caller), parent_doc_id, name)

    def rerank(self, caller: Principal, query: str, documents: list[dict[str, Any]],
               top_k: int | None = None) -> list[Any]:
        """Any caller may rerank the documents it sends (they are not read from a
        collection)."""
        if not documents:  # spec 000: 200 {"reranked": []}, with or without a model
            return []
        reranker = self._sv.reranker()
        if reranker is None:
            raise ModelNotLoaded(RERANKER_NOT_LOADED)
        try:
            return list(reranker.rerank(query, documents, top_k))
        except RaglineError:
            raise
        except Exception as exc:  # a plugin reranker that does not wrap its own errors
            log.exception("rerank failed")
            # spec 000: the message includes the exception's details
            raise RerankError(f"Reranking failed: {type(exc).__name__}: {exc}") from exc
