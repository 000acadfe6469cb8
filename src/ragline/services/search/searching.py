"""The search use case as callers ask for it: a request in, rendered hits out.

One pipeline serves every entry point (HTTP, CLI, evaluation, MCP, library), on
one request type (:class:`~ragline.core.search_request.SearchRequest`): the door
resolves the collection (the one default-collection rule, :meth:`SearchService.
existing_default`) and checks access; this maps the book-style filter parameters
onto a ``where`` object, parses it with the configured limits, runs
:class:`~ragline.services.search.retrieval.RetrievalService` (embed, store query, rerank,
boost, threshold) on the same request, then expands hits with their context.
Routes only parse the body and render what this returns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread

from ragline.core.filters import Limits, Node, parse_where, parse_where_json
from ragline.core.search_request import SearchRequest as SearchRequest  # for this module's callers
from ragline.core.search_request import SearchTarget
from ragline.core.tenancy import SHARED, TenantScope
from ragline.core.types import ScoredRecord
from ragline.errors import CollectionNotFound, InvalidInput
from ragline.services.corpus.collections import CollectionService
from ragline.services.search.expand import expand_hits
from ragline.services.search.retrieval import RetrievalService
from ragline.settings import Settings

NO_DEFAULT = ("No collection given and no default collection configured "
              "(set RAGLINE_DEFAULT_COLLECTION or pass 'collection')")


@dataclass
class SearchHit:
    """One result. ``score`` ranks within the mode (cosine, BM25, fused, reranker
    probability, plus boosts) and orders the list (a hit moved down by the overview prior
    or MMR shows at most the score of the hit above it); ``relevance`` is the one scale
    shared by every mode (``0.5 + cosine/2``, None without embeddings); ``scores`` the
    raw per-leg scores when ``explain`` was asked; ``group`` the other hits of its group
    under ``group_by``.
    """

    id: str
    text: str
    metadata: dict[str, Any]
    score: float
    embedding: list[float] | None = None
    context: dict[str, Any] = field(default_factory=dict)
    relevance: float | None = None
    scores: dict[str, float | None] | None = None
    group: list[SearchHit] | None = None
    shared: bool = False  # of the shared corpus (tenant '*')


@dataclass
class SearchResponse:
    collection: str
    hits: list[SearchHit]
    mode: str
    took_ms: float
    stages: list[str]
    warnings: list[str]


_MODULE_DIR = re.compile(r"^module-(\d+)(?:-|$)", re.IGNORECASE)


def module_filter(value: str | int) -> dict[str, Any]:
    """Spec 004's ``module`` in any of its forms: the number (``1``, ``"1"``), the
    directory name (``"module-1-ros2"``, also ``"module-1"``: both name module 1, which
    ingestion stores as ``module``) or any other string a frontmatter ``module`` or the
    directory name (``module_name``) holds."""
    if isinstance(value, int) and not isinstance(value, bool):
        return {"module": value}
    text = str(value).strip()
    if text.isdigit():
        return {"module": int(text)}
    m = _MODULE_DIR.match(text)
    if m:
        return {"$or": [{"module": int(m.group(1))}, {"module_name": text}]}
    return {"$or": [{"module": text}, {"module_name": text}]}


def book_filters(where: dict[str, Any] | None, filters: dict[str, Any]) -> dict[str, Any] | None:
    """The book-style search parameters as one ``where`` object (ANDed with ``where``)."""
    parts: list[dict[str, Any]] = [where] if where else []
    f = {k: v for k, v in filters.items() if v is not None}
    if "hardware_tier" in f:
        parts.append({"hardware_tier": {"$lte": f["hardware_tier"]}})
    if "module" in f:
        parts.append(module_filter(f["module"]))
    if "chapter_min" in f:
        parts.append({"chapter": {"$gte": f["chapter_min"]}})
    if "chapter_max" in f:
        parts.append({"chapter": {"$lte": f["chapter_max"]}})
    if "lesson" in f:
        parts.append({"lesson": f["lesson"]})
    if f.get("proficiency_levels"):
        parts.append({"proficiency_level": {"$in": f["proficiency_levels"]}})
    if "layer" in f:
        parts.append({"layer": f["layer"]})
    if "book_id" in f:
        parts.append({"book_id": f["book_id"]})
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else {"$and": parts}


class SearchService:
    def __init__(self, settings: Settings, collections: CollectionService,
                 retrieval: RetrievalService) -> None:
        self.settings = settings
        self.collections = collections
        self.retrieval = retrieval

    # -- the rules shared by every entry point -------------------------------------------
    def limits(self) -> Limits:
        s = self.settings
        return Limits(s.filter_max_depth, s.filter_max_conditions, s.filter_max_in_values)

    def parse_where(self, raw: dict[str, Any] | str | None) -> Node | None:
        """A ``where`` given as an object (bodies) or a JSON string (query strings)."""
        if isinstance(raw, str):
            return parse_where_json(raw, self.limits())
        return parse_where(raw, self.limits())

    def collection_name(self, given: str | None) -> str:
        """The one default-collection rule: the name given, else the configured default.

        Nothing given and nothing configured is a 400 that says how to fix it.
        """
        if given:
            return given
        if not self.settings.default_collection:
            raise InvalidInput(NO_DEFAULT)
        return self.settings.default_collection

    def existing_default(self, given: str | None) -> str:
        """Like :meth:`collection_name`, for reads: a missing *default* collection says
        that it is the default, instead of a bare "not found"."""
        name = self.collection_name(given)
        if not given and self.collections.find(name) is None:
            raise CollectionNotFound(name, message=(
                f"Collection '{name}' not found: it is the default collection "
                "(RAGLINE_DEFAULT_COLLECTION) and nothing was ingested into it yet; pass "
                "'collection' or ingest documents first"))
        return name

    # -- the pipeline -------------------------------------------------------------------
    async def search(self, tenant: TenantScope, name: str,
                     req: SearchRequest) -> SearchResponse:
        """``req`` on collection ``name``, which the door resolved (:meth:`existing_default`)
        and checked the caller may read; ``tenant``: the tenants the caller reads."""
        where = self.parse_where(book_filters(req.where, req.filters))
        result = await self.retrieval.search(req, SearchTarget(name, tenant, where))

        def hit(h: ScoredRecord) -> SearchHit:
            return SearchHit(h.id, h.text, dict(h.metadata), h.score,
                             [float(x) for x in h.embedding]
                             if req.include_embeddings and h.embedding is not None else None,
                             relevance=result.relevance.get(h.id),
                             scores=result.explain.get(h.id, {}) if req.explain else None,
                             shared=h.tenant == SHARED)

        hits = []
        for h in result.hits:
            out = hit(h)
            if req.group_by:
                out.group = [hit(x) for x in result.groups.get(h.id, [])]
            hits.append(out)
        if req.expand != "none" and hits:
            info = self.collections.get(name)
            extra = await anyio.to_thread.run_sync(
                expand_hits, self.retrieval.store, info, tenant, result.hits, req.expand)
            for one, added in zip(hits, extra, strict=True):
                one.context = added
        return SearchResponse(name, hits, result.mode, result.took_ms, result.stages,
                              result.warnings)
