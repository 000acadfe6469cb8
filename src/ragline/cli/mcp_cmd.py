"""``ragline mcp``: the MCP server over stdio, for agents that start ragline themselves.

This process opens the data directory itself (Qdrant Edge allows one process
per directory): point agents at a running server's ``/mcp`` instead when
``ragline serve`` is up. stdout carries the protocol, so logs go to stderr.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated

import typer

from ragline.settings import hub_offline


def mcp(
    data_dir: Annotated[Path | None, typer.Option(help="Data directory (default ./data).")] = None,
    api_key: Annotated[str | None, typer.Option(
        "--api-key", help="Act as this key's tenant (default: the default tenant).")] = None,
    log_level: Annotated[str, typer.Option(help="debug, info, warning or error.")] = "warning",
) -> None:
    """Serve the MCP tools (search, context, sources, ingestion) over stdio."""
    logging.basicConfig(level=log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    hub_offline()
    try:
        from ragline.api.mcp_server.auth import stdio_principal
        from ragline.api.mcp_server.server import build_server
    except ImportError as exc:
        typer.echo(f"ragline mcp needs the 'mcp' package: pip install 'ragline[mcp]' ({exc})",
                   err=True)
        raise typer.Exit(2) from exc
    from ragline.cli.main import build_settings
    from ragline.facade import Ragline

    with Ragline(build_settings(data_dir)) as rl:
        server = build_server(lambda: rl, stdio_principal(rl, api_key))
        server.run("stdio")
