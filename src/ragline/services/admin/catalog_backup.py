"""Backup and restore of a scaled-out setup (a shared catalog and a server store).

There is no data directory to copy there, so a backup is a directory of JSON:

* ``catalog.json`` - every catalog row that a restore needs (API keys, named
  connections, conversations, ingestion state, job history, webhook deliveries,
  and the collections with the shards they had), read in one consistent snapshot
  of the catalog (:mod:`ragline.catalog.pg_rows`);
* ``collections.jsonl`` - every collection with its documents and vectors, in the
  ``ragline export`` format (:mod:`ragline.services.admin.transfer`), for every tenant
  the catalog names (keys, ingestion state, conversations, jobs, metadata);
* ``backup.json`` - what, when, by which version, at which catalog schema version.

Consistency: the catalog rows are one snapshot; the documents are read after it,
collection by collection, while other processes may go on writing. A write made
during the backup may be in the documents and not in the ingestion state (the
next incremental run writes it again: harmless) or the reverse (``ragline verify``
finds it). For a point-in-time copy stop the workers and API processes, or use
``pg_dump`` and the store's own snapshots.

Restore writes into an empty catalog (no collections, no rows): it imports the
collections (new shards), then loads the rows in one transaction, the ingestion
state moved to the new shards. A backup from a newer catalog schema is refused.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ragline import __version__
from ragline.catalog.schema_version import SCHEMA_VERSION, refuse_newer
from ragline.catalog.sqlite import now_iso
from ragline.catalog.tables import CatalogRows
from ragline.errors import Conflict, InvalidInput
from ragline.services.admin.transfer import TransferService
from ragline.services.corpus.collections import CollectionService

log = logging.getLogger(__name__)

KIND = "ragline-catalog-rows"
MANIFEST = "backup.json"
ROWS = "catalog.json"
DOCUMENTS = "collections.jsonl"


def _no_secrets(value: Any) -> Any:
    """No secrets, in the form the row held them (JSON text or an object)."""
    return "{}" if isinstance(value, str) else {}


class CatalogBackupService:
    def __init__(self, rows: CatalogRows, collections: CollectionService,
                 transfer: TransferService, backend: str) -> None:
        self.rows = rows
        self.collections = collections
        self.transfer = transfer
        self.backend = backend

    def backup(self, dest: Path, *, include_secrets: bool = False) -> dict[str, Any]:
        """Write the backup into ``dest`` (absent or empty); return its manifest.
        Named connections' secrets are left out unless ``include_secrets`` (issue 32)."""
        if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
            raise InvalidInput("The backup destination exists and is not empty")
        dest.parent.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=f".{dest.name}.partial-", dir=dest.parent))
        try:
            started = now_iso()
            rows = self.rows.dump()
            if not include_secrets:
                rows["connections"] = [{**r, "secrets": _no_secrets(r.get("secrets"))}
                                       for r in rows.get("connections", [])]
            (stage / ROWS).write_text(json.dumps({"schema_version": SCHEMA_VERSION,
                                                  "tables": rows}) + "\n")
            named = {r["tenant"] for t in ("api_keys", "ingest_sources", "conversations",
                                           "jobs") for r in rows.get(t, []) if r.get("tenant")}
            with (stage / DOCUMENTS).open("w", encoding="utf-8") as out:
                exported = self.transfer.export(out, sorted(named))
            manifest = {
                "kind": KIND, "ragline_version": __version__, "catalog": self.backend,
                "catalog_schema_version": SCHEMA_VERSION, "started_at": started,
                "finished_at": now_iso(),
                "collections": sorted(exported["documents"]), "tenants": exported["tenants"],
                "documents": exported["documents"],
                "rows": {table: len(items) for table, items in rows.items()},
                "connection_secrets": "included" if include_secrets else "omitted",
            }
            (stage / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
            if dest.exists():
                dest.rmdir()  # empty, checked above
            os.replace(stage, dest)
        except BaseException:
            shutil.rmtree(stage, ignore_errors=True)
            raise
        log.info("catalog backup written: %d collection(s)", len(manifest["collections"]))
        return manifest

    @staticmethod
    def check(src: Path) -> dict[str, Any]:
        """The backup's manifest, after checking it is one this ragline can restore."""
        try:
            manifest: dict[str, Any] = json.loads((src / MANIFEST).read_text())
        except (OSError, ValueError) as exc:
            raise InvalidInput("Not a ragline backup (no readable backup.json)") from exc
        if manifest.get("kind") != KIND:
            raise InvalidInput("Not a backup of a shared catalog (take it with `ragline "
                               "backup` on the PostgreSQL setup; a data-directory backup "
                               "is restored with the embedded catalog)")
        if not (src / ROWS).is_file() or not (src / DOCUMENTS).is_file():
            raise InvalidInput("The backup is incomplete (catalog.json or collections.jsonl "
                               "is missing)")
        refuse_newer(int(manifest.get("catalog_schema_version", 0)), "backed-up")
        return manifest

    def restore(self, src: Path) -> dict[str, Any]:
        """Restore the backup at ``src`` into this (empty) catalog and store."""
        manifest = self.check(src)
        if not self.rows.is_empty():
            raise Conflict("The catalog is not empty; restore only into an empty catalog "
                           "(a new database or db_schema)")
        dump = json.loads((src / ROWS).read_text())
        tables: dict[str, list[dict[str, Any]]] = dump.get("tables") or {}
        with (src / DOCUMENTS).open(encoding="utf-8") as lines:
            imported = self.transfer.import_(lines)
        shards = {}
        for row in tables.get("collections", []):
            now = self.collections.find(row["name"])
            if now is not None:
                shards[row["shard"]] = now.shard
        loaded = self.rows.load(tables, shards)
        log.info("catalog backup restored: %d collection(s)", len(shards))
        return {**manifest, "restored": {"documents": imported["documents"], "rows": loaded}}
