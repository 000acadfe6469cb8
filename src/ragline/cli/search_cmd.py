"""``ragline search QUERY --collection NAME``: on a server or a data directory."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from ragline.cli.common import client_command, emit_json, parse_json_option, table
from ragline.cli.target import Target


@client_command
def search(
    query: Annotated[str, typer.Argument(help="What to look for.")],
    target: Target, as_json: bool,
    collection: Annotated[str | None, typer.Option(
        help="Collection (default: the configured default collection).")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Results.")] = 10,
    mode: Annotated[str | None, typer.Option(help="dense, sparse or hybrid.")] = None,
    where: Annotated[str | None, typer.Option(help="Metadata filter as JSON.")] = None,
    rerank: Annotated[bool, typer.Option(
        "--rerank", help="Rescore with the cross-encoder.")] = False,
) -> None:
    """Search a collection by text (it must embed text: created with --embed)."""
    if mode not in (None, "dense", "sparse", "hybrid"):
        raise typer.BadParameter("must be dense, sparse or hybrid", param_hint="--mode")
    options: dict[str, Any] = {"rerank": True} if rerank else {}
    res = target.search(collection, query, limit=limit, mode=mode,
                        where=parse_json_option(where, "--where"), **options)
    if as_json:
        emit_json(res)
        return
    table(f"{len(res.results)} result(s) ({res.mode}, {res.took_ms:.0f} ms)",
          ["#", "score", "id", "text", "metadata"],
          [(i, f"{h.score:.4f}" if h.score is not None else "", h.id,
            h.text[:70].replace("\n", " "), json.dumps(h.metadata)[:50])
           for i, h in enumerate(res.results, start=1)])
    for w in res.warnings:
        typer.echo(f"warning: {w}", err=True)
