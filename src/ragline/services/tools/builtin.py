"""The two tools ragline ships: ``search_knowledge_base`` and ``fetch_url``."""

from __future__ import annotations

from typing import Any, ClassVar

import anyio.to_thread

from ragline.errors import InvalidInput, PayloadTooLarge
from ragline.ingest.url import fetch_url
from ragline.services.tools.base import ToolContext

FETCH_MAX_CHARS = 4000
"""Fetched text kept for the post-tool prompt (small models have small contexts)."""


class SearchKnowledgeBase:
    """Search the caller's knowledge base again: another collection, other words or a
    filter. Always the caller's tenant (the context's retriever is bound to it)."""

    name: ClassVar[str] = "search_knowledge_base"
    description: ClassVar[str] = (
        "Search the user's knowledge base (optionally another collection or with a "
        "metadata filter) and return the matching passages.")
    arguments: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to search for."},
            "collection": {"type": "string", "description": "Collection to search "
                           "(default: the conversation's)."},
            "where": {"type": "object", "description": "Metadata filter."},
            "limit": {"type": "integer", "minimum": 1, "maximum": 20},
        },
        "required": ["query"],
    }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        collection = args.get("collection") or ctx.collection
        if not collection:
            return {"error": "no collection to search"}
        hits = await ctx.retriever(ctx.tenant, collection, str(args["query"]),
                                   limit=int(args.get("limit") or 3), where=args.get("where"),
                                   embeddings=ctx.embeddings)
        ctx.options.setdefault("sources", []).extend(hits)
        return [{"title": h.title, "source": h.filename or h.url, "text": h.text,
                 "relevance": h.relevance} for h in hits]


class FetchUrl:
    """Read a web page with ingestion's fetcher, under its SSRF rules (no private,
    loopback or link-local addresses unless ``allow_private_urls``)."""

    name: ClassVar[str] = "fetch_url"
    description: ClassVar[str] = "Fetch a public web page (http/https) and return its text."
    arguments: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"url": {"type": "string", "description": "http(s) URL to read."}},
        "required": ["url"],
    }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        url = str(args["url"])
        try:
            doc = await anyio.to_thread.run_sync(
                lambda: fetch_url(url, allow_private=ctx.allow_private_urls,
                                  **ctx.options.get("fetch", {})))
        except (InvalidInput, PayloadTooLarge) as exc:
            return {"error": exc.message}
        text = doc.text
        return {"url": doc.source_path, "title": doc.title, "text": text[:FETCH_MAX_CHARS],
                "truncated": len(text) > FETCH_MAX_CHARS}
