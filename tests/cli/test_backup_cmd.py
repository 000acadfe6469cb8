"""``ragline backup`` / ``ragline restore``: through a live server, and on a bare directory."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from tests.live_server import LiveServer

LOCK_FILE = "ragline.lock"  # holds the serving process's pid and address


def ragline(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ragline.cli.main", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def _docs(n: int) -> list[dict[str, object]]:
    return [{"id": f"d{i}", "text": f"t{i}", "embedding": [1.0, float(i), 0.5]}
            for i in range(n)]


def test_backup_goes_through_the_running_server_then_restores(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = LiveServer(data)
    try:
        server.wait_ready()
        assert json.loads((data / LOCK_FILE).read_text())["address"] == server.url
        httpx.post(server.url + "/collections", json={"name": "c"}).raise_for_status()
        httpx.post(server.url + "/collections/c/documents",
                   json={"documents": _docs(12)}).raise_for_status()
        # the server holds the shards; the CLI must use it, not open them
        done = ragline("backup", str(tmp_path / "bk"), "--data-dir", str(data))
        assert done.returncode == 0, done.stderr
        assert f"through the server at {server.url}" in done.stdout
        assert "1 shard(s)" in done.stdout
        server.proc.send_signal(signal.SIGINT)  # Ctrl-C: a clean stop
        server.proc.wait(30)
    finally:
        server.stop()
    assert (data / LOCK_FILE).read_text() == ""  # released on a clean stop
    refused = ragline("restore", str(tmp_path / "bk"), "--data-dir", str(data))
    assert refused.returncode == 2 and "not empty" in refused.stderr
    ok = ragline("restore", str(tmp_path / "bk"), "--data-dir", str(tmp_path / "restored"))
    assert ok.returncode == 0, ok.stderr
    assert "restored 1 collection(s)" in ok.stdout
    again = LiveServer(tmp_path / "restored")
    try:
        again.wait_ready()
        assert httpx.get(again.url + "/collections/c").json()["count"] == 12
    finally:
        again.stop()


def test_backup_without_a_server_opens_the_directory(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = LiveServer(data)
    try:
        server.wait_ready()
        httpx.post(server.url + "/collections", json={"name": "c"}).raise_for_status()
        httpx.post(server.url + "/collections/c/documents",
                   json={"documents": _docs(3)}).raise_for_status()
    finally:
        server.kill()  # no clean stop: the address stays in the file, and must be ignored
    assert server.url in (data / LOCK_FILE).read_text()
    done = ragline("backup", str(tmp_path / "bk"), "--data-dir", str(data))
    assert done.returncode == 0, done.stderr
    assert "through the server" not in done.stdout
    manifest = json.loads((tmp_path / "bk" / "backup.json").read_text())
    assert manifest["collections"] == ["c"]
    notempty = ragline("backup", str(tmp_path / "bk"), "--data-dir", str(data))
    assert notempty.returncode == 2 and "not empty" in notempty.stderr
