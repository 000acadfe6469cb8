"""The MCP tools and resources of ragline (official ``mcp`` SDK, ``MCPServer``).

One server definition serves both transports. Who is calling is decided per
message: over HTTP from the API key the request carried (resolved by
``http.install`` and left on the request's state, read by a middleware), over
stdio from the principal given to ``build_server`` (``ragline mcp``: the local
process owns the data directory). Tools report expected failures (a bad
filter, an unknown collection) as MCP tool errors carrying ragline's message,
so an agent can read and correct them.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import asdict
from typing import Annotated, Any, Literal, TypeVar

import anyio.to_thread
from mcp.server import MCPServer
from mcp.server.context import CallNext, ServerRequestContext
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from pydantic import Field

from ragline import __version__
from ragline.api.mcp_server.auth import PRINCIPAL_STATE
from ragline.core.principal import Principal
from ragline.errors import NotFound, RaglineError
from ragline.facade import (
    CollectionView,
    IngestOutcome,
    IngestSource,
    Ragline,
    SearchRequest,
)

T = TypeVar("T")


INSTRUCTIONS = (
    "ragline is a retrieval backend. Use list_collections to see what can be searched, "
    "search to find passages (each hit has an id and a source), get_context for the "
    "passages around a hit, get_source for a whole source document. ingest_text and "
    "ingest_url add knowledge to the default collection."
)


_caller: ContextVar[Principal | None] = ContextVar("ragline_mcp_caller", default=None)


class _CallerMiddleware:
    """Puts the caller (left by the HTTP transport on the request's state) in a ContextVar.

    Handlers run inside ``call_next``, so tools and resources (static ones get
    no ``Context``) read the caller from ``_caller`` whatever their signature.
    """

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        state = getattr(ctx.request, "scope", {}).get("state") or {}
        token = _caller.set(state.get(PRINCIPAL_STATE))
        try:
            return await call_next(ctx)
        finally:
            _caller.reset(token)


async def _run(fn: Callable[[], Awaitable[T]]) -> T:
    """Run a use case, turning ragline's errors into tool errors with their message."""
    try:
        return await fn()
    except RaglineError as exc:
        raise ToolError(f"{exc.code}: {exc.message}") from exc


async def _blocking(fn: Callable[[], T]) -> T:
    return await anyio.to_thread.run_sync(fn)


def _collection(c: CollectionView) -> dict[str, Any]:
    return {"name": c.name, "metadata": c.metadata, "dimension": c.dimension,
            "embedding_provider": c.embedding_provider, "embedding_model": c.embedding_model,
            "count": c.count}


def _ingested(outcome: IngestOutcome) -> dict[str, Any]:
    if outcome.document is not None:
        return asdict(outcome.document)
    assert outcome.job is not None
    return {"job_id": outcome.job.id, "status": outcome.job.status}


def build_server(get_rl: Callable[[], Ragline], caller: Principal | None = None) -> MCPServer:
    """The MCP server. ``get_rl`` is called per request (the app starts the facade late);
    ``caller`` is who stdio callers are (HTTP callers come from their key)."""
    mcp: MCPServer = MCPServer("ragline", version=__version__, instructions=INSTRUCTIONS,
                               log_level="WARNING")
    mcp.middleware.append(_CallerMiddleware())

    def who() -> Principal:
        return _caller.get() or caller or get_rl().owner()

    @mcp.tool()
    async def search(
        query: Annotated[str, Field(min_length=1, description="What to look for.")],
        collection: Annotated[str | None, Field(
            description="Collection to search (default: the server's default collection).")] = None,
        mode: Annotated[Literal["dense", "sparse", "hybrid"] | None, Field(
            description="dense (embeddings), sparse (BM25) or hybrid; default: the best the "
            "collection supports.")] = None,
        where: Annotated[dict[str, Any] | None, Field(
            description='Metadata filter, e.g. {"chapter": {"$lte": 3}}; operators $eq $ne $gt '
            "$gte $lt $lte $in $nin $contains $and $or $not.")] = None,
        limit: Annotated[int, Field(ge=1, le=100, description="Number of results.")] = 10,
        rerank: Annotated[bool, Field(
            description="Rescore with the cross-encoder when one is loaded.")] = False,
        expand: Annotated[Literal["none", "neighbors", "section", "document"], Field(
            description="Add surrounding text to each hit.")] = "none",
    ) -> dict[str, Any]:
        """Search a collection; returns hits with id, score, text and metadata."""
        request = SearchRequest(collection=collection, query=query, mode=mode,
                                where=where, limit=limit, rerank=rerank, expand=expand)
        rl, me = get_rl(), who()
        res = await _run(lambda: rl.search.query(me, request))
        out: dict[str, Any] = {
            "collection": res.collection, "mode": res.mode, "stages": res.stages,
            "took_ms": round(res.took_ms, 2),
            "results": [{"id": h.id, "score": h.score, "text": h.text, "metadata": h.metadata,
                         **h.context} for h in res.hits]}
        if res.warnings:
            out["warnings"] = res.warnings
        return out

    @mcp.tool()
    async def get_context(
        chunk_id: Annotated[str, Field(min_length=1, description="A hit's id.")],
        collection: Annotated[str | None, Field(description="Collection of the chunk.")] = None,
        window: Annotated[int | None, Field(
            ge=1, le=20, description="Chunks on each side (default 1).")] = None,
    ) -> dict[str, Any]:
        """The chunk with its previous and next chunks, in reading order."""
        rl, me = get_rl(), who()
        return await _run(lambda: _blocking(
            lambda: rl.search.context(me, chunk_id, collection, window)))

    @mcp.tool()
    async def get_source(
        source_id: Annotated[str, Field(min_length=1, description=(
            "A hit's parent_doc_id / source_id (e.g. a file path without extension)."))],
        collection: Annotated[str | None, Field(description="Collection of the source.")] = None,
    ) -> dict[str, Any]:
        """A whole source document: its chunks in order and the joined text."""
        rl, me = get_rl(), who()
        return await _run(lambda: _blocking(lambda: rl.search.lesson(me, source_id, collection)))

    @mcp.tool()
    async def list_collections() -> dict[str, Any]:
        """Collections with their document counts (as the caller sees them)."""
        rl, me = get_rl(), who()
        items = await _run(lambda: _blocking(lambda: rl.collections.all(me)))
        return {"collections": [_collection(c) for c in items], "count": len(items)}

    @mcp.tool()
    async def ingest_text(
        text: Annotated[str, Field(min_length=1, description="The text to add.")],
        title: Annotated[str | None, Field(description="A title for the source.")] = None,
    ) -> dict[str, Any]:
        """Add a text to the knowledge base (the default collection); same text = no-op."""
        rl, me = get_rl(), who()
        src = IngestSource(kind="text", text=text, title=title, trigger="mcp")
        return _ingested(await _run(lambda: _blocking(
            lambda: rl.ingestion.submit(me, src, wait=True))))

    @mcp.tool()
    async def ingest_url(
        url: Annotated[str, Field(min_length=1, description="An http(s) URL to fetch.")],
    ) -> dict[str, Any]:
        """Fetch a web page or document and add it to the knowledge base."""
        rl, me = get_rl(), who()
        src = IngestSource(kind="url", url=url, trigger="mcp")
        return _ingested(await _run(lambda: _blocking(
            lambda: rl.ingestion.submit(me, src, wait=True))))

    _add_ask(mcp, get_rl, who)
    _add_resources(mcp, get_rl, who)
    return mcp


def _add_ask(mcp: MCPServer, get_rl: Callable[[], Ragline],
             who: Callable[[], Principal]) -> None:
    """``ask`` exists only when the facade can answer (an LLM is configured)."""
    if not get_rl().answers.llm_configured:
        return

    @mcp.tool()
    async def ask(
        question: Annotated[str, Field(min_length=1, description="A question to answer.")],
        collection: Annotated[str | None, Field(
            description="Collection to answer from (default: the server's default "
            "collection).")] = None,
        conversation_id: Annotated[str | None, Field(
            description="Continue this conversation (from an earlier answer's "
            "conversation_id): follow-up questions are searched with its topic.")] = None,
    ) -> dict[str, Any]:
        """Answer a question from the knowledge base: the answer, its cited sources, the
        path taken (rag, general or tool) and a conversation_id for follow-ups."""
        me = who()
        result: dict[str, Any] = await _run(lambda: get_rl().answers.chat(
            me, question, conversation_id=conversation_id, collection=collection))
        return result


def _add_resources(mcp: MCPServer, get_rl: Callable[[], Ragline],
                   who: Callable[[], Principal]) -> None:
    async def read(fn: Callable[[], Any]) -> str:
        try:
            value = await anyio.to_thread.run_sync(fn)
        except NotFound as exc:
            raise ResourceNotFoundError(exc.message) from exc
        except RaglineError as exc:
            raise ResourceError(exc.message) from exc
        return json.dumps(value, ensure_ascii=False, default=str)

    @mcp.resource("ragline://collections", mime_type="application/json",
                  description="Every collection with its document count.")
    async def collections() -> str:
        me = who()
        return await read(lambda: [_collection(c) for c in get_rl().collections.all(me)])

    @mcp.resource("ragline://collections/{name}", mime_type="application/json",
                  description="One collection: metadata, embedding settings, count.")
    async def collection(name: str) -> str:
        me = who()
        return await read(lambda: _collection(get_rl().collections.get(me, name)))

    @mcp.resource("ragline://sources/{collection}/{+source_id}", mime_type="text/plain",
                  description="The full text of one source document of a collection.")
    async def source(collection: str, source_id: str) -> str:
        me = who()
        try:
            lesson = await anyio.to_thread.run_sync(
                lambda: get_rl().search.lesson(me, source_id, collection))
        except NotFound as exc:
            raise ResourceNotFoundError(exc.message) from exc
        except RaglineError as exc:
            raise ResourceError(exc.message) from exc
        return str(lesson["text"])
