"""The use cases the MCP tools run, in one place.

Every call goes through the ``Ragline`` facade and takes the caller's tenant,
exactly as the HTTP routes do; nothing here knows about MCP. Keeping them
together means the tools stay one line each and move to new facade methods
in one edit.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import anyio.to_thread

from ragline.core.filters import Limits, parse_where
from ragline.facade import Ragline
from ragline.services.expand import expand_hits, get_context, get_lesson
from ragline.services.retrieval import SearchQuery


def default_collection(rl: Ragline) -> str:
    return rl.settings.default_collection or "knowledge"


def _limits(rl: Ragline) -> Limits:
    s = rl.settings
    return Limits(s.filter_max_depth, s.filter_max_conditions, s.filter_max_in_values)


async def search(rl: Ragline, tenant: str, query: str, collection: str | None,
                 mode: str | None, where: dict[str, Any] | None, limit: int,
                 rerank: bool, expand: str) -> dict[str, Any]:
    name = collection or default_collection(rl)
    node = parse_where(where, _limits(rl))
    q = SearchQuery(collection=name, tenant=tenant, query=query, mode=mode,  # type: ignore[arg-type]
                    where=node, limit=limit, rerank=rerank)
    result = await rl.retrieval.search(q)
    hits = [{"id": h.id, "score": h.score, "text": h.text, "metadata": h.metadata}
            for h in result.hits]
    if expand != "none" and result.hits:
        info = rl.collections.get(name)
        extra = await anyio.to_thread.run_sync(expand_hits, rl.store, info, tenant,
                                               result.hits, expand)
        for item, added in zip(hits, extra, strict=True):
            item.update(added)
    out: dict[str, Any] = {"collection": name, "mode": result.mode, "stages": result.stages,
                           "took_ms": round(result.took_ms, 2), "results": hits}
    if result.warnings:
        out["warnings"] = result.warnings
    return out


def list_collections(rl: Ragline, tenant: str) -> list[dict[str, Any]]:
    return [collection_view(rl, tenant, c.name) for c in rl.collections.all()]


def collection_view(rl: Ragline, tenant: str, name: str) -> dict[str, Any]:
    c = rl.collections.get(name)
    return {"name": c.name, "metadata": c.metadata, "dimension": c.dimension,
            "embedding_provider": c.embedding_provider, "embedding_model": c.embedding_model,
            "count": rl.store.count(c.shard, tenant, None) if c.dimension else 0}


def context(rl: Ragline, tenant: str, chunk_id: str, collection: str | None,
            window: int | None) -> dict[str, Any]:
    info = rl.collections.get(collection or default_collection(rl))
    return get_context(rl.store, info, tenant, chunk_id, window)


def source(rl: Ragline, tenant: str, source_id: str, collection: str | None) -> dict[str, Any]:
    info = rl.collections.get(collection or default_collection(rl))
    state = rl.ingest_state.source(info.name, info.shard, tenant, source_id)
    return get_lesson(rl.store, info, tenant, source_id,
                      state.chunk_ids if state and state.source_hash else None)


def ingest_text(rl: Ragline, tenant: str, text: str, title: str | None) -> dict[str, Any]:
    return asdict(rl.ingest.ingest_text(default_collection(rl), tenant, text, title))


def ingest_url(rl: Ragline, tenant: str, url: str) -> dict[str, Any]:
    return asdict(rl.ingest.ingest_url(default_collection(rl), tenant, url))
