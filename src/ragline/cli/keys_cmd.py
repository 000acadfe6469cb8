"""``ragline keys create|list|revoke``: API keys on a data directory, no server needed.

Deployments provision keys before the first start; the key itself is printed once
and never stored (only its hash is).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

keys_app = typer.Typer(help="Create, list and revoke API keys.", no_args_is_help=True)

DataDir = Annotated[Path | None, typer.Option(help="Data directory (default ./data).")]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def _open(data_dir: Path | None):  # type: ignore[no-untyped-def]
    from ragline.cli.main import build_settings
    from ragline.errors import RaglineError
    from ragline.facade import Ragline

    try:
        return Ragline(build_settings(data_dir)).start()
    except RaglineError as exc:
        Console(stderr=True).print(f"[red]error:[/red] {exc.message}")
        raise typer.Exit(1) from exc


@keys_app.command("create")
def create(
    role: Annotated[str, typer.Option(help="admin or user.")],
    tenant: Annotated[str, typer.Option(help="The tenant the key acts in.")],
    name: Annotated[str, typer.Option(help="A label for people.")] = "",
    data_dir: DataDir = None,
    as_json: AsJson = False,
) -> None:
    """Create a key and print it once."""
    from ragline.errors import RaglineError

    rl = _open(data_dir)
    try:
        rec, key = rl.create_key(rl.owner(), role, tenant, name)
    except RaglineError as exc:
        Console(stderr=True).print(f"[red]error:[/red] {exc.message}")
        raise typer.Exit(2) from exc
    finally:
        rl.close()
    if as_json:
        typer.echo(json.dumps({"id": rec.id, "key": key, "role": rec.role,
                               "tenant": rec.tenant}))
    else:
        typer.echo(key)
        Console(stderr=True).print(f"key {rec.id} ({rec.role}, tenant {rec.tenant}) created; "
                                   "it is shown only now")


@keys_app.command("list")
def list_keys(data_dir: DataDir = None, as_json: AsJson = False) -> None:
    """Every key with its role, tenant and times (never the secret)."""
    rl = _open(data_dir)
    try:
        keys = rl.list_keys(rl.owner())
    finally:
        rl.close()
    if as_json:
        typer.echo(json.dumps([asdict(k) for k in keys]))
        return
    table = Table("id", "role", "tenant", "name", "created", "last used", "revoked")
    for k in keys:
        table.add_row(k.id, k.role, k.tenant, k.name, k.created_at[:19],
                      (k.last_used_at or "")[:19], (k.revoked_at or "")[:19])
    Console().print(table)


@keys_app.command("revoke")
def revoke(key_id: Annotated[str, typer.Argument(help="The key's id.")],
           data_dir: DataDir = None) -> None:
    """Revoke a key: it stops working at once."""
    from ragline.errors import RaglineError

    rl = _open(data_dir)
    try:
        rec = rl.revoke_key(rl.owner(), key_id)
    except RaglineError as exc:
        Console(stderr=True).print(f"[red]error:[/red] {exc.message}")
        raise typer.Exit(2) from exc
    finally:
        rl.close()
    typer.echo(f"revoked {rec.id}")
