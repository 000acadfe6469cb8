"""``ragline ingest PATH --collection NAME``: a directory into a collection, with a progress bar.

The run is recorded as a job in the catalog like one started over HTTP (so
``GET /ingestion/status`` shows it later), but it runs in this process. Qdrant
Edge allows one process per data directory: stop the server first, or use
``POST /ingestion/trigger`` against it.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from ragline.facade import IngestSource, IngestStats, Job, job_counters


def _summary(job: Job, stats: IngestStats) -> Table:
    table = Table(title=f"ingest {job.path} → {job.collection} ({job.mode})")
    table.add_column("", style="bold")
    table.add_column("value", justify="right")
    c = job_counters(job)
    rows = [
        ("status", job.status), ("files seen", c["files_seen"]),
        ("files changed", c["files_changed"]), ("files unchanged", c["files_skipped"]),
        ("files deleted", c["files_deleted"]), ("files failed", c["files_failed"]),
        ("chunks created", c["chunks_created"]), ("chunks rewritten", c["chunks_updated"]),
        ("chunks deleted", c["chunks_deleted"]), ("texts embedded", c["texts_embedded"]),
        ("embedding calls", c["embedding_calls"]),
        ("duration", f"{job.duration_s or 0:.2f} s"),
        ("time in the embedder", f"{stats.embed_seconds:.2f} s"),
    ]
    for name, value in rows:
        table.add_row(name, str(value))
    return table


def ingest(
    path: Annotated[Path, typer.Argument(help="Directory to ingest (a book, a git checkout).")],
    collection: Annotated[str, typer.Option(help="Collection (created if missing).")],
    mode: Annotated[str, typer.Option(help="incremental, full or recreate.")] = "incremental",
    data_dir: Annotated[Path | None, typer.Option(help="Data directory (default ./data).")] = None,
    quiet: Annotated[bool, typer.Option(help="No progress bar.")] = False,
) -> None:
    """Ingest Markdown under PATH; only changed files are embedded again."""
    from ragline.cli.main import build_settings
    from ragline.errors import RaglineError
    from ragline.facade import Ragline

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    console = Console(stderr=True)
    try:
        rl = Ragline(build_settings(data_dir)).start()
    except Exception as exc:
        console.print(f"[red]cannot open the data directory:[/red] {exc}")
        raise typer.Exit(1) from exc
    try:
        last = IngestStats()
        columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("files · {task.fields[chunks]} chunks · {task.fields[rate]}"),
                   TimeElapsedColumn(), TimeRemainingColumn())
        with Progress(*columns, console=console, disable=quiet) as bar:
            task: TaskID = bar.add_task("ingest", total=None, chunks=0, rate="-")

            def show(stats: IngestStats) -> None:
                nonlocal last
                last = stats
                rate = stats.texts_embedded / stats.elapsed if stats.elapsed > 0 else 0.0
                bar.update(task, total=stats.files_total or None,
                           completed=stats.files_done,
                           chunks=stats.chunks_created + stats.chunks_updated,
                           rate=f"{rate:.0f} emb/s")

            try:
                done = rl.ingest(rl.owner(), IngestSource(
                    "directory", collection, path=str(path.resolve()), mode=mode,
                    trigger="cli"),
                    wait=True, progress=show).job
            except RaglineError as exc:
                bar.stop()
                console.print(f"[red]error:[/red] {exc.message}")
                raise typer.Exit(2) from exc
        assert done is not None
        console.print(_summary(done, last))
        for warning in done.warnings[-10:]:
            console.print(f"[yellow]warning:[/yellow] {warning}")
        if done.status != "succeeded":
            console.print(f"[red]failed:[/red] {done.error}")
            raise typer.Exit(1)
    finally:
        rl.close()
