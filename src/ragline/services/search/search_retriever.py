"""The :class:`~ragline.services.search.rag_context.Retriever` the answer services use in
production: main's search use case (:class:`~ragline.services.search.searching.SearchService`,
the same pipeline as ``POST /search`` and ``rl.search.query``: one default-collection
rule, filter limits, hybrid by default, boosts, tenant filter) plus the per-turn
query-embedding cache and the relevance scale.

The query is embedded here, once per ``connectionId:model`` per turn
(:class:`TurnEmbeddings`), and handed to the search as a pre-computed vector with
the text, so hybrid search still runs BM25 on the text; each hit keeps the
relevance the search gave it (``0.5 + cosine/2``, :mod:`ragline.core.relevance`),
whatever ranked it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio.to_thread
import numpy as np

from ragline.core.tenancy import TenantScope
from ragline.core.types import Vector
from ragline.services.corpus.collections import CollectionService
from ragline.services.corpus.embedders import EmbedderPool
from ragline.services.search.rag_context import Hit, TurnEmbeddings
from ragline.services.search.searching import SearchRequest, SearchService


class SearchRetriever:
    """Every call carries the tenant; the facade checks the caller may use the collection
    before a turn starts, the search pipeline filters the store by the tenant."""

    def __init__(self, search: SearchService, collections: CollectionService,
                 embedders: EmbedderPool) -> None:
        self.search = search
        self.collections = collections
        self.embedders = embedders

    async def embed_query(self, collection: str, text: str,
                          embeddings: TurnEmbeddings | None) -> Vector | None:
        """The query vector with the collection's server-side embedder (``embed``), or
        ``None`` for a collection that stores pre-computed embeddings only."""
        info = self.collections.get(collection)
        if not info.dimension or not self.embedders.known(info.embedding_provider):
            return None
        assert info.embedding_provider is not None
        batcher = self.embedders.loaded_batcher(info.embedding_provider, info.embedding_model)
        if batcher is None:  # first use loads the model: off the event loop
            batcher = await anyio.to_thread.run_sync(
                self.embedders.batcher, info.embedding_provider, info.embedding_model)
        emb = self.embedders.get(info.embedding_provider, info.embedding_model)
        key = emb.cache_key
        if embeddings is not None:
            cached = embeddings.get(key, text)
            if cached is not None:
                return cached
        vec = np.asarray(await batcher.embed_one(text, "query"), dtype=np.float32)
        if embeddings is not None:
            embeddings.put(key, text, vec)
        return vec

    async def __call__(self, tenant: TenantScope, collection: str, query: str, *, limit: int,
                       where: dict[str, Any] | None = None, candidates: int = 100,
                       boost: dict[str, Any] | None = None,
                       embeddings: TurnEmbeddings | None = None) -> list[Hit]:
        vec = await self.embed_query(collection, query, embeddings)
        req = SearchRequest(collection=collection, query=query,
                            embedding=None if vec is None else vec.tolist(), where=where,
                            limit=limit, candidates=candidates, boost=boost)
        result = await self.search.search(tenant, collection, req)
        # the relevance the search gave each hit: chat and search agree on every hit
        return [Hit(h.id, h.text, h.metadata, h.score, h.relevance, collection)
                for h in result.hits]


class ScopedRetriever:
    """A retriever bound to one caller's collection rule: ``check(collection)`` raises
    (``CollectionNotFound``) for a collection the caller may not use, so neither a
    conversation's stored collection nor one a tool names can reach around the facade's
    access check. ``scope``: the tenants the caller reads (its own and the shared corpus,
    from the access policy); every search runs on it, whatever tenant a turn names."""

    def __init__(self, inner: SearchRetriever, check: Callable[[str], object],
                 scope: TenantScope) -> None:
        self.inner = inner
        self.check = check
        self.scope = scope

    async def __call__(self, tenant: TenantScope, collection: str, query: str, *, limit: int,
                       where: dict[str, Any] | None = None, candidates: int = 100,
                       boost: dict[str, Any] | None = None,
                       embeddings: TurnEmbeddings | None = None) -> list[Hit]:
        self.check(collection)
        return await self.inner(self.scope, collection, query, limit=limit, where=where,
                                candidates=candidates, boost=boost, embeddings=embeddings)
