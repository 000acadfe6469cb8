"""``/mcp`` when the ``mcp`` package is not installed: a clear 503, not a bare 404.

The answer names the extra to install, after the same authentication as every other
endpoint (a caller without a key learns nothing about the server's packages)."""

from __future__ import annotations

from fastapi import FastAPI

from ragline.api.deps import Caller
from ragline.errors import ServiceUnavailable

MCP_MISSING = ("MCP is not installed on this server: install the extra ragline[mcp] "
               "(pip install 'ragline[mcp]'; `make serve` installs it) and restart")


def install(app: FastAPI) -> None:
    async def mcp_missing(caller: Caller) -> None:
        raise ServiceUnavailable(MCP_MISSING)

    app.add_api_route("/mcp", mcp_missing, include_in_schema=False,
                      methods=["GET", "POST", "DELETE"])
