"""``ragline ingest PATH --collection NAME``: a directory into a collection, with a progress bar.

With no server, the run is recorded as a job in the catalog like one started over
HTTP (so ``GET /ingestion/status`` shows it later) but runs in this process. With a
server (``--url``, or the one holding the data directory: one process per data
directory), it is a job of that server, followed until it ends.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Annotated, Any

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

from ragline.cli.common import FAILED, client_command, emit_json
from ragline.cli.target import LocalTarget, ServerTarget, Target, job_model
from ragline.client import models as m
from ragline.errors import InvalidInput
from ragline.facade import IngestSource, IngestStats, Job, job_counters, tree_sources
from ragline.settings import Settings


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


DIRECTORY_JOB_OFF = "ingestion root"  # the server's refusal of directory paths over HTTP


@client_command
def ingest(
    path: Annotated[Path, typer.Argument(help="Directory to ingest (a book, a git checkout).")],
    target: Target, as_json: bool, settings: Settings,
    collection: Annotated[str, typer.Option(help="Collection (created if missing).")],
    mode: Annotated[str, typer.Option(help="incremental, full or recreate.")] = "incremental",
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar.")] = False,
    wait: Annotated[bool, typer.Option(
        "--wait/--no-wait", help="With a server: wait for the job (--no-wait: print its "
        "id).")] = True,
) -> None:
    """Ingest Markdown under PATH; only changed files are embedded again.

    With a server (``--url``, or one holding the data directory) the directory becomes a
    job on that server when it may read the path (RAGLINE_INGEST_ALLOWED_ROOTS); otherwise
    each file is uploaded to it with its path in the tree, so it gets the same source id
    either way. With no server the data directory is opened here.
    """
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    console = Console(stderr=True)
    if not path.is_dir():
        raise typer.BadParameter("does not exist or is not a directory", param_hint="PATH")
    if isinstance(target, LocalTarget):
        here = _ingest_here(target, path, collection, mode, quiet, console)
        if as_json:
            emit_json(job_model(here))
        return
    try:
        started = target.ingest_directory(str(path.resolve()), collection, mode=mode)
    except InvalidInput as exc:
        if DIRECTORY_JOB_OFF not in exc.message:
            raise
        console.print(f"the server does not read this directory ({exc.message}); uploading "
                      "each file with its path instead", highlight=False, markup=False)
        _upload_each(target, tree_sources(path, settings.ingest_patterns), collection,
                     quiet, console, as_json)
        return
    if not wait:
        emit_json(started) if as_json else typer.echo(started.job_id)
        return
    job = _follow(target, started.job_id, quiet, console)
    if as_json:
        emit_json(job)
    else:
        console.print(f"job {job.job_id} {job.status}: {job.files_done}/{job.files_total} "
                      f"files, {job.chunks_created} chunks created")
    if job.status != "succeeded":
        console.print(f"[red]failed:[/red] {job.error}")
        raise typer.Exit(FAILED)


def _columns() -> tuple[Any, ...]:
    return (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("files · {task.fields[chunks]} chunks · {task.fields[rate]}"),
            TimeElapsedColumn(), TimeRemainingColumn())


def _follow(target: ServerTarget, job_id: str, quiet: bool, console: Console) -> m.Job:
    """Poll the server's job until it is finished, with a progress bar."""
    with Progress(*_columns(), console=console, disable=quiet) as bar:
        task = bar.add_task(f"job {job_id[:8]}", total=None, chunks=0, rate="-")
        while True:
            job = target.job(job_id)
            rate = job.model_extra.get("rate_files_per_s") if job.model_extra else None
            bar.update(task, total=job.files_total or None, completed=job.files_done,
                       chunks=job.chunks_created, rate=f"{rate or 0:.1f} files/s")
            if job.finished:
                return job
            time.sleep(0.5)


def _upload_each(target: ServerTarget, tree: dict[str, tuple[str, Path]],
                 collection: str, quiet: bool, console: Console, as_json: bool) -> None:
    """Upload the files a directory job would read (RAGLINE_INGEST_PATTERNS), each with its
    relative path, so each becomes the source it would have been (same source id)."""
    files = list(tree.values())
    results: list[dict[str, Any]] = []
    failed = 0
    with Progress(*_columns(), console=console, disable=quiet) as bar:
        task = bar.add_task("upload", total=len(files), chunks=0, rate="-")
        chunks = 0
        for rel, f in files:
            try:
                done = target.ingest_upload(f.name, f.read_bytes(), collection=collection,
                                            path=rel)
            except InvalidInput as exc:
                if "Unsupported file type" not in exc.message:
                    failed += 1
                    console.print(f"[yellow]{rel}:[/yellow] {exc.message}")
                results.append({"path": rel, "skipped": exc.message})
            else:
                chunks += done.chunks_created or 0
                results.append({"path": rel, **done.model_dump(mode="json", by_alias=True)})
            bar.update(task, advance=1, chunks=chunks)
    if as_json:
        emit_json({"collection": collection, "files": results, "failed": failed})
    else:
        console.print(f"uploaded {len(files)} file(s) to {collection}: {chunks} chunks, "
                      f"{failed} failed")
    if failed:
        raise typer.Exit(FAILED)


def _ingest_here(target: LocalTarget, path: Path, collection: str, mode: str, quiet: bool,
                 console: Console) -> Job:
    rl = target.rl
    last = IngestStats()
    with Progress(*_columns(), console=console, disable=quiet) as bar:
        task: TaskID = bar.add_task("ingest", total=None, chunks=0, rate="-")

        def show(stats: IngestStats) -> None:
            nonlocal last
            last = stats
            rate = stats.texts_embedded / stats.elapsed if stats.elapsed > 0 else 0.0
            bar.update(task, total=stats.files_total or None, completed=stats.files_done,
                       chunks=stats.chunks_created + stats.chunks_updated,
                       rate=f"{rate:.0f} emb/s")

        try:
            done = rl.ingestion.submit(target.me, IngestSource(
                "directory", collection, path=str(path.resolve()), mode=mode, trigger="cli"),
                wait=True, progress=show).job
        finally:
            bar.stop()
    assert done is not None
    console.print(_summary(done, last))
    for warning in done.warnings[-10:]:
        console.print(f"[yellow]warning:[/yellow] {warning}")
    if done.status != "succeeded":
        console.print(f"[red]failed:[/red] {done.error}")
        raise typer.Exit(FAILED)
    return done
