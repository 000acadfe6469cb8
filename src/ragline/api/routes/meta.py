"""``GET /version``: what is running, for bug reports and upgrade checks."""

from __future__ import annotations

import platform
import sys
from typing import Any

from fastapi import APIRouter
from fastapi.responses import Response

from ragline import __version__
from ragline.api.deps import RL, Caller
from ragline.api.schemas_ops import VersionOut
from ragline.api.schemas_out import ok
from ragline.errors import NotFound

router = APIRouter(tags=["operations"])


@router.get("/version", responses=ok(VersionOut))
def version(rl: RL, caller: Caller) -> dict[str, Any]:
    """ragline's version, the data-directory format and catalog schema it writes, and the
    Python it runs on."""
    return {
        "name": "ragline",
        "version": __version__,
        **rl.admin.format_versions(),
        "python": sys.version.split()[0],
        "platform": platform.platform(terse=True),
    }


metrics_router = APIRouter(tags=["operations"])
METRICS_EXAMPLE = ('# HELP ragline_http_requests_total HTTP requests answered, by route '
                   'template and status.\n'
                   '# TYPE ragline_http_requests_total counter\n'
                   'ragline_http_requests_total{method="POST",route="/search",status="200"} 42\n')


@metrics_router.get("/metrics", response_class=Response,
                    responses={200: {"description": "Prometheus text format 0.0.4.", "content": {
                        "text/plain": {"schema": {"type": "string"},
                                       "example": METRICS_EXAMPLE}}}})
def prometheus_metrics(rl: RL, caller: Caller) -> Response:
    """Prometheus exposition text: HTTP, batching, store, jobs, cache (docs/operations.md).
    Admin keys only: the figures cover every tenant."""
    body, content_type = rl.admin.metrics(caller)
    return Response(body, media_type=content_type)


metrics_off_router = APIRouter()


@metrics_off_router.get("/metrics", include_in_schema=False)
def metrics_off(caller: Caller) -> None:
    """Metrics switched off: a 404 that names the setting, not a bare one."""
    raise NotFound("Metrics are off on this server (setting metrics_enabled)")
