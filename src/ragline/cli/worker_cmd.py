"""``ragline worker``: run queued ingestion jobs from the shared PostgreSQL queue.

Needs ``RAGLINE_CATALOG=postgres`` (the embedded catalog runs its jobs inside
``ragline serve``). Start as many as the embedder keeps busy, on any machine
that reaches PostgreSQL and the store (and, for directory jobs, sees the same
paths). SIGTERM or Ctrl-C stops it gracefully: a directory job stops at its
next checkpoint and goes back to the queue for another worker; a second signal
exits at once (the job's lease then lapses and another worker retries it, as
after a SIGKILL).
"""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer

log = logging.getLogger("ragline")


def worker(
    data_dir: Annotated[Path | None, typer.Option(
        help="Data directory (models cache; default ./data).")] = None,
    log_level: Annotated[str | None, typer.Option(
        help="debug, info, warning or error (default info).")] = None,
    log_format: Annotated[str | None, typer.Option(help="text or json.")] = None,
    exit_when_idle: Annotated[bool, typer.Option(
        "--exit-when-idle", help="Exit once no job is queued or running anywhere "
        "(batch runs, tests).")] = False,
) -> None:
    """Run ingestion jobs from the shared queue until SIGTERM/Ctrl-C."""
    from ragline.cli.main import build_settings
    from ragline.errors import RaglineError
    from ragline.facade import Ragline
    from ragline.observability.logs import configure_logging

    settings = build_settings(data_dir, log_level=log_level, log_format=log_format)
    configure_logging(settings.log_level, settings.log_format)
    rl = Ragline(settings)
    try:
        rl.start()
    except Exception as exc:
        log.critical("worker start-up failed: %s", exc)
        raise typer.Exit(1) from exc
    signals = [0]
    ingestion = rl.ingestion  # the door, kept: a signal may come after close()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        signals[0] += 1
        if signals[0] > 1:  # asked twice: leave now, the lease hands the job on
            os._exit(1)
        log.info("worker stopping (%s): the running job stops at its next checkpoint",
                 signal.Signals(signum).name)
        ingestion.stop_work()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        log.info("worker ready: taking ingestion jobs from the shared queue")
        done = ingestion.work(rl.owner(), exit_when_idle=exit_when_idle)
    except RaglineError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(2) from exc
    finally:
        rl.close()
    log.info("worker stopped after %d job(s)", done)
