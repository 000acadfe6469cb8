"""Start the real server as a subprocess (``ragline serve``) for tests that need one."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LiveServer:
    def __init__(self, data_dir: Path, *extra: str, env: dict[str, str] | None = None,
                 cwd: Path | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [sys.executable, "-m", "ragline.cli.main", "serve", "--port", str(self.port),
               "--data-dir", str(data_dir), "--log-level", "warning", *extra]
        self.log = data_dir.parent / f"server-{self.port}.log"
        data_dir.parent.mkdir(parents=True, exist_ok=True)
        self._log_f = self.log.open("w")
        self.proc = subprocess.Popen(cmd, stdout=self._log_f, stderr=subprocess.STDOUT,
                                     env={**os.environ, **(env or {})}, cwd=cwd)

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.log.read_text()}")
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise TimeoutError(self.log.read_text())

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self._log_f.close()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log_f.close()
