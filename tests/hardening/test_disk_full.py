"""Disk space as a resource (issue 10): 507 before the store is touched, reads go on,
writes resume once space is freed.

Two tests: a fault-injecting one that always runs (the free-space probe is
replaced), and one on a real small filesystem (tmpfs mounted by the test; skipped
with the reason when mounting is not possible, e.g. not root).
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from ragline.api.app import create_app
from ragline.facade import IngestSource, Ragline
from tests.api.helpers import doc
from tests.ingestion_support import fake_settings
from tests.live_server import LiveServer

MiB = 1024 * 1024


class FakeDisk:
    def __init__(self) -> None:
        self.free = 10_000 * MiB

    def __call__(self, _path: Path) -> int:
        return self.free


def test_writes_answer_507_before_the_store_is_touched_and_resume(tmp_path: Path) -> None:
    rl = Ragline(fake_settings(tmp_path, disk_reserve_bytes=100 * MiB)).start()
    disk = FakeDisk()
    rl.services.ingest.disk.free = disk
    try:
        with TestClient(create_app(ragline=rl), base_url="http://localhost",
                        headers={"X-API-Key": "k"}) as c:
            assert c.post("/collections", json={"name": "docs"}).status_code == 201
            assert c.post("/collections/docs/documents",
                          json={"documents": [doc(1)]}).status_code == 200
            shards = set(rl.services.store.shard_keys())
            disk.free = 101 * MiB  # above the reserve, but not with this write on top
            big = [doc(i, dim=4) | {"text": "x" * 600_000} for i in range(2, 4)]
            r = c.post("/collections/docs/documents", json={"documents": big})
            assert r.status_code == 507 and "disk_reserve_bytes" in r.json()["message"]
            disk.free = 50 * MiB  # below the reserve: every write path refuses
            r = c.post("/collections/docs/documents", json={"documents": [doc(2)]})
            assert r.status_code == 507 and r.json()["error"] == "insufficient_storage"
            assert c.post("/collections", json={"name": "other"}).status_code == 507
            assert c.delete("/collections/docs/documents/all").status_code == 507
            r = c.post("/api/rag/ingest/text", json={"text": "Grippers close two fingers."})
            assert r.status_code == 507
            # nothing was written, no shard was created, reads go on
            assert set(rl.services.store.shard_keys()) == shards
            assert c.get("/collections/docs").json()["count"] == 1
            assert c.get("/collections/docs/documents/d1").status_code == 200
            assert c.post("/collections/docs/search",
                          json={"embedding": doc(1)["embedding"]}).status_code == 200
            health = c.get("/health").json()
            assert health["status"] == "degraded" and health["disk"]["writes_allowed"] is False
            disk.free = 10_000 * MiB  # space freed: no manual step
            assert c.post("/collections/docs/documents",
                          json={"documents": [doc(2)]}).status_code == 200
            assert c.delete("/collections/docs/documents/all").status_code == 200
            r = c.post("/api/rag/ingest/text", json={"text": "Grippers close two fingers."})
            assert r.status_code == 201, r.text
    finally:
        rl.close()


def test_an_ingestion_job_fails_cleanly_on_a_full_disk_and_reruns(tmp_path: Path) -> None:
    from tests.ingestion_support import copy_book

    rl = Ragline(fake_settings(tmp_path, disk_reserve_bytes=100 * MiB)).start()
    disk = FakeDisk()
    rl.services.ingest.disk.free = disk
    try:
        book = copy_book(tmp_path)
        rl.services.ingest.ensure_collection("book")
        disk.free = 10 * MiB
        job = rl.ingestion.submit(rl.owner(), IngestSource("directory", "book", path=str(book))).job
        assert job is not None
        done = rl.ingestion.wait(rl.owner(), job.id, 60)
        assert done.status == "failed" and "disk" in (done.error or "")
        disk.free = 10_000 * MiB
        again = rl.ingestion.wait(rl.owner(), rl.ingestion.rerun(rl.owner(), job.id).id, 60)
        assert again.status == "succeeded"
        assert rl.services.documents.count("book", "default") > 0
    finally:
        rl.close()


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=160m", "tmpfs", str(mnt)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(path: Path, leave: int) -> Path:
    """A file that leaves about ``leave`` bytes free on ``path``'s filesystem."""
    st = os.statvfs(path)
    free = st.f_bavail * st.f_frsize
    filler = path / f"filler-{uuid.uuid4().hex}"
    with filler.open("wb") as f:
        remaining = max(0, free - leave)
        chunk = b"\0" * MiB
        while remaining > 0:
            n = min(remaining, len(chunk))
            try:
                f.write(chunk[:n])
                f.flush()
            except OSError:
                break
            remaining -= n
    return filler


def test_real_small_filesystem_never_kills_the_server(small_fs: Path) -> None:
    data = small_fs / "data"
    srv = LiveServer(data, env={"RAGLINE_DISK_RESERVE_BYTES": str(48 * MiB)})
    try:
        srv.wait_ready()
        with httpx.Client(base_url=srv.url, timeout=30) as c:
            assert c.post("/collections", json={"name": "docs"}).status_code == 201
            assert c.post("/collections/docs/documents",
                          json={"documents": [doc(i, dim=64) for i in range(50)]}
                          ).status_code == 200
            filler = _fill(small_fs, leave=0)  # the disk is completely full
            for i in range(20):
                r = c.post("/collections/docs/documents",
                           json={"documents": [doc(100 + i, dim=64)]})
                assert r.status_code == 507, r.text
            assert c.delete("/collections/docs/documents/all").status_code == 507
            assert srv.proc.poll() is None  # alive: no SIGBUS
            assert c.get("/collections/docs").json()["count"] == 50
            assert c.post("/collections/docs/search",
                          json={"embedding": doc(1, dim=64)["embedding"]}).status_code == 200
            assert c.get("/health").status_code == 200
            filler.unlink()  # space freed: writes work again, no restart
            r = c.post("/collections/docs/documents", json={"documents": [doc(200, dim=64)]})
            assert r.status_code == 200, r.text
            assert c.get("/collections/docs").json()["count"] == 51
        srv.stop()
        # and a restart on the same (small) filesystem opens the shard fine
        srv = LiveServer(data, env={"RAGLINE_DISK_RESERVE_BYTES": str(48 * MiB)})
        srv.wait_ready()
        assert httpx.get(srv.url + "/collections/docs", timeout=10).json()["count"] == 51
    finally:
        srv.stop()
