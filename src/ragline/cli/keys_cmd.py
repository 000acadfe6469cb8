"""``ragline keys create|list|revoke``: API keys, on a server (admin key) or a data
directory (no server needed: deployments provision keys before the first start).

The key itself is printed once and never stored (only its hash is).
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from ragline.cli.common import client_command, emit_json, say, table, when
from ragline.cli.target import Target
from ragline.client import models as m

keys_app = typer.Typer(help="Create, list and revoke API keys.", no_args_is_help=True)


@keys_app.command("create")
@client_command
def create(
    target: Target, as_json: bool,
    role: Annotated[str, typer.Option(help="admin or user.")],
    tenant: Annotated[str, typer.Option(help="The tenant the new key acts in.")],
    name: Annotated[str, typer.Option(help="A label for people.")] = "",
) -> None:
    """Create a key and print it once."""
    made = target.create_key(role, tenant, name)
    if as_json:
        emit_json(made)
        return
    typer.echo(made.key)
    Console(stderr=True).print(f"key {made.id} ({made.role}, tenant {made.tenant}) created; "
                               "it is shown only now")


@keys_app.command("list")
@client_command
def list_keys(target: Target, as_json: bool) -> None:
    """Every key with its role, tenant and times (never the secret)."""
    keys = target.list_keys()
    if as_json:
        emit_json(m.KeyList(keys=keys, count=len(keys)))
        return
    table(None, ["id", "role", "tenant", "name", "created", "last used", "revoked"],
          [(k.id, k.role, k.tenant, k.name, when(k.created_at), when(k.last_used_at),
            when(k.revoked_at)) for k in keys])


@keys_app.command("revoke")
@client_command
def revoke(key_id: Annotated[str, typer.Argument(help="The key's id.")],
           target: Target, as_json: bool) -> None:
    """Revoke a key: it stops working at once."""
    rec = target.revoke_key(key_id)
    say(as_json, rec, f"revoked {rec.id}")
