"""The :class:`~ragline.services.rag_context.Retriever` the answer services use in
production: the search use case (hybrid by default, boosts, tenant filter) plus the
per-turn query-embedding cache and the relevance scale.

The query is embedded here, once per ``connectionId:model`` per turn
(:class:`TurnEmbeddings`), and handed to the search as a pre-computed vector with
the text, so hybrid search still runs BM25 on the text; hits come back with their
embeddings so their relevance (``0.5 + cosine/2``) can be computed whatever ranked
them.
"""

from __future__ import annotations

from typing import Any

import anyio.to_thread
import numpy as np

from ragline.core.filters import Limits, parse_where
from ragline.core.types import Vector
from ragline.services.collections import CollectionService
from ragline.services.embedders import EmbedderPool
from ragline.services.rag_context import Hit, TurnEmbeddings, relevance
from ragline.services.retrieval import RetrievalService, SearchQuery


class SearchRetriever:
    """``blocking=True`` runs the sync search path inside the coroutine: for the library
    API, which drives a turn with ``asyncio.run`` outside the server's event loop."""

    def __init__(self, retrieval: RetrievalService, collections: CollectionService,
                 embedders: EmbedderPool, limits: Limits, *, blocking: bool = False) -> None:
        self.blocking = blocking
        self.retrieval = retrieval
        self.collections = collections
        self.embedders = embedders
        self.limits = limits

    async def embed_query(self, collection: str, text: str,
                          embeddings: TurnEmbeddings | None) -> Vector | None:
        info = self.collections.get(collection)
        if not info.dimension or not self.embedders.known(info.embedding_provider):
            return None
        assert info.embedding_provider is not None
        batcher = self.embedders.loaded_batcher(info.embedding_provider, info.embedding_model)
        if batcher is None and not self.blocking:  # first use loads the model: off the loop
            batcher = await anyio.to_thread.run_sync(
                self.embedders.batcher, info.embedding_provider, info.embedding_model)
        emb = self.embedders.get(info.embedding_provider, info.embedding_model)
        key = f"{emb.connection_id}:{emb.model}"
        if embeddings is not None:
            cached = embeddings.get(key, text)
            if cached is not None:
                return cached
        if self.blocking or batcher is None:
            vec = np.asarray(emb.embed([text], "query")[0], dtype=np.float32)
        else:
            vec = np.asarray(await batcher.embed_one(text, "query"), dtype=np.float32)
        if embeddings is not None:
            embeddings.put(key, text, vec)
        return vec

    async def __call__(self, tenant: str, collection: str, query: str, *, limit: int,
                       where: dict[str, Any] | None = None, candidates: int = 100,
                       boost: dict[str, Any] | None = None,
                       embeddings: TurnEmbeddings | None = None) -> list[Hit]:
        vec = await self.embed_query(collection, query, embeddings)
        q = SearchQuery(collection=collection, tenant=tenant, query=query,
                        embedding=None if vec is None else vec.tolist(),
                        where=parse_where(where, self.limits), limit=limit,
                        candidates=candidates, include_embeddings=vec is not None,
                        boost=boost)
        result = (self.retrieval.search_sync(q) if self.blocking
                  else await self.retrieval.search(q))
        return [Hit(h.id, h.text, h.metadata, h.score, relevance(vec, h.embedding), collection)
                for h in result.hits]
