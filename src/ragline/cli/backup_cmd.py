"""``ragline backup DEST`` and ``ragline restore SRC``.

Backup goes through the server when one holds the data directory (``--url``,
or the address a running ``ragline serve`` writes into the directory's lock
file): the server snapshots online and streams a .tar.gz, unpacked into DEST.
The request needs an admin key: ``--api-key``, ``$RAGLINE_API_KEY``, the profile's, or
the ``admin-key.txt`` the server wrote into the data directory on its first start. With no server,
the data directory is opened directly. Restore never goes through a server: it
only writes into an empty directory, which no server can be using.

With ``catalog = "postgres"`` there is no data directory: backup reads the
catalog's rows and every collection directly (any number of processes may be
running) and restore writes them into an empty catalog and store
(:mod:`ragline.services.admin.catalog_backup`).

Exit codes: 0 done, 1 failed, 2 refused (bad destination, non-empty data
directory, backup from a newer ragline, no admin key).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from ragline.cli.common import ApiKey, AsJson, DataDir, Profile, Url, emit_json
from ragline.client import Client
from ragline.errors import RaglineError


def _fail(exc: RaglineError) -> typer.Exit:
    typer.echo(f"error: {exc.message}", err=True)
    return typer.Exit(2 if exc.status < 500 or exc.code == "data_format_unsupported" else 1)


def _backup_over_http(client: Client, dest: Path, include_secrets: bool) -> dict[str, object]:
    from ragline.facade import unpack_backup

    if dest.exists() and any(dest.iterdir()):
        raise typer.BadParameter("the destination exists and is not empty", param_hint="DEST")
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".ragline-backup-", dir=dest.parent) as tmp:
        archive = client.download_backup(Path(tmp) / "backup.tar.gz",
                                         include_secrets=include_secrets)
        stage = Path(tmp) / "stage"
        with open(archive, "rb") as f:
            unpack_backup(f, stage)
        if dest.exists():
            dest.rmdir()
        shutil.move(str(stage), str(dest))
    manifest: dict[str, object] = json.loads((dest / "backup.json").read_text())
    return manifest


def backup(
    dest: Annotated[Path, typer.Argument(help="Directory to write (absent or empty).")],
    data_dir: DataDir = None,
    url: Url = None,
    api_key: ApiKey = None,
    profile: Profile = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the server.")] = 3600,
    include_secrets: Annotated[bool, typer.Option(
        "--include-secrets", help="Keep named connections' secrets (a remote server's admin "
        "key, API keys) in the backup; left out by default.")] = False,
    as_json: AsJson = False,
) -> None:
    """Take a consistent snapshot of catalog and collections (online if a server runs).
    Named connections' secrets are left out unless --include-secrets."""
    from ragline.cli.main import build_settings
    from ragline.cli.target import Connection, server_for
    from ragline.facade import Ragline

    settings = build_settings(data_dir)
    try:
        # a shared catalog has no data directory to lock: this process reads it directly
        server = (None if settings.shared_catalog else
                  server_for(Connection(url, api_key, None, profile), settings.data_dir))
        if server:
            if not as_json:
                typer.echo(f"backing up through the server at {server[0]}")
            with Client(server[0], api_key=server[1], timeout=timeout) as client:
                manifest = _backup_over_http(client, dest, include_secrets)
        else:
            with Ragline(settings) as rl:
                manifest = rl.admin.backup(rl.owner(), dest, include_secrets=include_secrets)
    except RaglineError as exc:
        raise _fail(exc) from exc
    if as_json:
        emit_json(manifest)
        return
    if "shards" not in manifest:  # a shared catalog's backup (docs/scaling.md)
        names = manifest.get("collections") or []
        typer.echo(f"backup written to {dest}: {len(names)} "  # type: ignore[arg-type]
                   "collection(s), catalog rows and documents as JSON")
        return
    shards = manifest.get("shards") or []
    typer.echo(f"backup written to {dest}: {len(shards)} shard(s), "  # type: ignore[arg-type]
               f"writes paused {manifest.get('writes_paused_s')} s")


def restore(
    src: Annotated[Path, typer.Argument(help="A backup directory made by ragline backup.")],
    data_dir: Annotated[Path | None, typer.Option(
        help="Data directory to create (must be empty or absent; default ./data).")] = None,
    as_json: AsJson = False,
) -> None:
    """Restore a backup into an empty data directory (never over existing data); with
    catalog 'postgres', into the configured catalog and store, which must be empty."""
    from ragline.cli.main import build_settings
    from ragline.facade import Ragline
    from ragline.facade import restore_backup as do_restore

    settings = build_settings(data_dir)
    try:
        if settings.shared_catalog:
            with Ragline(settings) as rl:
                manifest = rl.admin.restore_catalog(rl.owner(), src)
        else:
            manifest = do_restore(src, settings.data_dir)
    except RaglineError as exc:
        raise _fail(exc) from exc
    if as_json:
        emit_json(manifest)
        return
    where = "the PostgreSQL catalog" if settings.shared_catalog else settings.data_dir
    typer.echo(f"restored {len(manifest.get('collections') or [])} collection(s) into "
               f"{where} (backup of {manifest.get('started_at')})")
