"""Small ingestion types: modes, run counters, warnings, cancellation, results.

Kept apart from the pipeline so the job service, the CLI and the HTTP layer
can use these types without importing the write path.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal, cast

from ragline.catalog.ingest_state import COUNTERS
from ragline.errors import InvalidInput

log = logging.getLogger(__name__)

Mode = Literal["incremental", "full", "recreate"]
MODES: tuple[str, ...] = ("incremental", "full", "recreate")


@dataclass
class DocumentResult:
    """What a single-source ingestion (upload, URL, text) did."""

    source_id: str
    title: str
    chunks: int
    chunks_created: int
    texts_embedded: int
    unchanged: bool


def check_mode(mode: str) -> Mode:
    if mode not in MODES:
        raise InvalidInput(f"Invalid mode {mode!r}: use one of {', '.join(MODES)}")
    return cast(Mode, mode)



@dataclass
class IngestStats:
    """Counters of one run, updated as it goes (the job row and the CLI show them)."""

    files_total: int = 0
    files_seen: int = 0
    files_changed: int = 0
    files_skipped: int = 0
    files_deleted: int = 0
    files_failed: int = 0
    chunks_created: int = 0
    chunks_updated: int = 0
    chunks_deleted: int = 0
    texts_embedded: int = 0
    embedding_calls: int = 0
    embed_seconds: float = 0.0
    writes_acknowledged: int = 0
    """Groups the store and the state acknowledged: a job persists its progress at each."""
    started: float = field(default_factory=time.perf_counter)
    warnings: list[str] = field(default_factory=list)

    @property
    def files_done(self) -> int:
        return self.files_changed + self.files_skipped + self.files_failed

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def counters(self) -> dict[str, int]:
        return {k: int(getattr(self, k)) for k in COUNTERS}

    def warn(self, message: str) -> None:
        log.warning("%s", message)
        self.warnings.append(message)


Progress = Callable[[IngestStats], None]


@contextmanager
def capture_warnings(stats: IngestStats) -> Iterator[None]:
    """Copy parser warnings (malformed frontmatter, …) of this thread into ``stats``.

    Parsers only log; a job must also show them. Other threads' warnings (a
    concurrent job) are left out.
    """
    me = threading.get_ident()

    class _Handler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.thread == me and record.levelno >= logging.WARNING:
                stats.warnings.append(record.getMessage())

    handler = _Handler()
    logger = logging.getLogger("ragline.ingest")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
