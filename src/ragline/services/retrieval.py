"""Search: dense, sparse (BM25) or hybrid (DBSF or RRF fusion), then optional cross-encoder
reranking and metadata boosts, with filters and thresholds.

There is one pipeline, async: queries are embedded through the micro-batcher
and store queries go through a second coalescer (concurrent requests' searches
on one shard leave as one ``query_batch`` call). Synchronous callers (CLI,
evaluation) run the same coroutine on the facade's own loop
(``Ragline.search_sync``), so every entry point ranks identically.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio.to_thread
import numpy as np

from ragline.core.coalesce import Coalescer
from ragline.core.filters import Node
from ragline.core.types import CollectionInfo, ScoredRecord, SearchMode, StoreQuery
from ragline.core.types import Fusion as FusionKind
from ragline.errors import InvalidInput
from ragline.observability import metrics
from ragline.providers.stores.base import VectorStore
from ragline.services.boosts import BoostConfig, apply_boosts, merge_boost_config
from ragline.services.collections import CollectionService
from ragline.services.embedders import EmbedderPool
from ragline.services.validation import (
    InputLimits,
    check_dimension,
    check_query_size,
    check_vector,
)

Mode = Literal["dense", "sparse", "hybrid"]
Fusion = Literal["rrf", "dbsf"]


@dataclass
class SearchQuery:
    collection: str
    tenant: str
    query: str | None = None
    embedding: Any = None
    mode: Mode | None = None
    where: Node | None = None
    limit: int = 10
    score_threshold: float | None = None
    include_embeddings: bool = False
    rrf_k: int | None = None
    candidates: int | None = None
    fusion: Fusion | None = None
    rerank: bool = False
    rerank_candidates: int = 50
    boost: dict[str, Any] | None = None


@dataclass
class BatchSettings:
    """How concurrent searches are coalesced into store batches (settings
    ``search_max_batch``, ``search_max_wait_ms``, ``search_workers``)."""

    max_batch: int = 32
    max_wait_ms: float = 0.0
    workers: int = 2


@dataclass
class SearchResult:
    hits: list[ScoredRecord]
    mode: Mode
    took_ms: float
    stages: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass
class _Plan:
    info: CollectionInfo
    mode: Mode
    vector: np.ndarray | None
    needs_embedding: bool
    stages: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    boost: BoostConfig | None = None  # collection and request boosts, merged once


class RetrievalService:
    def __init__(self, collections: CollectionService, store: VectorStore,
                 embedders: EmbedderPool, rrf_k: int, candidates: int,
                 reranker: Callable[[], Any] = lambda: None, fusion: Fusion = "dbsf",
                 batch: BatchSettings | None = None) -> None:
        self.fusion = fusion
        self.limits = InputLimits()  # the facade sets the configured ones
        self.collections = collections
        self.store = store
        self.embedders = embedders
        self.rrf_k = rrf_k
        self.candidates = candidates
        self.reranker = reranker  # a getter: the server may load the model after start-up
        b = batch or BatchSettings()
        # Concurrent requests' store queries leave together, per shard (see _run_batch).
        self._store_batcher: Coalescer[str, StoreQuery, list[ScoredRecord]] = Coalescer(
            self._run_batch, max_batch=b.max_batch, max_wait_ms=b.max_wait_ms,
            workers=b.workers, name="search", on_batch=metrics.observe_batch)

    def batching_stats(self) -> dict[str, Any]:
        return self._store_batcher.stats()

    def close(self) -> None:
        self._store_batcher.close()

    def _plan(self, q: SearchQuery) -> _Plan:
        info = self.collections.get(q.collection)
        if not 1 <= q.limit <= 1000:
            raise InvalidInput("'limit' must be between 1 and 1000")
        check_query_size(q.query, self.limits)
        text = (q.query or "").strip()
        can_embed = self.embedders.known(info.embedding_provider)
        has_text = bool(info.dimension) and self.store.has_text_index(info.shard)
        vector = None
        if q.embedding is not None:
            vector = check_vector(q.embedding, "the query", self.limits.max_dimension)
            check_dimension(len(vector), info.dimension, "the query embedding", info.name)
        if q.embedding is None and not text:
            raise InvalidInput("Give 'query' (text) or 'embedding' (a vector) to search")
        mode: Mode
        if q.mode is not None:
            mode = q.mode
        elif text and has_text and (vector is not None or can_embed):
            mode = "hybrid"
        elif vector is not None or (text and can_embed):
            mode = "dense"
        else:
            mode = "sparse"
        if mode in ("sparse", "hybrid") and not text:
            raise InvalidInput(f"Mode '{mode}' needs a text 'query'")
        if mode in ("sparse", "hybrid") and not has_text and info.dimension:
            if "hybrid" not in self.store.capabilities():
                raise InvalidInput(
                    f"Mode '{mode}' needs BM25 (capability 'hybrid'), which the "
                    f"'{self.store.name}' store of collection '{info.name}' does not have; "
                    "use mode 'dense'")
            raise InvalidInput(f"Collection '{info.name}' has no text index for mode '{mode}'")
        needs_embedding = mode in ("dense", "hybrid") and vector is None
        if needs_embedding and not can_embed:
            raise InvalidInput(
                f"Collection '{info.name}' has no embedding provider, so a text query needs "
                "mode 'sparse' or a pre-computed 'embedding'"
            )
        if q.rerank and not text:
            raise InvalidInput("'rerank' needs a text 'query' to score documents against")
        if not 1 <= q.rerank_candidates <= 1000:
            raise InvalidInput("'rerank_candidates' must be between 1 and 1000")
        stage = f"{mode}:{q.fusion or self.fusion}" if mode == "hybrid" else mode
        return _Plan(info, mode, vector, needs_embedding, [stage],
                     boost=merge_boost_config(info.metadata, q.boost))

    def _first_stage(self, q: SearchQuery, plan: _Plan) -> StoreQuery:
        """The store query; deeper and without threshold when later stages follow."""
        later = (q.rerank and self.reranker() is not None) or plan.boost is not None
        depth = max(q.limit, q.rerank_candidates) if later else q.limit
        text = (q.query or "").strip()
        return StoreQuery(
            q.tenant, SearchMode(plan.mode), depth, vector=plan.vector, text=text, where=q.where,
            with_vectors=q.include_embeddings,
            score_threshold=None if later or plan.mode != "dense" else q.score_threshold,
            rrf_k=q.rrf_k or self.rrf_k, candidates=q.candidates or self.candidates,
            fusion=FusionKind(q.fusion or self.fusion))

    def _run_batch(self, key: str, queries: list[StoreQuery]) -> list[Any]:
        """One store call for queries coalesced from concurrent requests. If it fails,
        each query runs alone, so one request's error is not every request's."""
        try:
            with metrics.STORE_QUERY_SECONDS.labels("query_batch").time():
                return list(self.store.query_batch(key, queries))
        except Exception:
            if len(queries) == 1:
                raise
        out: list[Any] = []
        for sq in queries:
            try:
                out.append(self.store.query_batch(key, [sq])[0])
            except Exception as exc:
                out.append(exc)
        return out

    def _later_stages(self, q: SearchQuery, plan: _Plan,
                      hits: list[ScoredRecord]) -> list[ScoredRecord]:
        """Rerank and boost (when asked), then the limit and the score threshold."""
        boost = plan.boost
        reranker = self.reranker() if q.rerank else None
        if q.rerank and reranker is None:
            plan.warnings.append("rerank skipped: no cross-encoder loaded (start the server "
                                 "with --cross-encoder)")
        text = (q.query or "").strip()
        if reranker is not None and hits:
            ranked = reranker.rerank(text, [{"id": i, "text": h.text} for i, h in enumerate(hits)])
            if all("score" in r for r in ranked):
                hits = [_rescore(hits[r["id"]], r["score"]) for r in ranked]
                plan.stages.append("rerank")
            else:  # a reranker that degrades (ragline-remote) gave the documents back as sent
                plan.warnings.append("rerank skipped: the reranker is unavailable (see the "
                                     "server log); results keep their first-stage order")
        if boost is not None and hits:
            rows = [{"i": i, "score": h.score, "metadata": h.metadata} for i, h in enumerate(hits)]
            hits = [_rescore(hits[r["i"]], r["score"]) for r in apply_boosts(rows, boost)]
            plan.stages.append("boost")
        hits = hits[: q.limit]
        if q.score_threshold is not None:
            hits = [h for h in hits if h.score >= q.score_threshold]
        return hits

    def _vector_dim_check(self, plan: _Plan, vec: np.ndarray) -> np.ndarray:
        check_dimension(len(vec), plan.info.dimension, "the query embedding", plan.info.name)
        return vec

    async def search(self, q: SearchQuery) -> SearchResult:
        t0 = time.perf_counter()
        plan = self._plan(q)  # sub-millisecond catalog lookups: not worth a thread hop
        if plan.needs_embedding:
            info = plan.info
            assert info.embedding_provider is not None
            text = q.query or ""
            batcher = self.embedders.loaded_batcher(info.embedding_provider,
                                                    info.embedding_model)
            if batcher is None:  # first use: loading the model takes a while
                batcher = await anyio.to_thread.run_sync(
                    self.embedders.batcher, info.embedding_provider, info.embedding_model)
            vec = await batcher.embed_one(text, "query")  # cache hits return at once
            plan.vector = self._vector_dim_check(plan, np.asarray(vec, dtype=np.float32))
        hits: list[ScoredRecord] = []
        if plan.info.dimension:
            hits = await self._store_batcher.submit(plan.info.shard, self._first_stage(q, plan))
        if q.rerank:  # a model call: off the event loop
            hits = await anyio.to_thread.run_sync(self._later_stages, q, plan, hits)
        else:
            hits = self._later_stages(q, plan, hits)
        return SearchResult(hits, plan.mode, (time.perf_counter() - t0) * 1000, plan.stages,
                            plan.warnings)


def _rescore(hit: ScoredRecord, score: float) -> ScoredRecord:
    return ScoredRecord(hit.id, hit.text, hit.metadata, float(score), hit.embedding)
