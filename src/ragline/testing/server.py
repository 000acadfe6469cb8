"""Run an ASGI app under a real uvicorn server, or a stdlib request handler, in a
background thread.

Client behaviour that matters in production (timeouts, refused connections,
retries, real status codes) cannot be seen through an in-process test client,
so tests and benchmarks start a real server on a free local port. Scripted
upstreams (a web page to ingest, an OpenAI-compatible endpoint) are small
:class:`QuietHandler` subclasses served by :func:`serve_handler`.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import uvicorn


def free_port() -> int:
    """A local port nothing is listening on (bound then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def serve_in_thread(app: Any, *, startup_timeout: float = 20.0) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1 until the block exits; yields the base URL.

    The listening socket is bound here and handed to uvicorn, so there is no
    window in which another process could take the port.
    """
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1, access_log=False
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            sock.close()
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@contextmanager
def serve_handler(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve ``handler`` on 127.0.0.1 until the block exits; yields the base URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that logs nothing (test output stays readable) and answers
    whole bodies with :meth:`send`."""

    def send(self, status: int, body: bytes, headers: Mapping[str, str] | None = None) -> None:
        """Answer ``body`` with ``headers``, plus its Content-Length unless they set one.
        A client that hangs up mid-answer (a size cap, a timeout) is not an error here."""
        headers = dict(headers or {})
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        if "Content-Length" not in headers:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def static_page(body: bytes,
                content_type: str = "text/html; charset=utf-8") -> type[QuietHandler]:
    """A handler that answers every GET with ``body``."""

    class Page(QuietHandler):
        def do_GET(self) -> None:
            self.send(200, body, {"Content-Type": content_type})

    return Page
