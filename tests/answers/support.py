"""Shared helpers for the answer tests: a scripted retriever with per-tenant documents."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ragline.core.tenancy import TenantScope, own_tenant
from ragline.services.search.rag_context import Hit, TurnEmbeddings


@dataclass
class ScriptedRetriever:
    """Returns the hits planned for (tenant, collection), records every call."""

    docs: dict[tuple[str, str], list[Hit]] = field(default_factory=dict)
    calls: list[dict[str, Any]] = field(default_factory=list)

    async def __call__(self, tenant: TenantScope, collection: str, query: str, *, limit: int,
                       where: dict[str, Any] | None = None, candidates: int = 100,
                       boost: dict[str, Any] | None = None,
                       embeddings: TurnEmbeddings | None = None) -> list[Hit]:
        self.calls.append({"tenant": tenant, "collection": collection, "query": query,
                           "limit": limit, "where": where, "candidates": candidates,
                           "boost": boost})
        return list(self.docs.get((own_tenant(tenant), collection), []))[:limit]


def hit(i: int, relevance: float | None, text: str | None = None, **meta: Any) -> Hit:
    metadata: dict[str, Any] = {"title": f"Doc {i}", "source_type": "md",
                                "source_path": f"docs/doc{i}.md", **meta}
    return Hit(f"h{i}", text or f"content {i}", metadata, score=relevance or 0.0,
               relevance=relevance, collection="kb")
