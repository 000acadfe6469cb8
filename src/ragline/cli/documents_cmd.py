"""``ragline documents list|get|add|delete``: on a server or a data directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ragline.cli.common import client_command, emit_json, parse_json_option, say, table
from ragline.cli.target import Target
from ragline.client import models as m

documents_app = typer.Typer(help="List, read, add and delete documents.",
                            no_args_is_help=True)
BATCH = 500
Collection = Annotated[str, typer.Argument(help="Collection name.")]
Where = Annotated[str | None, typer.Option(
    help='Metadata filter as JSON, e.g. \'{"lang": "en"}\' (docs/where.md).')]


@documents_app.command("list")
@client_command
def list_(collection: Collection, target: Target, as_json: bool, where: Where = None,
          limit: Annotated[int, typer.Option(min=0, help="Documents per page.")] = 20,
          offset: Annotated[int, typer.Option(min=0, help="Documents to skip.")] = 0) -> None:
    """Documents of a collection (optionally filtered), a page at a time."""
    page = target.list_documents(collection, where=parse_json_option(where, "--where"),
                                 limit=limit, offset=offset)
    if as_json:
        emit_json(page)
        return
    table(f"{page.count} of {page.total} document(s) in {collection}",
          ["id", "text", "metadata"],
          [(d.id, d.text[:70].replace("\n", " "), json.dumps(d.metadata)[:60])
           for d in page.documents])


@documents_app.command("get")
@client_command
def get(collection: Collection, doc_id: Annotated[str, typer.Argument(help="Document id.")],
        target: Target, as_json: bool) -> None:
    """One document: its text and metadata."""
    doc = target.get_document(collection, doc_id)
    if as_json:
        emit_json(doc)
        return
    typer.echo(f"id: {doc.id}\nmetadata: {json.dumps(doc.metadata, ensure_ascii=False)}\n")
    typer.echo(doc.text)


@documents_app.command("add")
@client_command
def add(collection: Collection, target: Target, as_json: bool,
        file: Annotated[Path | None, typer.Option(
            "--file", help="JSON Lines: one {\"id\", \"text\", \"metadata\", \"embedding\"} "
            "object per line ('-' for stdin).", allow_dash=True)] = None,
        text: Annotated[str | None, typer.Option(help="One document's text.")] = None,
        doc_id: Annotated[str | None, typer.Option("--id", help="Its id.")] = None,
        metadata: Annotated[str | None, typer.Option(help="Its metadata (JSON).")] = None,
        ) -> None:
    """Add (or replace, by id) documents."""
    docs: list[dict[str, Any]] = []
    if file is not None:
        raw = typer.get_text_stream("stdin").read() if str(file) == "-" else \
            file.read_text(encoding="utf-8")
        for n, line in enumerate(raw.splitlines(), start=1):
            if line.strip():
                try:
                    docs.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise typer.BadParameter(f"line {n} is not JSON ({exc.msg})",
                                             param_hint="--file") from exc
    if text is not None:
        docs.append({"id": doc_id, "text": text,
                     "metadata": parse_json_option(metadata, "--metadata")})
    if not docs:
        raise typer.BadParameter("give --file or --text")
    ids: list[str] = []
    for start in range(0, len(docs), BATCH):  # one request per batch, not one per file
        ids += target.add_documents(collection, docs[start:start + BATCH]).ids
    out = m.DocumentsAdded(status="success", collection=collection, count=len(ids), ids=ids)
    say(as_json, out, f"added {out.count} document(s) to {collection}")


@documents_app.command("delete")
@client_command
def delete(collection: Collection, target: Target, as_json: bool,
           ids: Annotated[list[str] | None, typer.Option(
               "--id", help="A document id (repeat).")] = None,
           where: Where = None) -> None:
    """Delete documents by id or by metadata filter."""
    out = target.delete_documents(collection, ids=ids or None,
                                  where=parse_json_option(where, "--where"))
    say(as_json, out, f"deleted {out.count_deleted} document(s) from {collection}")
