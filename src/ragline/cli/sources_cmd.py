"""``ragline sources``: list, show and delete a collection's ingested sources.

The same use cases as ``/collections/{c}/sources`` over HTTP, run in this
process on the data directory (stop the server first), as the directory's owner
in the default tenant.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from ragline.facade import Ragline

sources_app = typer.Typer(help="Ingested sources of a collection (files, uploads, texts, "
                          "URLs).", no_args_is_help=True)

DataDir = Annotated[Path | None, typer.Option(help="Data directory (default ./data).")]
Collection = Annotated[str, typer.Option(help="Collection.")]


def _open(data_dir: Path | None) -> Ragline:
    from ragline.cli.main import build_settings
    from ragline.facade import Ragline

    return Ragline(build_settings(data_dir)).start()


def _run(fn: Callable[[], None]) -> None:
    from ragline.errors import RaglineError

    try:
        fn()
    except RaglineError as exc:
        Console(stderr=True).print(f"[red]error:[/red] {exc.message}")
        raise typer.Exit(1 if exc.status == 404 else 2) from exc


@sources_app.command("list")
def list_cmd(collection: Collection, data_dir: DataDir = None,
             limit: Annotated[int, typer.Option(help="At most this many.")] = 1000) -> None:
    """Every source with its state, chunk count, hash and last ingestion."""
    def go() -> None:
        with _open(data_dir) as rl:
            sources, total = rl.list_sources(rl.owner(), collection, limit, 0)
        table = Table(title=f"{collection}: {len(sources)} of {total} source(s)")
        for col in ("source", "origin", "state", "chunks", "sha256", "updated"):
            table.add_column(col)
        for s in sources:
            table.add_row(s.source_id, s.origin, s.state, str(s.chunk_count),
                          (s.source_hash or "-")[:12], s.updated_at[:19])
        Console().print(table)
    _run(go)


@sources_app.command("show")
def show_cmd(source_id: str, collection: Collection, data_dir: DataDir = None) -> None:
    """One source with its chunk ids and how many the store holds."""
    import json
    from dataclasses import asdict

    def go() -> None:
        with _open(data_dir) as rl:
            detail = rl.get_source(rl.owner(), collection, source_id)
        typer.echo(json.dumps(asdict(detail), indent=2))
    _run(go)


@sources_app.command("delete")
def delete_cmd(source_id: str, collection: Collection, data_dir: DataDir = None) -> None:
    """Delete a source's chunks and its ingestion state together."""
    def go() -> None:
        with _open(data_dir) as rl:
            n = rl.delete_source(rl.owner(), collection, source_id)
        typer.echo(f"deleted {source_id}: {n} chunk(s)")
    _run(go)
