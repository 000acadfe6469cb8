"""``ragline backup DEST`` and ``ragline restore SRC``.

Backup goes through the server when one holds the data directory (``--url``,
or the address a running ``ragline serve`` writes into the directory's lock
file): the server snapshots online and streams a .tar.gz, unpacked into DEST.
The request needs an admin key: ``--api-key``, ``$RAGLINE_API_KEY``, or the
``admin-key.txt`` the server wrote into the data directory on its first start. With no server,
the data directory is opened directly. Restore never goes through a server: it
only writes into an empty directory, which no server can be using.

Exit codes: 0 done, 1 failed, 2 refused (bad destination, non-empty data
directory, backup from a newer ragline).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from ragline.errors import RaglineError


def _fail(exc: RaglineError) -> typer.Exit:
    typer.echo(f"error: {exc.message}", err=True)
    return typer.Exit(2 if exc.status < 500 or exc.code == "data_format_unsupported" else 1)


def _backup_over_http(url: str, dest: Path, timeout: float,
                      key: str | None) -> dict[str, object]:
    import httpx

    from ragline.facade import unpack_backup

    if dest.exists() and any(dest.iterdir()):
        raise typer.BadParameter("the destination exists and is not empty", param_hint="DEST")
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".ragline-backup-", dir=dest.parent) as tmp:
        archive = Path(tmp) / "backup.tar.gz"
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        # a JSON body: never a CORS "simple request" (the server refuses those unless they
        # carry a key header)
        with httpx.stream("POST", url.rstrip("/") + "/admin/backup", timeout=timeout,
                          headers=headers, json={}) as r:
            if r.status_code != 200:
                r.read()
                raise typer.BadParameter(f"the server answered {r.status_code}: {r.text[:300]}")
            with open(archive, "wb") as out:
                for chunk in r.iter_bytes():
                    out.write(chunk)
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
    data_dir: Annotated[Path | None, typer.Option(help="Data directory (default ./data).")] = None,
    url: Annotated[str | None, typer.Option(
        help="Back up through this running server instead of opening the directory.")] = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the server.")] = 3600,
    api_key: Annotated[str | None, typer.Option(
        envvar="RAGLINE_API_KEY", help="Admin API key for the server (default: the "
        "data directory's admin-key.txt).")] = None,
) -> None:
    """Take a consistent snapshot of catalog and collections (online if a server runs)."""
    from ragline.cli.main import build_settings
    from ragline.facade import Ragline, holder_address

    settings = build_settings(data_dir)
    server = url or holder_address(settings.data_dir)
    try:
        if server:
            typer.echo(f"backing up through the server at {server}")
            key_file = settings.data_dir / "admin-key.txt"
            if api_key is None and key_file.is_file():
                api_key = key_file.read_text().strip() or None
            manifest = _backup_over_http(server, dest, timeout, api_key)
        else:
            with Ragline(settings) as rl:
                manifest = rl.backup(rl.owner(), dest)
    except RaglineError as exc:
        raise _fail(exc) from exc
    shards = manifest.get("shards") or []
    typer.echo(f"backup written to {dest}: {len(shards)} shard(s), "  # type: ignore[arg-type]
               f"writes paused {manifest.get('writes_paused_s')} s")


def restore(
    src: Annotated[Path, typer.Argument(help="A backup directory made by ragline backup.")],
    data_dir: Annotated[Path | None, typer.Option(
        help="Data directory to create (must be empty or absent; default ./data).")] = None,
) -> None:
    """Restore a backup into an empty data directory (never over existing data)."""
    from ragline.cli.main import build_settings
    from ragline.facade import restore_backup as do_restore

    settings = build_settings(data_dir)
    try:
        manifest = do_restore(src, settings.data_dir)
    except RaglineError as exc:
        raise _fail(exc) from exc
    typer.echo(f"restored {len(manifest.get('collections') or [])} collection(s) into "
               f"{settings.data_dir} (backup of {manifest.get('started_at')})")
