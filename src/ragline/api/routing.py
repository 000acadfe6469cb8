"""``?service=ID`` on collection, document and collection-search routes.

One dependency, on those routers only, asks ``Ragline.route`` who serves the
request:

* without ``service`` (or with ``local``): nothing happens, the route serves it here;
* a store connection (pgvector, a Qdrant or Chroma server): the facade of that
  store is put on ``request.state``, where the route's ``RL`` dependency picks it
  up, so the unchanged route calls the same use case on it with the same caller
  (tenant and role as here);
* another ragline server: the request goes to ``Ragline.forward`` and the other
  server's status, body and content type are returned as they are (raised as
  :class:`PassThrough`, so the route itself never runs).

This dependency runs before the route's own (router dependencies come first) and
reads the server's facade from the app, not through ``RL``: FastAPI caches a
dependency's value per request, and the route's ``RL`` must be resolved after
the facade to use is known. The same routes are also served under ``/api``
(``/api/collections/...``, as spec 000's Node middleware calls them), hidden from
the OpenAPI document to keep one entry per operation.

A body that is not JSON at all is refused here (400) before routing: FastAPI
parses JSON bodies before any dependency runs.

The other server gets exactly the path authorised here (issue 32): each segment
is decoded once and encoded again, and a segment that is ``.`` or ``..`` (however
encoded: ``%2e%2e``) or that hides a separator (``%2f``, ``%5c``, a backslash)
is refused with 400. An HTTP client normalises ``..`` away, so such a path would
run a different route over there than the one checked here.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import quote, unquote

from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

from ragline.api.deps import SERVED_BY, Caller
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


class PassThrough(Exception):
    """Carries another server's answer out of the dependency, past the route."""

    def __init__(self, answer: Forwarded) -> None:
        super().__init__(answer.status)
        self.answer = answer


async def route_service(request: Request, caller: Caller,
                        service: str | None = Query(None, description=SERVICE_HELP)) -> None:
    if service is None:
        return
    rl: Ragline = request.app.state.ragline
    # a thread: the first request to a store connection opens its catalog and store
    served_by = await run_in_threadpool(rl.route, caller, service)
    if served_by is not None:
        setattr(request.state, SERVED_BY, served_by)
        return
    raw = request.scope.get("raw_path")  # as sent: an id with %3F stays one segment
    routed = request.scope.get("path") or request.url.path  # decoded, as matched here
    path = forwarded_path(raw.decode("latin-1") if isinstance(raw, bytes) and raw
                          else routed, routed)
    outgoing = Outgoing(request.method, path, request.query_params.multi_items(),
                        await request.body(), request.headers.get("content-type"),
                        getattr(request.state, "request_id", None))
    raise PassThrough(await rl.forward(caller, service, outgoing))


def install(app: FastAPI, routers: Sequence[APIRouter]) -> None:
    routed = [Depends(route_service)]
    for router in routers:
        app.include_router(router, dependencies=routed)
    for router in routers:
        app.include_router(router, prefix="/api", dependencies=routed, include_in_schema=False)

    @app.exception_handler(PassThrough)
    async def _pass_through(_: Request, exc: PassThrough) -> Response:
        answer = exc.answer
        return Response(answer.body, status_code=answer.status, headers=answer.headers)
