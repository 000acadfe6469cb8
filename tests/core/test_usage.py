"""Disk use: allocated blocks, vanishing files, and a walk at most every few seconds."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from ragline.core.usage import UsageCache, disk_usage


def test_disk_usage_counts_allocated_blocks_not_apparent_size(tmp_path: Path) -> None:
    with open(tmp_path / "sparse.bin", "wb") as f:
        f.write(b"x" * 4096)
        f.seek(64 << 20)
        f.write(b"y")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "plain").write_bytes(b"z" * 10_000)
    used = disk_usage(tmp_path)
    expected = sum(p.stat().st_blocks * 512 for p in tmp_path.rglob("*") if p.is_file())
    assert used == expected
    assert 10_000 <= used < 1 << 20  # the 64 MiB hole is not counted


def test_disk_usage_ignores_files_that_vanish_while_counting(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A shard dropped in the background while /info counts it must not make /info fail."""
    (tmp_path / "seg").mkdir()
    (tmp_path / "seg" / "kept").write_bytes(b"x" * 10_000)
    (tmp_path / "seg" / "gone").write_bytes(b"x" * 10_000)
    real_lstat = os.lstat

    def lstat(p: str, *a: object, **k: object) -> os.stat_result:
        if str(p).endswith("gone"):
            raise FileNotFoundError(p)
        return real_lstat(p)

    monkeypatch.setattr(os, "lstat", lstat)
    assert disk_usage(tmp_path) == real_lstat(tmp_path / "seg" / "kept").st_blocks * 512
    assert disk_usage(tmp_path / "missing") == 0


def test_the_cache_walks_again_only_when_its_figure_is_old(tmp_path: Path) -> None:
    now = [100.0]
    walks: list[Path] = []

    def walk(p: Path) -> int:
        walks.append(p)
        return disk_usage(p)

    cache = UsageCache(tmp_path, max_age_s=5.0, clock=lambda: now[0], walk=walk)
    assert cache.get() == 0 and len(walks) == 1
    (tmp_path / "new").write_bytes(b"x" * 10_000)
    now[0] += 4.9
    assert cache.get() == 0 and len(walks) == 1  # young enough: the last figure
    now[0] += 0.2
    grown = cache.get()
    assert grown >= 10_000 and len(walks) == 2  # old: walked again, the file counted
    assert cache.get() == grown and len(walks) == 2


def test_callers_of_a_stale_figure_share_one_walk(tmp_path: Path) -> None:
    walks = 0
    entered = threading.Event()

    def slow_walk(p: Path) -> int:
        nonlocal walks
        walks += 1
        entered.set()
        time.sleep(0.2)
        return 42

    cache = UsageCache(tmp_path, walk=slow_walk)
    got: list[int] = []
    threads = [threading.Thread(target=lambda: got.append(cache.get())) for _ in range(8)]
    threads[0].start()
    entered.wait(5)
    for t in threads[1:]:
        t.start()
    for t in threads:
        t.join(10)
    assert got == [42] * 8
    assert walks == 1
