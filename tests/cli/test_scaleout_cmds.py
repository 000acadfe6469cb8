"""``ragline worker`` and ``ragline serve --workers N`` refuse the embedded catalog, saying
what to set (the scaled-out path itself is tested in tests/e2e/test_scaled_out.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def ragline(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGLINE_")}
    return subprocess.run([sys.executable, "-m", "ragline.cli.main", *args,
                           "--data-dir", str(tmp_path / "data")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)


def test_serve_with_several_workers_needs_the_shared_catalog(tmp_path: Path) -> None:
    done = ragline(tmp_path, "serve", "--workers", "2")
    assert done.returncode == 2
    assert "RAGLINE_CATALOG=postgres" in done.stderr
    assert not (tmp_path / "data").exists()  # refused before opening anything


def test_worker_needs_the_shared_queue(tmp_path: Path) -> None:
    done = ragline(tmp_path, "worker", "--exit-when-idle")
    assert done.returncode == 2
    assert "RAGLINE_CATALOG=postgres" in done.stderr
