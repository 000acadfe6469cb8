"""The admin door (``rl.admin``): health and info, metrics, backups, export/import and
``verify``; and the keys door (``rl.keys``): who is calling, and API keys."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from ragline.catalog.keys import KeyRecord
from ragline.catalog.text_repair import unstorable_rows
from ragline.core.principal import Principal
from ragline.core.tenancy import SHARED
from ragline.doors.base import Door
from ragline.errors import InvalidInput
from ragline.observability.metrics import render as metrics_render
from ragline.services.admin.backup import BackupService
from ragline.services.admin.backup import restore as _restore
from ragline.services.admin.backup import unpack_archive as _unpack_archive
from ragline.services.admin.catalog_backup import CatalogBackupService
from ragline.services.admin.operations import HealthView
from ragline.services.admin.transfer import TransferService
from ragline.services.ingestion.verify import Finding, VerifyReport
from ragline.settings import Settings
from ragline.wiring import Services


def restore_backup(src: Path, data_dir: Path) -> dict[str, Any]:
    """Copy a backup into an empty or new data directory (no server may hold it)."""
    return _restore(src, data_dir)


def unpack_backup(archive: BinaryIO, dest: Path) -> None:
    """Unpack the .tar.gz ``POST /admin/backup`` streams into the directory ``dest``."""
    _unpack_archive(archive, dest)


class AdminDoor(Door):
    def __init__(self, services: Services, settings: Settings, *, owns_data: bool) -> None:
        """``owns_data``: this root is the data directory's one owner (an embedded
        catalog, not a store connection's root)."""
        super().__init__(services, settings)
        self._owns_data = owns_data

    # -- operations --------------------------------------------------------------------
    def health(self, caller: Principal | None = None, *, anonymous: bool = False
               ) -> dict[str, Any]:
        """The whole answer for an admin (and the library); scoped to what the caller's
        tenant may read for a user key; status, version and reranker only when
        ``anonymous`` (issue 32 item 4)."""
        # chat: whether /api/chat can answer (the console shows a clear state when not)
        chat = {"chat": {"configured": self._sv.answers.llm.configured}}
        ops = self._sv.operations
        if anonymous:
            return {**ops.health(HealthView()), **chat}
        if caller is None or caller.is_admin:
            return {**ops.health(), **chat}
        return {**ops.health(HealthView(lambda c: self._access.may_use(caller, c))), **chat}

    @staticmethod
    def format_versions() -> dict[str, int]:
        """The data-directory format and the catalog schema version this code writes."""
        from ragline.catalog.schema_version import SCHEMA_VERSION
        from ragline.datadir import FORMAT_VERSION

        return {"data_format_version": FORMAT_VERSION, "catalog_schema_version": SCHEMA_VERSION}

    def info(self, caller: Principal) -> dict[str, Any]:
        return self._sv.operations.info(self._access.read_scope(caller),
                                        lambda c: self._access.may_use(caller, c),
                                        admin=caller.is_admin)

    def metrics(self, caller: Principal) -> tuple[bytes, str]:
        """Prometheus exposition text and its content type (every tenant's figures)."""
        self._access.require_admin(caller, "read metrics")
        return metrics_render()

    def settle_pending(self) -> int:
        """Settle sources a crash left ``pending`` (``ragline serve`` does at start; issue
        32): their chunks removed, their rows dropped. Only the embedded catalog's owner
        may (with a shared catalog another process's write looks the same); ``ragline
        verify`` does not, so it still reports them. Returns how many."""
        if not self._owns_data:
            return 0
        return self._sv.verify.settle_pending()

    def verify(self, caller: Principal, *, repair: bool = False,
               collection: str | None = None) -> VerifyReport:
        """Check ingestion state against the store (``ragline verify``); ``repair`` fixes
        what it finds (see services/ingestion/verify.py)."""
        self._access.require_admin(caller, "verify the data directory")
        if collection is not None:
            self._sv.collections.get(collection)
        s = self._settings
        tenants = {k.tenant for k in self._sv.auth.list_keys(None)}
        tenants |= {t for t in (s.default_tenant, SHARED, s.public_search_tenant) if t}
        report = self._sv.verify.verify(repair=repair, collection=collection,
                                        tenants=tenants)
        catalog = self._sv.tables.sqlite
        if catalog is not None and collection is None:
            for bad in unstorable_rows(catalog, repair=repair):
                report.findings.append(Finding(
                    "unstorable_text", "", None, None, 1,
                    f"{bad.table} row '{bad.row}': {bad.field} of {bad.column} holds "
                    f"{bad.what}", repaired=repair))
        return report

    # -- backups -----------------------------------------------------------------------
    def backup(self, caller: Principal, dest: Path, *,
               include_secrets: bool = False) -> dict[str, Any]:
        """Consistent online snapshot of catalog and shards into ``dest`` (absent or empty);
        writes wait for the copy, searches do not (ragline.services.admin.backup). With a shared
        catalog: its rows as JSON and every collection in the export format
        (ragline.services.admin.catalog_backup). Connection secrets only with
        ``include_secrets``."""
        self._access.require_admin(caller, "take backups")
        if self._sv.backups is None and self._sv.tables.rows is not None:
            return self._catalog_backups().backup(dest, include_secrets=include_secrets)
        return self._backups().backup(dest, include_secrets=include_secrets)

    def backup_archive(self, caller: Principal, workdir: Path, *,
                       include_secrets: bool = False) -> Path:
        """The same snapshot as one .tar.gz under ``workdir`` (``POST /admin/backup``)."""
        self._access.require_admin(caller, "take backups")
        return self._backups().backup_archive(workdir, include_secrets=include_secrets)

    def restore_catalog(self, caller: Principal, src: Path) -> dict[str, Any]:
        """Restore a backup of a shared catalog (:meth:`backup`) into this setup, whose
        catalog must be empty (a data-directory backup: :func:`restore_backup`)."""
        self._access.require_admin(caller, "restore backups")
        return self._catalog_backups().restore(src)

    def _catalog_backups(self) -> CatalogBackupService:
        rows = self._sv.tables.rows
        if rows is None:
            raise InvalidInput("The embedded catalog is restored as a data directory: "
                               "`ragline restore SRC --data-dir DIR`")
        return CatalogBackupService(rows, self._sv.collections, self._transfer(),
                                    self._sv.tables.backend)

    def _backups(self) -> BackupService:
        backups = self._sv.backups
        if backups is None:
            raise InvalidInput("With catalog 'postgres' there is no data directory to pack: "
                               "run `ragline backup DEST` on that setup (catalog rows and "
                               "collections as JSON), or pg_dump and the store's own backups "
                               "(docs/scaling.md)")
        return backups

    # -- export / import (moving to another setup) ---------------------------------------
    def _transfer(self) -> TransferService:
        sv = self._sv
        return TransferService(sv.collections, sv.store, sv.auth.keys,
                               self._settings.default_tenant)

    def export(self, caller: Principal, out: TextIO,
               tenants: list[str] | None = None) -> dict[str, Any]:
        """Every collection with its documents and vectors as JSON Lines (see
        services/admin/transfer.py for what is and is not included); returns the counts."""
        self._access.require_admin(caller, "export data")
        return self._transfer().export(out, tenants or [])

    def import_(self, caller: Principal, lines: Iterable[str]) -> dict[str, Any]:
        """Create the collections of an export here and write its documents (vectors
        as exported: nothing is embedded again); returns the counts."""
        self._access.require_admin(caller, "import data")
        return self._transfer().import_(lines)


class KeysDoor(Door):
    """Who is calling (a network request's key), and the API keys themselves."""

    def authenticate(self, key: str | None, tenant: str | None = None, *,
                     public_ok: bool = False, role: str | None = None) -> Principal:
        """The principal of a network request (see services/admin/auth.py); ``role="user"`` lets
        an admin key act as a user (what a routing ragline sends for a user caller)."""
        return self._sv.auth.resolve(key, tenant, public_ok=public_ok, role=role)

    def known(self, key: str) -> bool:
        """``key`` was validated moments ago (memory only: cheap enough for the event loop,
        where the request guard checks a key before reading a body)."""
        return self._sv.auth.known(key)

    @property
    def enabled(self) -> bool:
        """Whether requests must carry a key (``RAGLINE_AUTH``)."""
        return self._settings.auth == "on"

    def ensure_first_admin(self) -> str | None:
        """First start of a data directory with auth on: create the first admin key, write
        it to ``<data_dir>/admin-key.txt`` (owner-only) and return it, once."""
        return self._sv.auth.ensure_first_admin(self._settings.data_dir)

    def create(self, caller: Principal, role: str, tenant: str,
               name: str = "") -> tuple[KeyRecord, str]:
        self._access.require_admin(caller, "create API keys")
        return self._sv.auth.create_key(role, tenant, name)

    def all(self, caller: Principal) -> list[KeyRecord]:
        self._access.require_admin(caller, "list API keys")
        return self._sv.auth.list_keys(self._access.tenant_filter(caller))

    def revoke(self, caller: Principal, key_id: str) -> KeyRecord:
        self._access.require_admin(caller, "revoke API keys")
        return self._sv.auth.revoke(key_id, self._access.tenant_filter(caller))
