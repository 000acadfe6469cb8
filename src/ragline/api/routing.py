"""``?service=ID`` on collection, document, source and collection-search routes: who
serves the request is decided in one place, :class:`ServiceRoute`, the route class of
those routers (``route_class=`` at the top of each of their modules).

Before the route's own parsing and dependencies run, its handler reads ``service``:

* absent: the route runs here, as any other;
* given: the caller is authenticated (401 first, before anything about connections
  is told), then ``Ragline.route`` names who serves it:

  * ``local`` or a store connection (pgvector, a Qdrant or Chroma server): a facade,
    this server's or the one of that store, put on ``request.state`` where the
    route's ``RL`` dependency finds it, so the unchanged route calls the same use
    case on it with the same caller (tenant and role as here);
  * another ragline server: the request goes to ``Ragline.forward`` and the other
    server's status, body and content type are returned as they are; the route
    itself never runs.

The decision is a value the handler branches on, not an exception out of a
dependency (FastAPI can only skip a route from a dependency by raising). It is made
after the body is read and before it is validated, as FastAPI orders its own work:
a body that is not JSON at all is refused by the route's parser (400) before
anything is routed, while a body this server's schema would refuse still goes to
another server, which answers for it. ``service`` is declared (for the OpenAPI
document) by a dependency the route class adds. The same routes are also served
under ``/api`` (``/api/collections/...``, as spec 000's Node middleware calls them),
hidden from the OpenAPI document to keep one entry per operation.

The other server gets exactly the path authorised here (issue 32): each segment
is decoded once and encoded again, and a segment that is ``.`` or ``..`` (however
encoded: ``%2e%2e``) or that hides a separator (``%2f``, ``%5c``, a backslash)
is refused with 400. An HTTP client normalises ``..`` away, so such a path would
run a different route over there than the one checked here.
"""

from __future__ import annotations

import email.message
from collections.abc import Callable, Coroutine, Sequence
from typing import Any
from urllib.parse import quote, unquote

from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response
from fastapi.routing import APIRoute

from ragline.api.deps import SERVED_BY, get_caller
from ragline.api.fast_json import FastJSONRoute
from ragline.errors import InvalidInput
from ragline.facade import Forwarded, Outgoing, Ragline

SERVICE_HELP = ("A connection id (GET /api/connections): another ragline server gets the "
                "request passed through and its answer is returned unchanged; a store "
                "connection (pgvector, Qdrant, Chroma) is served by this server on that "
                "store; absent or 'local': this server's own store.")


PATH_SAFE = "!$&'()*+,;=:@~"
"""Characters a path segment carries unencoded (RFC 3986 ``pchar``, besides letters,
digits and ``-._``)."""


def forwarded_path(raw: str, routed: str) -> str:
    """The path to pass through: the one routed here (``routed``, decoded), from the
    ``raw`` path as sent, re-encoded segment by segment; 400 for a dot segment or a
    separator hidden in a segment."""
    segments = []
    for segment in raw.split("/"):
        decoded = unquote(segment)
        if decoded in (".", "..") or "/" in decoded or "\\" in decoded:
            raise InvalidInput("Invalid path for ?service=: '.' and '..' segments and encoded "
                               "separators (%2e%2e, %2f, %5c) are not passed through")
        segments.append(quote(decoded, safe=PATH_SAFE))
    path = "/".join(segments)
    if unquote(path) != routed:  # what the other server routes is what was checked here
        raise InvalidInput("Invalid path for ?service=: it does not decode to the path served")
    return path


async def service_parameter(
        service: str | None = Query(None, description=SERVICE_HELP)) -> str | None:
    """Declares ``?service=`` on a routed operation (OpenAPI, validation); the decision
    is :meth:`ServiceRoute.get_route_handler`'s. Async: a no-op needs no worker thread."""
    return service


async def who_serves(request: Request, service: str) -> Ragline | Forwarded:
    """The facade that serves a ``?service=`` request here, or the answer of the other
    server it was passed through to."""
    caller = await get_caller(request)
    rl: Ragline = request.app.state.ragline
    # a thread: the first request to a store connection opens its catalog and store
    served_by = await run_in_threadpool(rl.route, caller, service)
    if served_by is not None:
        return served_by
    raw = request.scope.get("raw_path")  # as sent: an id with %3F stays one segment
    routed = request.scope.get("path") or request.url.path  # decoded, as matched here
    path = forwarded_path(raw.decode("latin-1") if isinstance(raw, bytes) and raw
                          else routed, routed)
    outgoing = Outgoing(request.method, path, request.query_params.multi_items(),
                        await request.body(), request.headers.get("content-type"),
                        getattr(request.state, "request_id", None))
    return await rl.forward(caller, service, outgoing)


async def _parser_refuses(request: Request) -> bool:
    """Whether the route's own parser refuses this body as not JSON (FastAPI reads a
    body as JSON under ``application/json`` or ``application/*+json``)."""
    message = email.message.Message()
    message["content-type"] = request.headers.get("content-type") or ""
    subtype = message.get_content_subtype()
    if message.get_content_maintype() != "application" or not (
            subtype == "json" or subtype.endswith("+json")):
        return False
    try:
        if await request.body():
            await request.json()  # kept on the request: the route does not parse it again
    except Exception:  # the route's parser meets the same error and answers it (400)
        return True
    return False


class ServiceRoute(APIRoute):
    """A route that ``?service=ID`` may send to another store or server (see the module
    docstring): the one place that decides who serves it."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        dependencies = list(kwargs.pop("dependencies", None) or [])
        if not any(d.dependency is service_parameter for d in dependencies):
            dependencies.insert(0, Depends(service_parameter))  # once, also under /api
        super().__init__(path, endpoint, dependencies=dependencies, **kwargs)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        reads_body = self.body_field is not None

        async def serve(request: Request) -> Response:
            service = request.query_params.get("service")
            if service is None or (reads_body and await _parser_refuses(request)):
                return await handler(request)
            served = await who_serves(request, service)
            if isinstance(served, Forwarded):
                return Response(served.body, status_code=served.status,
                                headers=served.headers)
            setattr(request.state, SERVED_BY, served)
            return await handler(request)

        return serve


class FastJSONServiceRoute(FastJSONRoute, ServiceRoute):
    """:class:`ServiceRoute` whose handler sees a
    :class:`~ragline.api.fast_json.FastJSONRequest` (the bulk routes: documents,
    search); the decision reads the same request object the route then parses."""


def install(app: FastAPI, routers: Sequence[APIRouter]) -> None:
    """Serve routers of :class:`ServiceRoute` routes at the root and under ``/api``."""
    for router in routers:
        if not all(isinstance(r, ServiceRoute) for r in router.routes):
            raise TypeError("a router served with ?service= needs route_class=ServiceRoute")
        app.include_router(router)
    for router in routers:
        app.include_router(router, prefix="/api", include_in_schema=False)
