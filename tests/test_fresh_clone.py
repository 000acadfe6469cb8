"""A newcomer's first run: clone, `make serve`, `make test`, in a fresh virtualenv.

Slow (a minute or more: a virtualenv is built; the embedding model comes from the
per-machine cache that this checkout's own install filled). Checks what the README
promises: the server answers /health, prints its banner, and /docs renders from
ragline's own files (no network), and `make test` works in the clone.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.live_server import free_port

ROOT = Path(__file__).resolve().parents[1]
INNER = "RAGLINE_FRESH_CLONE_INNER"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bool(os.environ.get(INNER)), reason="already inside a fresh clone"),
    pytest.mark.skipif(not (ROOT / ".git").exists(), reason="not a git checkout"),
]


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("fresh") / "ragline"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(dest)], check=True, timeout=120)
    return dest


def _env() -> dict[str, str]:
    # A fresh shell: no virtualenv of ours on PATH, no settings of ours.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RAGLINE_", "VIRTUAL_ENV", "PYTEST"))}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if ".venv" not in p)
    return {**env, INNER: "1"}


@pytest.fixture(scope="module")
def served(clone: Path) -> Iterator[tuple[str, Path]]:
    port = free_port()
    log = clone.parent / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(["make", "serve", f"PORT={port}"], cwd=clone, stdout=out,
                                stderr=subprocess.STDOUT, env=_env(), start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 900
        while True:
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.25)
        yield url, log
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_make_serve_answers_and_installs_no_torch(served: tuple[str, Path], clone: Path) -> None:
    url, log = served
    anonymous = httpx.get(url + "/health").json()  # without a key: status only (issue 32)
    assert anonymous["status"] == "healthy" and "collections" not in anonymous
    key = (clone / "data" / "admin-key.txt").read_text().strip()
    health = httpx.get(url + "/health", headers={"Authorization": f"Bearer {key}"}).json()
    assert health["status"] == "healthy" and health["collections"] == 0
    assert not list((clone / ".venv").glob("lib/python*/site-packages/torch"))
    text = log.read_text()
    assert "==> [" in text and "checking the local embedding model" in text


def test_banner_says_where_and_who(served: tuple[str, Path], clone: Path) -> None:
    url, log = served
    text = log.read_text()
    assert re.search(rf"API +{re.escape(url)}", text)
    assert f"{url}/docs" in text
    assert re.search(rf"Data +{re.escape(str((clone / 'data').resolve()))} +\(0 collections\)",
                     text)
    assert re.search(r"Auth +\S", text)
    assert re.search(r"Chat +no chat model configured", text)
    # the output is a log file here, not a terminal: the key is in the key file only
    key = (clone / "data" / "admin-key.txt").read_text().strip()
    assert key not in text and "admin-key.txt" in text


def test_make_serve_installs_mcp(served: tuple[str, Path], clone: Path) -> None:
    url, _ = served
    key = (clone / "data" / "admin-key.txt").read_text().strip()
    r = httpx.post(url + "/mcp", timeout=60, headers={
        "authorization": f"Bearer {key}", "accept": "application/json, text/event-stream"},
        json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "fresh-clone", "version": "1"}}})
    assert r.status_code == 200, r.text
    assert r.json()["result"]["serverInfo"]["name"]


def test_docs_render_without_network(served: tuple[str, Path]) -> None:
    url, _ = served
    assert httpx.get(url + "/", follow_redirects=False).headers["location"] == "/ui"
    for page in ("/docs", "/redoc"):
        html = httpx.get(url + page).text
        refs = re.findall(r"""(?:src|href)=["']([^"']+)["']""", html)
        refs += re.findall(r"""url: ?["']([^"']+)["']""", html)
        assert refs, html
        for ref in refs:
            assert not ref.startswith(("http:", "https:", "//")), f"{page} loads {ref}"
            assert httpx.get(url + ref).status_code == 200, ref


def test_make_test_runs_in_the_clone(clone: Path) -> None:
    done = subprocess.run(
        ["make", "test", "PYTEST_ARGS=tests/test_datadir.py tests/cli/test_banner.py"],
        cwd=clone, env=_env(), capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert re.search(r"\d+ passed", done.stdout)
