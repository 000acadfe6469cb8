"""``POST /admin/backup``: an online backup, streamed back as a tar archive.

The server writes the snapshot into a temporary directory of its own and sends
it as a .tar.gz; the caller (``ragline backup DEST``) unpacks it where it likes, so no client
chooses a path on the server. Writes pause while catalog and shards are
copied; searches do not (see ragline.services.admin.backup).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from fastapi import APIRouter, Query
from fastapi.responses import FileResponse
from starlette.background import BackgroundTask

from ragline.api.deps import RL, Caller

router = APIRouter(tags=["operations"])


@router.post("/admin/backup", response_class=FileResponse,
             responses={200: {"description": "The data directory as a .tar.gz archive.",
                              "content": {"application/gzip": {
                                  "schema": {"type": "string", "format": "binary"},
                                  "example": "(binary .tar.gz: catalog.sqlite3, "
                                             "collections/...)"}}}})
def backup(rl: RL, caller: Caller, include_secrets: bool = Query(
        False, description="Keep named connections' secrets (remote admin keys, API keys) "
        "in the archive; left out by default.")) -> FileResponse:
    """A consistent snapshot of the whole data directory as a .tar.gz (admin keys only);
    connection secrets are left out unless ``include_secrets=true``."""
    workdir = Path(tempfile.mkdtemp(prefix="ragline-backup-"))
    try:
        archive = rl.admin.backup_archive(caller, workdir, include_secrets=include_secrets)
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    return FileResponse(archive, media_type="application/gzip",
                        filename="ragline-backup.tar.gz",
                        background=BackgroundTask(shutil.rmtree, workdir, True))
