"""Search: dense, sparse (BM25) or hybrid (DBSF or RRF fusion), then optional cross-encoder
reranking and metadata boosts, with filters and thresholds.

There is one pipeline, async: queries are embedded through the micro-batcher
and store queries go through a second coalescer (concurrent requests' searches
on one shard leave as one ``query_batch`` call). Synchronous callers (CLI,
evaluation) run the same coroutine on the facade's own loop
(``rl.search.query_sync``), so every entry point ranks identically.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread
import numpy as np

from ragline.core.coalesce import Coalescer
from ragline.core.relevance import passes
from ragline.core.relevance import relevance_of as relevance_of  # re-exported: the scale
from ragline.core.relevance import relevance_to as relevance_to
from ragline.core.search_request import Fusion, Mode, Overviews, SearchRequest, SearchTarget
from ragline.core.tenancy import SHARED
from ragline.core.types import CollectionInfo, ScoredRecord, SearchMode, StoreQuery
from ragline.core.types import Fusion as FusionKind
from ragline.errors import InvalidInput
from ragline.observability import metrics
from ragline.providers.rerankers.base import Reranker
from ragline.providers.stores.base import VectorStore
from ragline.services.corpus.collections import CollectionService
from ragline.services.corpus.embedders import EmbedderPool
from ragline.services.corpus.validation import (
    InputLimits,
    check_dimension,
    check_query_size,
    check_vector,
)
from ragline.services.search.boosts import BoostConfig, apply_boosts, merge_boost_config
from ragline.services.search.diversify import Diversity, group, mmr, overviews_yield


@dataclass
class BatchSettings:
    """How concurrent searches are coalesced into store batches (settings
    ``search_max_batch``, ``search_max_wait_ms``, ``search_workers``)."""

    max_batch: int = 32
    max_wait_ms: float = 0.0
    workers: int = 2


@dataclass
class SearchResult:
    """Ranked hits plus, by hit id: ``relevance`` (the one scale, see
    :mod:`ragline.core.relevance`), ``explain`` (per-leg raw scores, when asked) and
    ``groups`` (a grouped hit's companions from the same group, best first)."""

    hits: list[ScoredRecord]
    mode: Mode
    took_ms: float
    stages: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    relevance: dict[str, float] = field(default_factory=dict)
    explain: dict[str, dict[str, float | None]] = field(default_factory=dict)
    groups: dict[str, list[ScoredRecord]] = field(default_factory=dict)


@dataclass
class _Plan:
    info: CollectionInfo
    mode: Mode
    vector: np.ndarray | None
    needs_embedding: bool
    stages: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    boost: BoostConfig | None = None  # collection and request boosts, merged once
    overviews: bool = False
    explain: dict[str, dict[str, float | None]] = field(default_factory=dict)
    groups: dict[str, list[ScoredRecord]] = field(default_factory=dict)


class RetrievalService:
    def __init__(self, collections: CollectionService, store: VectorStore,
                 embedders: EmbedderPool, rrf_k: int, candidates: int,
                 reranker: Callable[[], Reranker | None] = lambda: None,
                 fusion: Fusion = "dbsf",
                 batch: BatchSettings | None = None, overviews: Overviews = "yield",
                 overview_window: int = 10, diversity: Diversity | None = None,
                 limits: InputLimits | None = None) -> None:
        self.fusion = fusion
        self.diversity = diversity if diversity is not None else Diversity(per_source=0)
        self.overviews = overviews
        self.overview_window = overview_window
        self.limits = limits or InputLimits()
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
            workers=b.workers, name="search", on_batch=metrics.observe_batch,
            isolate=lambda exc: True)

    def batching_stats(self) -> dict[str, Any]:
        return self._store_batcher.stats()

    def close(self) -> None:
        self._store_batcher.close()

    def _plan(self, q: SearchRequest, t: SearchTarget) -> _Plan:
        info = self.collections.get(t.collection)
        self.collections.require("search", "search")
        if t.where is not None:
            self.collections.require("metadata_filtering", "filter by metadata")
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
        if mode in ("dense", "hybrid") and vector is None and not can_embed:
            raise InvalidInput(
                f"Collection '{info.name}' has no embedding provider, so a text query needs "
                "mode 'sparse' or a pre-computed 'embedding'"
            )
        if q.rerank and not text:
            raise InvalidInput("'rerank' needs a text 'query' to score documents against")
        if not 1 <= q.rerank_candidates <= 1000:
            raise InvalidInput("'rerank_candidates' must be between 1 and 1000")
        self._check_shaping(q, info, vector is not None or can_embed)
        # sparse hits get a relevance too when the query can be embedded (one scale); a
        # caller who asks for none saves that embedding (most of a sparse search's cost)
        wanted = mode != "sparse" or q.relevance
        needs_embedding = (vector is None and can_embed and bool(text) and bool(info.dimension)
                           and wanted)
        stage = f"{mode}:{q.fusion or self.fusion}" if mode == "hybrid" else mode
        return _Plan(info, mode, vector, needs_embedding, [stage],
                     boost=merge_boost_config(info.metadata, q.boost),
                     overviews=(q.overviews or self.overviews) == "yield")

    @staticmethod
    def _check_shaping(q: SearchRequest, info: CollectionInfo, has_vectors: bool) -> None:
        if q.group_by is not None and not q.group_by.strip():
            raise InvalidInput("'group_by' must name a metadata field or be 'source'")
        if not 1 <= q.group_size <= 100:
            raise InvalidInput("'group_size' must be between 1 and 100")
        if q.mmr is not None:
            if not 0.0 <= q.mmr <= 1.0:
                raise InvalidInput("'mmr' (the weight of relevance against novelty) must be "
                                   "between 0 and 1")
            if not has_vectors:
                raise InvalidInput(f"'mmr' compares embeddings, and collection '{info.name}' "
                                   "has no embedding provider")
        if q.relevance_threshold is not None and not 0.0 <= q.relevance_threshold <= 1.0:
            raise InvalidInput("'relevance_threshold' must be between 0 and 1")
        if q.relevance_threshold is not None and not q.relevance:
            raise InvalidInput("'relevance_threshold' compares each hit's relevance, which "
                               "'relevance': false turns off; drop one of them")

    def _depth(self, q: SearchRequest, plan: _Plan) -> tuple[int, bool]:
        """How many candidates the first stage returns, and whether stages after it
        may reorder or drop them (then the store gets no threshold)."""
        depth, later = q.limit, False
        if (q.rerank and self.reranker() is not None) or plan.boost is not None:
            depth, later = max(depth, q.rerank_candidates), True
        if plan.overviews:
            depth, later = max(depth, self.overview_window), True
        if self._diversify(q):  # replacements for the hits over a window's quota
            depth, later = max(depth, min(1000, q.limit + 2 * self.diversity.window)), True
        if q.group_by or q.mmr is not None:  # enough candidates to fill ``limit`` groups
            depth = max(depth, min(1000, max(4 * q.limit * q.group_size, q.limit + 50)))
            later = True
        if q.relevance_threshold is not None:
            later = True
        return depth, later

    def _first_stage(self, q: SearchRequest, t: SearchTarget, plan: _Plan) -> StoreQuery:
        """The store query; deeper and without threshold when later stages follow.
        Vectors come back when relevance, explain (its dense leg), MMR or the caller
        needs them."""
        depth, later = self._depth(q, plan)
        text = (q.query or "").strip()
        mode = SearchMode(plan.mode)
        return StoreQuery(
            t.tenant, mode, depth, vector=None if mode == "sparse" else plan.vector,
            text=text, where=t.where,
            with_vectors=(q.include_embeddings or q.mmr is not None
                          or (plan.vector is not None and (q.relevance or q.explain))),
            score_threshold=None if later or plan.mode != "dense" else q.score_threshold,
            rrf_k=q.rrf_k or self.rrf_k, candidates=q.candidates or self.candidates,
            fusion=FusionKind(q.fusion or self.fusion))

    def _sparse_leg(self, q: SearchRequest, t: SearchTarget) -> StoreQuery:
        """The BM25 leg of a hybrid search alone, as deep as the fusion saw it, so
        ``explain`` can report each hit's raw BM25 (None: not among its candidates)."""
        return StoreQuery(t.tenant, SearchMode.SPARSE, q.candidates or self.candidates,
                          text=(q.query or "").strip(), where=t.where)

    def _run_batch(self, key: str, queries: list[StoreQuery]) -> list[Any]:
        """One store call for queries coalesced from concurrent requests. If it fails,
        the coalescer runs each query alone (``isolate``), so one request's error is
        not every request's."""
        with metrics.STORE_QUERY_SECONDS.labels("query_batch").time():
            return list(self.store.query_batch(key, queries))

    def _later_stages(self, q: SearchRequest, plan: _Plan,
                      hits: list[ScoredRecord]) -> list[ScoredRecord]:
        """Rerank and boost (when asked), the overview prior, the thresholds, then
        grouping or MMR and the limit."""
        boost = plan.boost
        reranker = self.reranker() if q.rerank else None
        if q.rerank and reranker is None:
            plan.warnings.append("rerank skipped: no cross-encoder loaded (start the server "
                                 "with --cross-encoder, setting cross_encoder_model)")
        text = (q.query or "").strip()
        if reranker is not None and hits:
            ranked: list[Any] = reranker.rerank(
                text, [{"id": i, "text": h.text} for i, h in enumerate(hits)])
            if all("score" in r for r in ranked):
                if q.explain:
                    for r in ranked:
                        plan.explain.setdefault(hits[r["id"]].id, {})["rerank"] = \
                            float(r["score"])
                hits = [_rescore(hits[r["id"]], r["score"]) for r in ranked]
                plan.stages.append("rerank")
            else:  # a reranker that degrades (ragline-remote) gave the documents back as sent
                plan.warnings.append("rerank skipped: the reranker is unavailable (see the "
                                     "server log); results keep their first-stage order")
        if boost is not None and hits:
            rows = [{"i": i, "score": h.score, "metadata": h.metadata} for i, h in enumerate(hits)]
            boosted = apply_boosts(rows, boost)
            if q.explain:
                for r in boosted:
                    plan.explain.setdefault(hits[r["i"]].id, {})["boost"] = float(r["boost"])
            hits = [_rescore(hits[r["i"]], r["score"]) for r in boosted]
            plan.stages.append("boost")
        if plan.overviews and hits:
            moved = overviews_yield(hits, self.overview_window)
            if [h.id for h in moved] != [h.id for h in hits]:
                plan.stages.append("overviews")
            hits = moved
        if self._diversify(q) and hits:
            shaped = self.diversity.apply(hits, overviews=plan.overviews, limit=q.limit)
            if [h.id for h in shaped] != [h.id for h in hits]:
                plan.stages.append("diversity")
            hits = shaped
        if q.score_threshold is not None:
            hits = [h for h in hits if h.score >= q.score_threshold]
        if q.relevance_threshold is not None:  # no embeddings, no relevance: never passes
            rel, least = relevance_to(plan.vector), q.relevance_threshold
            hits = [h for h in hits if passes(rel(h.embedding), least)]
        return self._shape(q, plan, hits)

    def _diversify(self, q: SearchRequest) -> bool:
        """Source diversity by default; a request that shapes its results itself
        (``group_by``, ``mmr``) gets exactly what it asked for."""
        return self.diversity.enabled and not q.group_by and q.mmr is None

    def _shape(self, q: SearchRequest, plan: _Plan, hits: list[ScoredRecord]) -> list[ScoredRecord]:
        """MMR over the candidates, then distinct groups, then the limit."""
        if q.mmr is not None and hits:
            with_vec = [h for h in hits if h.embedding is not None]
            if len(with_vec) < len(hits):
                plan.warnings.append("mmr skipped hits stored without an embedding")
            # grouped: order every candidate, so that enough groups remain
            pool = len(with_vec) if q.group_by else q.limit
            hits = mmr(with_vec, np.asarray([h.embedding for h in with_vec]), q.mmr,
                       min(pool, len(with_vec)))
            plan.stages.append(f"mmr:{q.mmr:g}")
        hits = self._in_score_order(plan, hits)
        if q.group_by:
            groups = group(hits, q.group_by, q.group_size, q.limit)
            plan.groups = {g.hits[0].id: g.hits[1:] for g in groups}
            plan.stages.append(f"group:{q.group_by}")
            return [g.hits[0] for g in groups]
        return hits[: q.limit]

    @staticmethod
    def _in_score_order(plan: _Plan, hits: list[ScoredRecord]) -> list[ScoredRecord]:
        """``score`` made the ordering score (issue 33): the overview prior and MMR move
        hits without rescoring them, so a hit placed below another gets at most that
        hit's score (never more than it had: thresholds and the top hit are unchanged).
        The number the stage ranked by stays in ``explain`` as ``own``."""
        out: list[ScoredRecord] = []
        ceiling = float("inf")
        for h in hits:
            if h.score > ceiling:
                plan.explain.setdefault(h.id, {})["own"] = h.score
                h = _rescore(h, ceiling)
            ceiling = h.score
            out.append(h)
        return out

    def _vector_dim_check(self, plan: _Plan, vec: np.ndarray) -> np.ndarray:
        check_dimension(len(vec), plan.info.dimension, "the query embedding", plan.info.name)
        return vec

    async def search(self, q: SearchRequest, t: SearchTarget) -> SearchResult:
        """Run ``q`` on ``t`` (the collection, tenants and parsed filter the door and the
        search use case resolved; ``q.collection`` and ``q.where`` are not read here)."""
        t0 = time.perf_counter()
        plan = self._plan(q, t)  # sub-millisecond catalog lookups: not worth a thread hop
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
            first = self._store_batcher.submit(plan.info.shard, self._first_stage(q, t, plan))
            if q.explain and plan.mode == "hybrid":
                leg = self._store_batcher.submit(plan.info.shard, self._sparse_leg(q, t))
                hits, sparse = await first, await leg
            else:
                hits, sparse = await first, []
            hits = own_first(hits)
            if q.explain:
                self._explain_first(plan, hits, sparse)
        # a model call, or MMR over many candidates (~40 ms for 1000): off the event loop
        if q.rerank or (q.mmr is not None and len(hits) > 200):
            hits = await anyio.to_thread.run_sync(self._later_stages, q, plan, hits)
        else:
            hits = self._later_stages(q, plan, hits)
        relevance: dict[str, float] = {}
        if q.relevance:
            rel = relevance_to(plan.vector)
            for h in [*hits, *(x for g in plan.groups.values() for x in g)]:
                if (r := rel(h.embedding)) is not None:
                    relevance[h.id] = r
        if not q.include_embeddings:  # fetched for relevance and MMR only
            hits = [_rescore(h, h.score, keep_vector=False) for h in hits]
            plan.groups = {k: [_rescore(h, h.score, keep_vector=False) for h in g]
                           for k, g in plan.groups.items()}
        return SearchResult(hits, plan.mode, (time.perf_counter() - t0) * 1000, plan.stages,
                            plan.warnings, relevance, plan.explain if q.explain else {},
                            plan.groups)

    def _explain_first(self, plan: _Plan, hits: list[ScoredRecord],
                       sparse: list[ScoredRecord]) -> None:
        """Raw first-stage scores per leg: ``dense`` (cosine), ``sparse`` (BM25; None
        when the hit was not among the BM25 candidates) and ``fused`` (hybrid)."""
        bm25 = {h.id: h.score for h in sparse}
        for h in hits:
            legs: dict[str, float | None] = {}
            if plan.mode == "dense":
                legs["dense"] = h.score
            elif plan.mode == "sparse":
                legs["sparse"] = h.score
            else:
                legs["sparse"] = bm25.get(h.id)
                legs["fused"] = h.score
            rel = None if "dense" in legs else relevance_of(plan.vector, h.embedding)
            if rel is not None:
                legs["dense"] = 2 * rel - 1
            plan.explain[h.id] = legs


def _rescore(hit: ScoredRecord, score: float, keep_vector: bool = True) -> ScoredRecord:
    return ScoredRecord(hit.id, hit.text, hit.metadata, float(score),
                        hit.embedding if keep_vector else None, hit.tenant)


def own_first(hits: list[ScoredRecord]) -> list[ScoredRecord]:
    """One hit per id: a shared record (tenant ``*``) whose id the caller's own record also
    has is left out, as a lookup by id answers the caller's own (core/tenancy.py)."""
    shared = [h for h in hits if h.tenant == SHARED]
    if not shared or len(shared) == len(hits):
        return hits
    own = {h.id for h in hits if h.tenant != SHARED}
    return [h for h in hits if h.tenant != SHARED or h.id not in own]
