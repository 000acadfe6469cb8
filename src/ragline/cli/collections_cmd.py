"""``ragline collections list|show|create|delete|empty``: on a server or a data directory."""

from __future__ import annotations

from typing import Annotated

import typer

from ragline.cli.common import (
    Yes,
    client_command,
    emit_json,
    parse_json_option,
    say,
    table,
    when,
)
from ragline.cli.target import Target
from ragline.client import models as m

collections_app = typer.Typer(help="List, create and delete collections.",
                              no_args_is_help=True)
Name = Annotated[str, typer.Argument(help="Collection name.")]


def _show(cols: list[m.Collection], title: str | None = None) -> None:
    table(title, ["name", "documents", "dimension", "embedding", "metadata", "updated"],
          [(c.name, c.count, c.dimension,
            f"{c.embed['provider']}:{c.embed.get('model') or 'default'}" if c.embed else "",
            ", ".join(f"{k}={v}" for k, v in c.metadata.items())[:60], when(c.updated_at))
           for c in cols])


@collections_app.command("list")
@client_command
def list_(target: Target, as_json: bool) -> None:
    """Every collection you can see, with its document count."""
    cols = target.list_collections()
    if as_json:
        emit_json(m.CollectionList(collections=cols, count=len(cols)))
    else:
        _show(cols, f"{len(cols)} collection(s) at {target.where}")


@collections_app.command("show")
@client_command
def show(name: Name, target: Target, as_json: bool) -> None:
    """One collection."""
    col = target.get_collection(name)
    if as_json:
        emit_json(col)
    else:
        _show([col])


@collections_app.command("create")
@client_command
def create(
    name: Name, target: Target, as_json: bool,
    metadata: Annotated[str | None, typer.Option(help="Metadata as a JSON object.")] = None,
    embed: Annotated[str | None, typer.Option(
        help="Embedding provider ragline runs for this collection (e.g. local); without "
        "it, documents must carry embeddings.")] = None,
    embed_model: Annotated[str | None, typer.Option(help="Model of that provider.")] = None,
) -> None:
    """Create a collection."""
    meta = parse_json_option(metadata, "--metadata")
    if meta is not None and not isinstance(meta, dict):
        raise typer.BadParameter("must be a JSON object", param_hint="--metadata")
    col = target.create_collection(name, meta, embed_provider=embed, embed_model=embed_model)
    say(as_json, col, f"created {col.name}")


@collections_app.command("delete")
@client_command
def delete(name: Name, target: Target, as_json: bool,
           yes: Yes = False) -> None:
    """Delete a collection and all its documents."""
    if not yes and not as_json:
        typer.confirm(f"Delete collection '{name}' and all its documents?", abort=True)
    deleted = target.delete_collection(name)
    say(as_json, {"status": "deleted", "collection": deleted}, f"deleted {deleted}")


@collections_app.command("empty")
@client_command
def empty(name: Name, target: Target, as_json: bool,
          yes: Yes = False) -> None:
    """Delete every document of a collection, keeping the collection."""
    if not yes and not as_json:
        typer.confirm(f"Delete every document of '{name}'?", abort=True)
    out = target.empty_collection(name)
    say(as_json, out, f"emptied {name}: {out.count_deleted} document(s) deleted")
