"""The catalog schema version: one number and one list of steps for both catalogs.

Why one: the embedded SQLite catalog and the PostgreSQL catalog hold the same
tables (the services see them through the same protocols, and ``ragline
export``/``import`` moves a data directory from one to the other), so they are
one design with two dialects. This module owns the version and the ordered
steps, by number and name; :mod:`ragline.catalog.sqlite_schema` and
:mod:`ragline.catalog.pg_schema` each implement every step (a step a dialect
does not need is an explicit no-op there), and both refuse to load if they do
not implement exactly these numbers. A database records its version in a
``schema_version`` table (same table in both); opening one migrates it forward
step by step, and one written by a newer ragline (a version above
:data:`SCHEMA_VERSION`) is refused with both numbers, never used.

:data:`TABLES` is the logical schema at :data:`SCHEMA_VERSION` (tables and
their columns); tests compare it with what each dialect really creates.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from ragline import __version__
from ragline.errors import DataFormatError


@dataclass(frozen=True, slots=True)
class Step:
    """One migration step, the same number in both dialects."""

    number: int
    name: str
    description: str


STEPS: Final[tuple[Step, ...]] = (
    Step(1, "collections", "collections and retired shards"),
    Step(2, "jobs", "ingestion jobs (PostgreSQL: the shared job queue; SQLite: the "
         "in-process job rows, ingest_jobs until step 6)"),
    Step(3, "state_keys_conversations", "ingestion state, job inputs, API keys, "
         "conversations, webhook deliveries"),
    Step(4, "source_status", "ingestion state rows get a status (ok/modified) and a "
         "first-ingested time"),
    Step(5, "connections", "named provider connections"),
    Step(6, "one_jobs_table", "one job table layout in both catalogs: SQLite's ingest_jobs "
         "becomes jobs (the queue's columns) and upload bytes wait in job_inputs"),
)
SCHEMA_VERSION: Final = STEPS[-1].number
assert [s.number for s in STEPS] == list(range(1, SCHEMA_VERSION + 1)), "steps are 1..N"

TABLES: Final[dict[str, tuple[str, ...]]] = {
    "schema_version": ("version", "description", "applied_at"),
    "collections": ("name", "metadata", "dimension", "embedding_provider", "embedding_model",
                    "shard", "created_at", "updated_at"),
    "retired_shards": ("shard", "retired_at"),
    "jobs": ("id", "kind", "payload", "status", "attempts", "max_attempts", "worker",
             "lease_until", "created_at", "started_at", "finished_at", "error", "result",
             "collection", "tenant", "counters", "warnings", "duration_s"),
    "job_inputs": ("job_id", "data"),
    "ingest_sources": ("collection", "shard", "tenant", "source_id", "origin", "source_path",
                       "source_hash", "fingerprint", "chunk_ids", "updated_at", "status",
                       "created_at"),
    "api_keys": ("id", "hash", "role", "tenant", "name", "created_at", "last_used_at",
                 "revoked_at"),
    "conversations": ("id", "tenant", "collection", "topic", "created_at", "updated_at"),
    "conversation_messages": ("conversation_id", "seq", "role", "content", "meta",
                              "created_at"),
    "webhook_deliveries": ("delivery_id", "received_at"),
    "connections": ("id", "kind", "provider", "options", "secrets", "created_at"),
}
"""Every table of the catalog at :data:`SCHEMA_VERSION`, with its columns in order."""


def pending(found: int, target: int | None = None) -> list[Step]:
    """The steps that bring a database at version ``found`` to ``target`` (default: the
    latest), in order."""
    target = SCHEMA_VERSION if target is None else target
    return [s for s in STEPS if found < s.number <= target]


def refuse_newer(found: int, where: str) -> None:
    """Raise when a database records a version this code does not know (a newer ragline
    wrote it): reading tables of an unknown layout could corrupt them."""
    if found > SCHEMA_VERSION:
        raise DataFormatError(
            f"The {where} catalog is at schema version {found}, written by a newer ragline; "
            f"this ragline ({__version__}) knows catalog schema versions up to "
            f"{SCHEMA_VERSION}. Upgrade ragline, or restore a backup taken with this version.",
            details={"found": found, "supported": SCHEMA_VERSION})


def check_implemented(dialect: str, numbers: Iterable[int]) -> None:
    """Called at import by each dialect: it must implement exactly the shared steps."""
    have = sorted(numbers)
    want = [s.number for s in STEPS]
    if have != want:  # a programming error, caught by any test that imports the module
        raise RuntimeError(f"the {dialect} catalog implements steps {have}, expected {want}")
