"""``?service=ID`` on collection, document and collection-search routes.

One dependency, on those routers only: without ``service`` (or with ``local``)
it does nothing and the route serves the request here; for a connection that is
another server it hands the request to ``Ragline.forward`` and the other
server's status, body and content type are returned as they are (raised as
:class:`PassThrough`, so the route itself never runs). The same routes are also
served under ``/api`` (``/api/collections/...``, as spec 000's Node middleware
calls them), hidden from the OpenAPI document to keep one entry per operation.

A body that is not JSON at all is refused here (400) before routing: FastAPI
parses JSON bodies before any dependency runs.
"""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi.responses import Response

from ragline.api.deps import RL, Caller
from ragline.facade import Forwarded, Outgoing

SERVICE_HELP = ("A connection id (GET /api/connections): the request is served by that "
                "service and its answer returned unchanged; absent or 'local': this server.")


class PassThrough(Exception):
    """Carries another server's answer out of the dependency, past the route."""

    def __init__(self, answer: Forwarded) -> None:
        super().__init__(answer.status)
        self.answer = answer


async def route_service(request: Request, rl: RL, caller: Caller,
                        service: str | None = Query(None, description=SERVICE_HELP)) -> None:
    if service is None or not rl.routes_elsewhere(caller, service):
        return
    raw = request.scope.get("raw_path")  # as sent: an id with %2F or %3F stays one segment
    path = raw.decode("latin-1") if isinstance(raw, bytes) and raw else request.url.path
    outgoing = Outgoing(request.method, path, request.query_params.multi_items(),
                        await request.body(), request.headers.get("content-type"),
                        getattr(request.state, "request_id", None))
    raise PassThrough(await rl.forward(caller, service, outgoing))


def install(app: FastAPI, routers: Sequence[APIRouter]) -> None:
    routed = [Depends(route_service)]
    for router in routers:
        app.include_router(router, dependencies=routed)
        app.include_router(router, prefix="/api", dependencies=routed, include_in_schema=False)

    @app.exception_handler(PassThrough)
    async def _pass_through(_: Request, exc: PassThrough) -> Response:
        answer = exc.answer
        return Response(answer.body, status_code=answer.status, headers=answer.headers)
