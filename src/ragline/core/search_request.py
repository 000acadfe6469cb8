"""The one search request, from the edge (HTTP, CLI, MCP, evaluation, library, the
answer services) down to retrieval, and the target the door resolves for it.

A caller states a :class:`SearchRequest`; the door (``Ragline.search``) resolves
the collection once (the name given, else the configured default) and checks the
caller may read it; the search use case (:mod:`ragline.services.search.searching`)
parses the filter once and hands the same request, with its
:class:`SearchTarget`, to :class:`~ragline.services.search.retrieval.RetrievalService`.
Nothing on the way copies the request into another type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ragline.core.filters import Node
from ragline.core.tenancy import TenantScope

Mode = Literal["dense", "sparse", "hybrid"]
Fusion = Literal["rrf", "dbsf"]
Overviews = Literal["yield", "keep"]


@dataclass
class SearchRequest:
    """A search as a caller states it (every field optional but a query or embedding).

    ``collection``: the name, or None for the configured default. ``where`` is the
    filter object as given (parsed once, with the configured limits, into the
    target's ``where``). ``filters`` holds the book-style parameters of
    ``POST /search`` (``hardware_tier``, ``module``, ``chapter_min``/``chapter_max``,
    ``lesson``, ``proficiency_levels``, ``layer``); they are ANDed with ``where``.
    """

    collection: str | None = None
    query: str | None = None
    embedding: Any = None
    mode: Mode | None = None
    where: dict[str, Any] | None = None
    limit: int = 10
    score_threshold: float | None = None
    include_embeddings: bool = False
    rrf_k: int | None = None
    candidates: int | None = None
    fusion: Fusion | None = None
    rerank: bool = False
    rerank_candidates: int = 50
    boost: dict[str, Any] | None = None
    expand: str = "none"
    filters: dict[str, Any] = field(default_factory=dict)
    # -- result shaping and explanation (issue 12; see ragline.services.search.diversify) --
    group_by: str | None = None
    group_size: int = 1
    mmr: float | None = None
    overviews: Overviews | None = None
    relevance_threshold: float | None = None
    explain: bool = False
    relevance: bool = True  # False: hits carry none, and sparse search embeds no query


@dataclass(frozen=True)
class SearchTarget:
    """Where a request runs, resolved once: the collection (the default already applied
    and the caller's access checked), the tenants the caller reads, and the request's
    ``where`` and book filters parsed into one condition."""

    collection: str
    tenant: TenantScope
    where: Node | None = None
