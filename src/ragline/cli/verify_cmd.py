"""``ragline verify``: check the data directory's ingestion state against the store.

Exit codes (for scripts and CI):

* ``0`` — consistent: nothing found, or everything found was repaired (``--repair``);
* ``1`` — problems found and left as they are (run again with ``--repair``);
* ``2`` — the check could not run (data directory in use by a server, bad
  configuration, unknown collection).

Notices (a directory source whose root is gone) are printed but do not change
the exit code. Stop the server first: a data directory belongs to one process.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from ragline.cli.common import fitted
from ragline.facade import VerifyReport


def _table(report: VerifyReport, width: int) -> Table:
    return fitted("ragline verify" + (" --repair" if report.repair else ""),
                  ["kind", "collection", "tenant", "source", "count", "what", "repaired"],
                  [(f.kind, f.collection, f.tenant or "-", f.source_id or "-", f.count,
                    f.message, ("yes" if f.repaired else "no") if f.problem else "notice")
                   for f in report.findings], width)


def verify(
    data_dir: Annotated[Path | None, typer.Option(help="Data directory (default ./data).")] = None,
    repair: Annotated[bool, typer.Option(
        "--repair", help="Fix what is found (drop stale rows, delete orphan chunks, settle "
        "rows whose chunks are gone, rewrite or remove records holding bad values); each "
        "repair is listed.")] = False,
    collection: Annotated[str | None, typer.Option(help="Only this collection.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Check ingestion state against the store; exit 0 consistent, 1 problems, 2 error."""
    from ragline.cli.main import build_settings
    from ragline.errors import RaglineError
    from ragline.facade import Ragline

    console = Console(stderr=True)
    try:
        rl = Ragline(build_settings(data_dir)).start()
    except RaglineError as exc:
        console.print(f"[red]cannot open the data directory:[/red] {exc.message}")
        raise typer.Exit(2) from exc
    try:
        report = rl.admin.verify(rl.owner(), repair=repair, collection=collection)
    except RaglineError as exc:
        console.print(f"[red]error:[/red] {exc.message}")
        raise typer.Exit(2) from exc
    finally:
        rl.close()
    if as_json:
        typer.echo(json.dumps(report.as_dict(), indent=2))
    else:
        out = Console()
        if report.findings:
            out.print(_table(report, out.width))
        left = [f for f in report.problems if not f.repaired]
        out.print(f"{report.collections} collection(s), {report.sources} source(s), "
                  f"{report.chunks} ingested chunk(s) checked: "
                  + (f"{len(left)} problem(s) left (run with --repair)" if left
                     else f"consistent ({len(report.problems)} problem(s) repaired)"
                     if report.problems else "consistent"))
    raise typer.Exit(0 if report.ok else 1)
