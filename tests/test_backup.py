"""Online backup and restore: consistent under concurrent writes, restore only into empty."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import tarfile
import threading
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ragline.api.app import create_app
from ragline.datadir import FORMAT_FILE, FORMAT_VERSION
from ragline.errors import DataDirNotEmpty, DataFormatError, InvalidInput
from ragline.facade import Ragline
from ragline.services.admin.backup import restore, unpack_archive
from ragline.settings import Settings


def disk_blocks(path: Path) -> int:
    return sum(f.stat().st_blocks for f in path.rglob("*") if f.is_file())


def _settings(path: Path) -> Settings:
    return Settings(data_dir=path, _env_file=None)  # type: ignore[call-arg]


def _doc(i: int) -> dict[str, object]:
    return {"id": f"d{i}", "text": f"document number {i}",
            "embedding": [1.0, float(i % 7), float(i % 3) + 0.5], "metadata": {"i": i}}


def test_backup_during_concurrent_writes_keeps_every_acknowledged_write(
        tmp_path: Path) -> None:
    with TestClient(create_app(_settings(tmp_path / "live")),
                    base_url="http://localhost") as client:
        assert client.post("/collections", json={"name": "c"}).status_code in (200, 201)
        assert client.post("/collections", json={"name": "other"}).status_code in (200, 201)
        acked: list[int] = []
        stop = threading.Event()
        errors: list[str] = []

        def writer(start: int, step: int) -> None:
            i = start
            while not stop.is_set():
                r = client.post("/collections/c/documents", json={"documents": [_doc(i)]})
                if r.status_code >= 300:
                    errors.append(r.text)
                    return
                acked.append(i)  # acknowledged: the response came back
                i += step

        threads = [threading.Thread(target=writer, args=(k, 2)) for k in range(2)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 30
        while len(acked) < 40 and time.monotonic() < deadline:
            time.sleep(0.01)
        before = set(acked)  # every write acknowledged before the backup started
        r = client.post("/admin/backup", json={})
        after = set(acked)
        time.sleep(0.05)
        stop.set()
        for t in threads:
            t.join(10)
        assert not errors and r.status_code == 200, r.text[:300]
        assert r.headers["content-type"] == "application/gzip"
        assert len(after) > len(before) or len(before) >= 40
    with tarfile.open(fileobj=io.BytesIO(r.content), mode="r:gz") as tar:
        members = tar.getmembers()
    # Edge's preallocated files travel as their data ranges, not their zeros
    sparse = [m for m in members if m.sparse]
    assert sparse and all(m.name.startswith("./collections/") for m in sparse)
    assert sum(m.size for m in members) > 10 * len(r.content)
    unpacked = tmp_path / "unpacked"
    unpack_archive(io.BytesIO(r.content), unpacked)
    # Edge preallocates sparse files; the backup keeps them sparse (no GBs of zeros)
    live_blocks = disk_blocks(tmp_path / "live" / "collections")
    assert disk_blocks(unpacked / "collections") < 2 * live_blocks + 4096
    manifest = json.loads((unpacked / "backup.json").read_text())
    assert manifest["format_version"] == FORMAT_VERSION
    assert sorted(manifest["collections"]) == ["c", "other"]
    restore(unpacked, tmp_path / "restored")
    with Ragline(_settings(tmp_path / "restored")) as rl:
        me = rl.owner()
        count = rl.collections.get(me, "c").count
        assert len(before) <= count <= len(after) + 2  # in-flight writes may or may not be in
        for i in sorted(before):
            assert rl.documents.get(me, "c", f"d{i}").metadata["i"] == i
        assert {c.name for c in rl.collections.all(me)} == {"c", "other"}
    # and the restored directory serves searches over HTTP
    with TestClient(create_app(_settings(tmp_path / "restored")),
                    base_url="http://localhost") as client:
        hits = client.post("/collections/c/search",
                           json={"embedding": [1.0, 0.0, 0.5], "limit": 3}).json()
        assert len(hits["results"] if "results" in hits else hits["hits"]) == 3


def test_direct_backup_and_restore_roundtrip(tmp_path: Path) -> None:
    with TestClient(create_app(_settings(tmp_path / "d")),
                    base_url="http://localhost") as client:
        client.post("/collections", json={"name": "c"})
        client.post("/collections/c/documents",
                    json={"documents": [_doc(i) for i in range(10)]})
    with Ragline(_settings(tmp_path / "d")) as rl:
        manifest = rl.admin.backup(rl.owner(), tmp_path / "bk")
        assert manifest["shards"] and (tmp_path / "bk" / "catalog.sqlite3").is_file()
        with pytest.raises(InvalidInput, match="not empty"):
            rl.admin.backup(rl.owner(), tmp_path / "bk")
    restore(tmp_path / "bk", tmp_path / "r")
    with Ragline(_settings(tmp_path / "r")) as rl2:
        assert rl2.collections.get(rl2.owner(), "c").count == 10


def test_restore_refuses_non_empty_directory_and_newer_backups(tmp_path: Path) -> None:
    with Ragline(_settings(tmp_path / "d")) as rl:
        rl.admin.backup(rl.owner(), tmp_path / "bk")
    target = tmp_path / "busy"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    with pytest.raises(DataDirNotEmpty):
        restore(tmp_path / "bk", target)
    assert [p.name for p in target.iterdir()] == ["notes.txt"]  # untouched
    (tmp_path / "bk" / FORMAT_FILE).write_text(json.dumps({"format_version": 99}))
    with pytest.raises(DataFormatError, match="newer ragline"):
        restore(tmp_path / "bk", tmp_path / "fresh")
    assert not (tmp_path / "fresh").exists()
    with pytest.raises(InvalidInput, match="Not a ragline backup"):
        restore(tmp_path / "d" / "collections", tmp_path / "fresh")


def test_sparse_copy_keeps_holes_and_bytes(tmp_path: Path) -> None:
    from ragline.core.sparse import copy_sparse

    src = tmp_path / "sparse.bin"
    with open(src, "wb") as f:
        f.write(b"head")
        f.seek(64 << 20)
        f.write(b"tail")
    copy_sparse(src, tmp_path / "copy.bin")
    copy = (tmp_path / "copy.bin")
    assert copy.stat().st_size == src.stat().st_size
    assert copy.read_bytes() == src.read_bytes()
    assert copy.stat().st_blocks * 512 < 4 << 20  # holes stayed holes


def _holey(path: Path) -> bytes:
    """A file of 64 MiB apparent size with 8 KiB of data in three places."""
    with open(path, "wb") as f:
        f.write(b"head" * 1024)
        f.seek(40 << 20)
        f.write(b"middle" * 100)
        f.seek(64 << 20)
        f.write(b"tail")
    return path.read_bytes()


def test_archives_carry_sparse_files_as_their_data_ranges(tmp_path: Path) -> None:
    from ragline.core.sparse import add_sparse

    src = tmp_path / "src"
    deep = src / ("nested-directory-" * 8) / "segment"  # names past ustar's 100 bytes
    deep.mkdir(parents=True)
    holey = _holey(deep / "vectors.bin")
    (deep / "plain.json").write_text('{"a": 1}')
    (src / "empty.bin").write_bytes(b"")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for path in (deep / "vectors.bin", deep / "plain.json", src / "empty.bin"):
            add_sparse(tar, path, "./" + path.relative_to(src).as_posix())
    assert len(buf.getvalue()) < 64 << 10  # the 64 MiB of holes are not in it
    buf.seek(0)
    out = tmp_path / "out"
    unpack_archive(buf, out)
    got = out / (deep / "vectors.bin").relative_to(src)
    assert got.read_bytes() == holey
    assert got.stat().st_blocks * 512 < 1 << 20  # holes again
    assert (out / (deep / "plain.json").relative_to(src)).read_text() == '{"a": 1}'
    assert (out / "empty.bin").read_bytes() == b""
    if shutil.which("tar"):  # and the archive is a tar an operator's tools read
        gnu = tmp_path / "gnu"
        gnu.mkdir()
        buf.seek(0)
        subprocess.run(["tar", "xzf", "-", "-C", str(gnu)], input=buf.getvalue(), check=True)
        assert (gnu / got.relative_to(out)).read_bytes() == holey


def test_unpack_refuses_a_sparse_map_outside_its_file(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        body = b"1\n100\n4\n".ljust(512, b"\0") + b"data"
        info = tarfile.TarInfo("GNUSparseFile.0/x.bin")
        info.size = len(body)
        info.pax_headers = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0",
                            "GNU.sparse.name": "x.bin", "GNU.sparse.realsize": "50"}
        tar.addfile(info, io.BytesIO(body))
    buf.seek(0)
    with pytest.raises(InvalidInput, match=r"damaged or truncated \(at x\.bin: the sparse map"):
        unpack_archive(buf, tmp_path / "out")


@pytest.mark.parametrize("cut", [0.3, 0.6, 0.95])
def test_unpack_of_a_truncated_archive_says_so(tmp_path: Path, cut: float) -> None:
    from ragline.core.sparse import add_sparse

    (tmp_path / "src").mkdir()
    for i in range(3):
        _holey(tmp_path / "src" / f"f{i}.bin")
        (tmp_path / "src" / f"g{i}.bin").write_bytes(os.urandom(20_000))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for p in sorted((tmp_path / "src").iterdir()):
            add_sparse(tar, p, f"./{p.name}")
    data = buf.getvalue()
    with pytest.raises(InvalidInput, match="damaged or truncated"):
        unpack_archive(io.BytesIO(data[: int(len(data) * cut)]), tmp_path / "out")


def test_unpack_refuses_paths_outside_the_root(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("../evil.txt")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"bad"))
    buf.seek(0)
    with pytest.raises(InvalidInput, match="outside"):
        unpack_archive(buf, tmp_path / "out")
    assert not (tmp_path / "evil.txt").exists()
