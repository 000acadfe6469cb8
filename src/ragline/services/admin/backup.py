"""Online backup and restore of a data directory.

A backup is a directory (``ragline backup DEST``) or, over HTTP, a .tar.gz of one:

* ``catalog.sqlite3`` - SQLite's online backup API, so the copy is a consistent
  database even while the server reads and writes;
* ``collections/<shard>/`` - every shard, flushed and copied by the store;
* ``ragline-format.json`` - the data-directory format (``ragline.datadir``);
* ``backup.json`` - when, by which version, which collections, and whether the
  named connections' secrets are in it (``connection_secrets``).

Connection secrets (a remote server's admin key, an embedder's API key) are left out
unless asked for (``include_secrets``; ``ragline backup --include-secrets``): the copied
catalog's ``connections.secrets`` are emptied before the copy is finished, so a backup
handed to storage does not carry another server's admin key in clear text (issue 32).
A connection restored without its secret is re-added with it.

Consistency: the catalog's write lock is held while both are copied (catalog
first, then the store's locks: the order every writer uses), so catalog rows
and shards agree, and every write acknowledged before the backup began is in it.
Writes wait for the copy (seconds per GB on a local disk); searches do not.
Inputs of queued jobs come along in the catalog (``job_inputs``), but such jobs
are marked interrupted, and their inputs dropped, when a server starts on the
restored directory.

Restore copies a backup into a data directory that is empty or absent, never
over existing data, through a temporary sibling and one rename.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sqlite3
import tarfile
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any, BinaryIO

from ragline import __version__
from ragline.catalog.sqlite import Catalog, now_iso
from ragline.core.sparse import add_sparse, copy_sparse, extract_sparse
from ragline.datadir import FORMAT_VERSION, read_version, write_version
from ragline.errors import DataDirNotEmpty, DataFormatError, InvalidInput, StoreError
from ragline.providers.stores.base import VectorStore

log = logging.getLogger(__name__)

MANIFEST = "backup.json"
CATALOG = "catalog.sqlite3"
SHARDS = "collections"


def _is_empty(path: Path) -> bool:
    return not path.exists() or (path.is_dir() and not any(path.iterdir()))


class BackupService:
    def __init__(self, catalog: Catalog, store: VectorStore) -> None:
        self.catalog = catalog
        self.store = store

    def backup(self, dest: Path, *, include_secrets: bool = False) -> dict[str, Any]:
        """Write a consistent snapshot into ``dest`` (absent or empty); return its manifest.
        Connection secrets are emptied in the copy unless ``include_secrets``."""
        if not _is_empty(dest):
            raise InvalidInput("The backup destination exists and is not empty")
        snapshot = getattr(self.store, "snapshot", None)
        if snapshot is None:
            raise StoreError("This vector store does not support online backup")
        dest.parent.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=f".{dest.name}.partial-", dir=dest.parent))
        t0 = time.perf_counter()
        try:
            with self.catalog.frozen():
                started = now_iso()
                self.catalog.backup_to(stage / CATALOG)
                shards = snapshot(stage / SHARDS)
                names = [c.name for c in self.catalog.list_collections()]
            froze_s = time.perf_counter() - t0
            if not include_secrets:
                omit_connection_secrets(stage / CATALOG)
            write_version(stage, FORMAT_VERSION)
            manifest = {
                "ragline_version": __version__, "format_version": FORMAT_VERSION,
                "started_at": started, "finished_at": now_iso(),
                "writes_paused_s": round(froze_s, 3), "shards": shards,
                "collections": names,
                "connection_secrets": "included" if include_secrets else "omitted",
            }
            (stage / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
            if dest.exists():
                dest.rmdir()  # empty, checked above
            os.replace(stage, dest)
        except BaseException:
            shutil.rmtree(stage, ignore_errors=True)
            raise
        log.info("backup written: %d shard(s), writes paused %.2f s", len(shards), froze_s)
        return manifest

    def backup_archive(self, workdir: Path, *, include_secrets: bool = False) -> Path:
        """A backup packed as one .tar.gz under ``workdir`` (for the HTTP endpoint).

        The shards' preallocated sparse files go in as GNU sparse members (their
        data ranges and a map; :func:`~ragline.core.sparse.add_sparse`), so the
        archive holds no runs of zeros to read and compress; gzip level 1.
        """
        snap = workdir / "backup"
        self.backup(snap, include_secrets=include_secrets)
        archive = workdir / "ragline-backup.tar.gz"
        with tarfile.open(archive, "w:gz", compresslevel=1,
                          format=tarfile.PAX_FORMAT) as tar:
            _add_tree(tar, snap)
        shutil.rmtree(snap, ignore_errors=True)
        return archive


def omit_connection_secrets(catalog_copy: Path) -> None:
    """Empty every named connection's secrets in a copied catalog, and vacuum it so the
    old values are not left in free pages."""
    db = sqlite3.connect(catalog_copy)
    try:
        with db:
            db.execute("UPDATE connections SET secrets = '{}'")
        db.execute("VACUUM")
    finally:
        db.close()


def _add_tree(tar: tarfile.TarFile, root: Path) -> None:
    """Every directory and regular file under ``root``, in a stable order, named
    relative to it (``./...``); sparse files as sparse members."""
    tar.add(root, arcname=".", recursive=False)
    for here, dirs, files in os.walk(root):
        dirs.sort()
        rel = Path(here).relative_to(root)
        for d in dirs:
            tar.add(Path(here) / d, arcname=f"./{(rel / d).as_posix()}", recursive=False)
        for name in sorted(files):
            path = Path(here) / name
            if not path.is_file() or path.is_symlink():
                raise StoreError("The backup holds something other than files")
            add_sparse(tar, path, f"./{(rel / name).as_posix()}")


def unpack_archive(archive: BinaryIO, dest: Path) -> None:
    """Unpack a backup tar (stream) into ``dest``: regular files and directories only,
    no path leaving ``dest``, sparse members' data ranges only and other files' zero runs
    as holes (sparse, like the original). A damaged or truncated archive is an
    :class:`InvalidInput` naming the member it broke in, not a tarfile traceback."""
    dest.mkdir(parents=True, exist_ok=True)
    root = dest.resolve()
    where = "its start"
    try:
        with tarfile.open(fileobj=archive, mode="r|*") as tar:
            for member in tar:
                where = member.name
                target = (dest / member.name).resolve()
                if target != root and root not in target.parents:
                    raise InvalidInput("The backup archive has a path outside its root")
                if member.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                elif member.isfile():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with open(target, "wb") as out:
                        extract_sparse(tar, member, out)
                else:
                    raise InvalidInput("The backup archive holds something other than files")
    except (tarfile.TarError, EOFError, zlib.error, ValueError) as exc:
        raise InvalidInput(f"The backup archive is damaged or truncated (at {where}: "
                           f"{exc})") from exc


def check_backup(src: Path) -> dict[str, Any]:
    """The backup's manifest, after checking it is one this ragline can restore."""
    try:
        manifest: dict[str, Any] = json.loads((src / MANIFEST).read_text())
    except (OSError, ValueError) as exc:
        raise InvalidInput("Not a ragline backup (no readable backup.json)") from exc
    if not (src / CATALOG).is_file():
        raise InvalidInput("The backup has no catalog; it is incomplete")
    version = read_version(src)
    if version is not None and version > FORMAT_VERSION:
        raise DataFormatError(
            f"The backup has format version {version}, written by a newer ragline; this "
            f"ragline ({__version__}) restores versions up to {FORMAT_VERSION}. Upgrade ragline."
        )
    return manifest


def restore(src: Path, data_dir: Path) -> dict[str, Any]:
    """Copy the backup at ``src`` into ``data_dir``, which must be empty or absent."""
    manifest = check_backup(src)
    if not _is_empty(data_dir):
        raise DataDirNotEmpty(
            "The data directory is not empty; restore only into an empty or new directory "
            "(move the current data away first)"
        )
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{data_dir.name}.restoring-", dir=data_dir.parent))
    try:
        shutil.copytree(src, stage, dirs_exist_ok=True, copy_function=copy_sparse,
                        ignore=shutil.ignore_patterns(MANIFEST))
        # a backup without a format file is version 0 and is migrated when opened
        (stage / "restored_from.json").write_text(json.dumps(manifest, indent=2) + "\n")
        if data_dir.exists():
            data_dir.rmdir()
        os.replace(stage, data_dir)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return manifest
