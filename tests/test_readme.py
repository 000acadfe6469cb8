"""README's quick tour, run verbatim (bar the address and data directory) against a real
server with auth on: the first-start key file, every curl, the query-string filter."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.live_server import LiveServer

ROOT = Path(__file__).resolve().parents[1]


def quick_tour() -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Quick tour"):]
    return re.findall(r"```bash\n(.*?)```", section, re.S)[0]


def test_quick_tour_runs_verbatim_with_auth_on(tmp_path: Path) -> None:
    try:
        from ragline.providers.embedders.local_onnx import LocalOnnxEmbedder

        LocalOnnxEmbedder()
    except Exception as exc:  # the model is built by `make install`
        pytest.skip(f"local embedder not built: {exc}")
    srv = LiveServer(tmp_path / "data", env={"RAGLINE_AUTH": "on"})
    try:
        srv.wait_ready()
        script = quick_tour().replace("localhost:8000", f"127.0.0.1:{srv.port}")
        script = script.replace("data/admin-key.txt", str(tmp_path / "data" / "admin-key.txt"))
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script.replace(
            "curl -s", "curl -sf")], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr + done.stdout
        bodies = [json.loads(line) for line in done.stdout.replace("}{", "}\n{").splitlines()
                  if line.strip()]
        created, added, found, listed, key = bodies
        assert created["embed"]["provider"] == "local"
        assert added["ids"] == ["a"]
        assert [r["id"] for r in found["results"]] == ["a"]
        assert [d["id"] for d in listed["documents"]] == ["a"]
        assert key["role"] == "user" and key["tenant"] == "alice" and key["key"]
    finally:
        srv.stop()
