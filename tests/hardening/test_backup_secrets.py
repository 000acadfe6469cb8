"""Backups leave connection secrets out unless asked (issue 32, item 10): a named
connection's remote admin key was in every backup in clear text."""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path

import pytest

from ragline.api.app import create_app
from ragline.facade import Ragline, unpack_backup
from tests.api.helpers import local_client
from tests.ingestion_support import fake_settings

SECRET = "rl_remote_admin_key_0123456789abcdef"


def with_connection(rl: Ragline) -> None:
    rl.services.connections.table.add("remote", "stores", "ragline",
                                      {"url": "http://10.0.0.9:8000"}, {"api_key": SECRET})


def every_byte(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


def stored_secrets(backup: Path) -> str:
    db = sqlite3.connect(backup / "catalog.sqlite3")
    try:
        return str(db.execute("SELECT secrets FROM connections WHERE id = 'remote'"
                              ).fetchone()[0])
    finally:
        db.close()


@pytest.mark.parametrize("include", [False, True])
def test_a_backup_holds_connection_secrets_only_when_asked(tmp_path: Path,
                                                           include: bool) -> None:
    with Ragline(fake_settings(tmp_path)) as rl:
        with_connection(rl)
        manifest = rl.admin.backup(rl.owner(), tmp_path / "b", include_secrets=include)
        assert rl.services.connections.table.get("remote").secrets == {"api_key": SECRET}
    assert manifest["connection_secrets"] == ("included" if include else "omitted")
    assert (SECRET.encode() in every_byte(tmp_path / "b")) is include  # free pages too
    assert stored_secrets(tmp_path / "b") == ('{"api_key": "' + SECRET + '"}' if include
                                              else "{}")
    # the connection itself (provider, options) is kept either way
    db = sqlite3.connect(tmp_path / "b" / "catalog.sqlite3")
    assert db.execute("SELECT provider, options FROM connections").fetchall() == [
        ("ragline", '{"url": "http://10.0.0.9:8000"}')]
    db.close()


def test_the_http_backup_leaves_them_out_unless_include_secrets(tmp_path: Path) -> None:
    with local_client(create_app(fake_settings(tmp_path))) as client:
        with_connection(client.app.state.ragline)  # type: ignore[attr-defined]
        for query, included in (("", False), ("?include_secrets=true", True)):
            r = client.post(f"/admin/backup{query}")
            assert r.status_code == 200, r.text
            dest = tmp_path / f"unpacked{int(included)}"
            unpack_backup(io.BytesIO(r.content), dest)
            assert (SECRET.encode() in every_byte(dest)) is included
