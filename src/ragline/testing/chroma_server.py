"""A real Chroma server (``chroma run``) on a free local port, for tests and benchmarks.

The Chroma store talks to a server over HTTP in production, so its tests run
against the real thing rather than a fake: this starts ``chroma run --path DIR
--port PORT`` (the ``chroma`` script of the ``chromadb`` package, found next to the
running interpreter), waits until its heartbeat answers, and stops it afterwards.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from ragline.testing.server import free_port


def chroma_executable() -> str | None:
    """The ``chroma`` CLI of this environment (None if chromadb is not installed)."""
    here = Path(sys.executable).parent / "chroma"
    if here.exists():
        return str(here)
    return shutil.which("chroma")


@contextmanager
def chroma_server(path: Path, *, startup_timeout: float = 60.0) -> Iterator[tuple[str, int]]:
    """Run a Chroma server storing in ``path`` until the block exits; yields (host, port)."""
    exe = chroma_executable()
    if exe is None:
        raise RuntimeError("the chroma CLI is not installed (pip install 'ragline[chroma]')")
    path.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log_path = path.parent / f"chroma-{port}.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [exe, "run", "--path", str(path), "--host", "127.0.0.1", "--port", str(port)],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "ANONYMIZED_TELEMETRY": "False"})
        try:
            deadline = time.monotonic() + startup_timeout
            url = f"http://127.0.0.1:{port}/api/v2/heartbeat"
            while True:
                if proc.poll() is not None:
                    raise RuntimeError("chroma run exited: "
                                       + log_path.read_text(errors="replace")[-2000:])
                try:
                    if httpx.get(url, timeout=1.0).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("chroma run did not answer its heartbeat in time")
                time.sleep(0.1)
            yield "127.0.0.1", port
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)  # its own session: only its processes
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=10)
