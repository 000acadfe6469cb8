"""Request ids, the access log and HTTP metrics: one pure ASGI middleware.

Pure ASGI rather than ``BaseHTTPMiddleware``: no extra task per request, and the
context variable set here is the one route handlers (and the thread pool they
run in) see, so every log line of a request carries its id.

The id is the caller's ``X-Request-ID`` when it is a sane token (so a proxy's
id follows the request through), else a fresh one; it is echoed in the
response's ``X-Request-ID``. Metrics and the access log use the route
*template* (``/collections/{name}``), never the raw path.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ragline.observability import metrics
from ragline.observability.context import new_request_id, request_id_var

access_log = logging.getLogger("ragline.access")
HEADER = b"x-request-id"
_SANE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


def route_template(scope: Scope) -> str:
    """The matched route's path template; ``<unmatched>`` for 404s (bounded labels)."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    if isinstance(path, str):
        return path
    return "<unmatched>"


class RequestContextMiddleware:
    def __init__(self, app: ASGIApp, access_log_enabled: bool = True) -> None:
        self.app = app
        self.access_log_enabled = access_log_enabled

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or ()).get(HEADER, b"").decode("latin-1")
        rid = given if _SANE_ID.match(given) else new_request_id()
        token = request_id_var.set(rid)
        scope.setdefault("state", {})["request_id"] = rid
        status = [500]
        t0 = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != HEADER]
                headers.append((HEADER, rid.encode("latin-1")))
                message["headers"] = headers
            await send(message)

        metrics.HTTP_IN_PROGRESS.inc()
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            metrics.HTTP_IN_PROGRESS.dec()
            elapsed = time.perf_counter() - t0
            self._record(scope, status[0], elapsed)
            request_id_var.reset(token)

    def _record(self, scope: Scope, status: int, elapsed: float) -> None:
        method = scope.get("method", "-")
        route = route_template(scope)
        metrics.HTTP_REQUESTS.labels(method, route, str(status)).inc()
        metrics.HTTP_LATENCY.labels(method, route).observe(elapsed)
        if self.access_log_enabled:
            client: Any = scope.get("client")
            access_log.info(
                "%s %s %d %.1fms", method, scope.get("path", ""), status, elapsed * 1000,
                extra={"method": method, "path": scope.get("path", ""), "route": route,
                       "status": status, "duration_ms": round(elapsed * 1000, 2),
                       "client": client[0] if client else None},
            )
