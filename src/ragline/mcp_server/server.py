"""The MCP tools and resources of ragline (official ``mcp`` SDK, ``MCPServer``).

One server definition serves both transports. Who is calling is decided per
message: over HTTP from the API key the request carried (resolved by
``http.install`` and left on the request's state, read by a middleware), over
stdio from the tenant given to ``build_server`` (``ragline mcp``: the local
process owns the data directory). Tools report expected failures (a bad
filter, an unknown collection) as MCP tool errors carrying ragline's message,
so an agent can read and correct them.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Annotated, Any, Literal, TypeVar

import anyio.to_thread
from mcp.server import MCPServer
from mcp.server.context import CallNext, ServerRequestContext
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from pydantic import Field

from ragline import __version__
from ragline.errors import NotFound, PayloadTooLarge, RaglineError
from ragline.facade import Ragline
from ragline.mcp_server import calls

T = TypeVar("T")

PRINCIPAL_STATE = "ragline_tenant"
"""Key under the ASGI scope's ``state`` where the HTTP transport leaves the caller's tenant."""

INSTRUCTIONS = (
    "ragline is a retrieval backend. Use list_collections to see what can be searched, "
    "search to find passages (each hit has an id and a source), get_context for the "
    "passages around a hit, get_source for a whole source document. ingest_text and "
    "ingest_url add knowledge to the default collection."
)


_tenant: ContextVar[str | None] = ContextVar("ragline_mcp_tenant", default=None)


class _TenantMiddleware:
    """Puts the caller's tenant (left by the HTTP transport on the request) in a ContextVar.

    Handlers run inside ``call_next``, so tools and resources (static ones get
    no ``Context``) read the caller from ``_tenant`` whatever their signature.
    """

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        request = ctx.request
        state = getattr(request, "scope", {}).get("state") or {}
        token = _tenant.set(state.get(PRINCIPAL_STATE))
        try:
            return await call_next(ctx)
        finally:
            _tenant.reset(token)


async def _run(fn: Callable[[], Awaitable[T]]) -> T:
    """Run a use case, turning ragline's errors into tool errors with their message."""
    try:
        return await fn()
    except RaglineError as exc:
        raise ToolError(f"{exc.code}: {exc.message}") from exc


def build_server(get_rl: Callable[[], Ragline], default_tenant: str | None = None) -> MCPServer:
    """The MCP server; ``get_rl`` is called per request (the app builds the facade late)."""
    mcp: MCPServer = MCPServer("ragline", version=__version__, instructions=INSTRUCTIONS,
                               log_level="WARNING")

    mcp.middleware.append(_TenantMiddleware())

    def who() -> str:
        return _tenant.get() or default_tenant or get_rl().tenant

    async def blocking(fn: Callable[[], T]) -> T:
        return await anyio.to_thread.run_sync(fn)

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
        tenant = who()
        return await _run(lambda: calls.search(get_rl(), tenant, query, collection, mode,
                                               where, limit, rerank, expand))

    @mcp.tool()
    async def get_context(
        chunk_id: Annotated[str, Field(min_length=1, description="A hit's id.")],
        collection: Annotated[str | None, Field(description="Collection of the chunk.")] = None,
        window: Annotated[int | None, Field(
            ge=1, le=20, description="Chunks on each side (default 1).")] = None,
    ) -> dict[str, Any]:
        """The chunk with its previous and next chunks, in reading order."""
        tenant = who()
        return await _run(lambda: blocking(
            lambda: calls.context(get_rl(), tenant, chunk_id, collection, window)))

    @mcp.tool()
    async def get_source(
        source_id: Annotated[str, Field(min_length=1, description=(
            "A hit's parent_doc_id / source_id (e.g. a file path without extension)."))],
        collection: Annotated[str | None, Field(description="Collection of the source.")] = None,
    ) -> dict[str, Any]:
        """A whole source document: its chunks in order and the joined text."""
        tenant = who()
        return await _run(lambda: blocking(
            lambda: calls.source(get_rl(), tenant, source_id, collection)))

    @mcp.tool()
    async def list_collections() -> dict[str, Any]:
        """Collections with their document counts (as the caller sees them)."""
        tenant = who()
        items = await _run(lambda: blocking(lambda: calls.list_collections(get_rl(), tenant)))
        return {"collections": items, "count": len(items)}

    @mcp.tool()
    async def ingest_text(
        text: Annotated[str, Field(min_length=1, description="The text to add.")],
        title: Annotated[str | None, Field(description="A title for the source.")] = None,
    ) -> dict[str, Any]:
        """Add a text to the knowledge base (the default collection); same text = no-op."""
        tenant = who()
        rl = get_rl()
        if not text.strip():
            raise ToolError("invalid_request: 'text' must not be empty")
        size = len(text.encode("utf-8"))
        if size > rl.settings.max_upload_bytes:
            raise ToolError(f"{PayloadTooLarge.code}: Text too large: {size} bytes (limit "
                            f"{rl.settings.max_upload_bytes} bytes)")
        return await _run(lambda: blocking(lambda: calls.ingest_text(rl, tenant, text, title)))

    @mcp.tool()
    async def ingest_url(
        url: Annotated[str, Field(min_length=1, description="An http(s) URL to fetch.")],
    ) -> dict[str, Any]:
        """Fetch a web page or document and add it to the knowledge base."""
        tenant = who()
        return await _run(lambda: blocking(lambda: calls.ingest_url(get_rl(), tenant, url.strip())))

    _add_ask(mcp, get_rl, who)
    _add_resources(mcp, get_rl, who)
    return mcp


def _add_ask(mcp: MCPServer, get_rl: Callable[[], Ragline],
             who: Callable[[], str]) -> None:
    """``ask`` exists only when the facade can answer (an LLM is configured)."""
    rl = get_rl()
    chat = getattr(rl, "chat", None)
    if chat is None or not getattr(rl, "llm_configured", False):
        return

    @mcp.tool()
    async def ask(
        question: Annotated[str, Field(min_length=1, description="A question to answer.")],
    ) -> dict[str, Any]:
        """Answer a question from the knowledge base, with cited sources."""
        tenant = who()
        return await _run(lambda: anyio.to_thread.run_sync(lambda: chat(tenant, question)))


def _add_resources(mcp: MCPServer, get_rl: Callable[[], Ragline],
                   who: Callable[[], str]) -> None:
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
        tenant = who()
        return await read(lambda: calls.list_collections(get_rl(), tenant))

    @mcp.resource("ragline://collections/{name}", mime_type="application/json",
                  description="One collection: metadata, embedding settings, count.")
    async def collection(name: str) -> str:
        tenant = who()
        return await read(lambda: calls.collection_view(get_rl(), tenant, name))

    @mcp.resource("ragline://sources/{collection}/{+source_id}", mime_type="text/plain",
                  description="The full text of one source document of a collection.")
    async def source(collection: str, source_id: str) -> str:
        tenant = who()
        try:
            lesson = await anyio.to_thread.run_sync(
                lambda: calls.source(get_rl(), tenant, source_id, collection))
        except NotFound as exc:
            raise ResourceNotFoundError(exc.message) from exc
        except RaglineError as exc:
            raise ResourceError(exc.message) from exc
        return str(lesson["text"])
