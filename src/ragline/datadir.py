"""The data directory's format version: written once, migrated forward, checked on open.

Why: a data directory outlives the code that wrote it (upgrades, restores of old
backups). ``ragline-format.json`` records the layout version. Opening a
directory from an older ragline runs the migrations in :data:`MIGRATIONS` one
step at a time; a directory from a *newer* ragline is refused, because reading
a layout we do not know could corrupt it.

Version history:

* 0 - no version file (ragline before 0.1.0's operations work); same layout as 1.
* 1 - ``catalog.sqlite3`` + ``collections/<shard>/`` (one Qdrant Edge shard
  each) + ``uploads/``, and this file.
* 2 - the catalog records its schema version (shared with the PostgreSQL
  catalog, :mod:`ragline.catalog.schema_version`) and keeps waiting uploads in
  its ``job_inputs`` table, so ``uploads/`` is gone. The catalog migrates its
  own tables when it opens; this version exists so that a ragline from before it,
  which would misread the migrated catalog (its job table was renamed), refuses
  the directory instead.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Final

from ragline import __version__
from ragline.errors import DataFormatError

log = logging.getLogger(__name__)

FORMAT_FILE: Final = "ragline-format.json"
FORMAT_VERSION: Final = 2


def _v0_to_v1(data_dir: Path) -> None:
    """Version 0 had the same files; only the version file is new."""


def _v1_to_v2(data_dir: Path) -> None:
    """Nothing to move: the catalog migrates its tables on open (it refuses a newer
    schema by itself), and job inputs left in ``uploads/`` belong to jobs a restart
    fails anyway (start-up removes them)."""


# MIGRATIONS[n] turns a version-n directory into version n+1 (in place, idempotent).
MIGRATIONS: dict[int, Callable[[Path], None]] = {0: _v0_to_v1, 1: _v1_to_v2}


def read_version(data_dir: Path) -> int | None:
    """The recorded version, 0 for an unversioned directory with data, None if empty."""
    path = data_dir / FORMAT_FILE
    if path.is_file():
        try:
            return int(json.loads(path.read_text())["format_version"])
        except (ValueError, KeyError, TypeError) as exc:
            raise DataFormatError("The data directory's format file is unreadable") from exc
    if (data_dir / "catalog.sqlite3").exists() or (data_dir / "collections").exists():
        return 0
    return None


def write_version(data_dir: Path, version: int = FORMAT_VERSION) -> None:
    """Write the version file atomically (temp file + rename)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    tmp = data_dir / (FORMAT_FILE + ".tmp")
    tmp.write_text(json.dumps({"format_version": version, "written_by": __version__}) + "\n")
    os.replace(tmp, data_dir / FORMAT_FILE)


def ensure_format(data_dir: Path) -> int:
    """Check, migrate forward or initialise the directory; return the version now on disk."""
    found = read_version(data_dir)
    if found is None:
        write_version(data_dir)
        return FORMAT_VERSION
    if found > FORMAT_VERSION:
        raise DataFormatError(
            f"The data directory has format version {found}, written by a newer ragline; "
            f"this ragline ({__version__}) reads versions up to {FORMAT_VERSION}. "
            "Upgrade ragline, or restore a backup taken with this version."
        )
    while found < FORMAT_VERSION:
        log.info("migrating the data directory from format %d to %d", found, found + 1)
        MIGRATIONS[found](data_dir)
        found += 1
        write_version(data_dir, found)
    return found

