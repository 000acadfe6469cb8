"""``ragline sources list|show|delete``: a collection's ingested sources, on a server or a
data directory (the same use cases as ``/collections/{c}/sources``)."""

from __future__ import annotations

from typing import Annotated

import typer

from ragline.cli.common import client_command, emit_json, say, table, when
from ragline.cli.target import Target

sources_app = typer.Typer(help="Ingested sources of a collection (files, uploads, texts, "
                          "URLs).", no_args_is_help=True)

Collection = Annotated[str, typer.Option(help="Collection.")]
SourceId = Annotated[str, typer.Argument(help="The source's id (e.g. a/x/README).")]


@sources_app.command("list")
@client_command
def list_cmd(target: Target, as_json: bool, collection: Collection,
             limit: Annotated[int, typer.Option(min=0, help="At most this many.")] = 1000,
             offset: Annotated[int, typer.Option(min=0, help="Skip this many.")] = 0) -> None:
    """Every source with its state, chunk count, hash and last ingestion."""
    page = target.list_sources(collection, limit=limit, offset=offset)
    if as_json:
        emit_json(page)
        return
    table(f"{collection}: {page.count} of {page.total} source(s)",
          ["source", "origin", "state", "chunks", "sha256", "updated"],
          [(s.source_id, s.origin, s.state, s.chunk_count, (s.source_hash or "-")[:12],
            when(s.updated_at)) for s in page.sources])


@sources_app.command("show")
@client_command
def show_cmd(source_id: SourceId, target: Target, as_json: bool,
             collection: Collection) -> None:
    """One source with its chunk ids and how many the store holds."""
    detail = target.get_source(collection, source_id)
    if as_json:
        emit_json(detail)
        return
    table(None, ["field", "value"],
          [("source", detail.source_id), ("path", detail.source_path),
           ("title", detail.title or ""), ("origin", detail.origin), ("state", detail.state),
           ("chunks", f"{detail.chunk_count} ({detail.chunks_in_store} in the store)"),
           ("sha256", detail.source_hash or "-"), ("updated", when(detail.updated_at))])


@sources_app.command("delete")
@client_command
def delete_cmd(source_id: SourceId, target: Target, as_json: bool,
               collection: Collection) -> None:
    """Delete a source's chunks and its ingestion state together."""
    out = target.delete_source(collection, source_id)
    say(as_json, out, f"deleted {source_id}: {out.count_deleted} chunk(s)")
