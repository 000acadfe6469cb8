"""``ragline export`` / ``ragline import``: move collections to another setup.

The usual move is an embedded data directory to the scaled-out setup: stop the
server, ``ragline export --out dump.jsonl`` with the embedded settings, then
``ragline import dump.jsonl`` with the PostgreSQL catalog and a server store
configured (docs/scaling.md). What is carried over: services/admin/transfer.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer


def export(
    out: Annotated[Path, typer.Option(help="JSON Lines file to write.")],
    data_dir: Annotated[Path | None, typer.Option(help="Data directory (default ./data).")] = None,
    tenant: Annotated[list[str] | None, typer.Option(
        "--tenant", help="Also export this tenant (repeat); the default tenant, API keys' "
        "tenants and tenants named in collection metadata are always exported.")] = None,
) -> None:
    """Export every collection, its documents and their vectors."""
    from ragline.cli.main import build_settings
    from ragline.errors import RaglineError
    from ragline.facade import Ragline

    try:
        with Ragline(build_settings(data_dir)) as rl, out.open("w", encoding="utf-8") as f:
            counts = rl.admin.export(rl.owner(), f, tenant or [])
    except RaglineError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(json.dumps(counts, indent=2))


def import_(
    file: Annotated[Path, typer.Argument(help="A file written by `ragline export`.")],
    data_dir: Annotated[Path | None, typer.Option(help="Data directory (default ./data).")] = None,
) -> None:
    """Import an export into the configured catalog and store (collections must not exist)."""
    from ragline.cli.main import build_settings
    from ragline.errors import RaglineError
    from ragline.facade import Ragline

    try:
        with Ragline(build_settings(data_dir)) as rl, file.open(encoding="utf-8") as f:
            counts = rl.admin.import_(rl.owner(), f)
    except RaglineError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(json.dumps(counts, indent=2))
