"""``ragline jobs list|show|wait|rerun``: ingestion jobs on a server or a data directory."""

from __future__ import annotations

from typing import Annotated

import typer

from ragline.cli.common import FAILED, client_command, emit_json, say, table, when
from ragline.cli.target import Target
from ragline.client import models as m

jobs_app = typer.Typer(help="Ingestion jobs: list, show, wait for, re-run.",
                       no_args_is_help=True)
JobId = Annotated[str, typer.Argument(help="The job's id.")]


def _rows(jobs: list[m.Job]) -> None:
    """Jobs as a table that fits 80 columns (the mode is in ``show --json``); the errors
    of failed jobs follow it, whole."""
    table(None, ["job", "status", "collection", "files", "chunks", "created"],
          [(j.job_id, j.status, j.collection, f"{j.files_done}/{j.files_total}",
            j.chunks_created, when(j.created_at)) for j in jobs])
    for j in jobs:
        if j.error:
            typer.echo(f"{j.job_id}: {j.error}")


@jobs_app.command("list")
@client_command
def list_(target: Target, as_json: bool,
          limit: Annotated[int, typer.Option(min=1, max=200, help="Most recent N.")] = 20,
          collection: Annotated[str | None, typer.Option(help="Only this collection.")]
          = None) -> None:
    """Recent jobs, newest first."""
    jobs = target.jobs(limit=limit, collection=collection)
    if as_json:
        emit_json(m.JobList(jobs=jobs, count=len(jobs)))
    else:
        _rows(jobs)


@jobs_app.command("show")
@client_command
def show(job_id: JobId, target: Target, as_json: bool) -> None:
    """One job with its counters, progress and warnings."""
    job = target.job(job_id)
    if as_json:
        emit_json(job)
        return
    _rows([job])
    for w in job.warnings[-10:]:
        typer.echo(f"warning: {w}", err=True)


@jobs_app.command("wait")
@client_command
def wait(job_id: JobId, target: Target, as_json: bool,
         timeout: Annotated[float | None, typer.Option(help="Give up after S seconds.")]
         = None) -> None:
    """Wait for a job to finish; exit 1 if it failed."""
    job = target.wait_for_job(job_id, timeout=timeout)
    if as_json:
        emit_json(job)
    else:
        _rows([job])
    if job.status != "succeeded":
        raise typer.Exit(FAILED)


@jobs_app.command("rerun")
@client_command
def rerun(job_id: JobId, target: Target, as_json: bool) -> None:
    """Run a directory job again (admins)."""
    started = target.rerun_job(job_id)
    say(as_json, started, f"job {started.job_id} queued (re-run of {job_id})")
