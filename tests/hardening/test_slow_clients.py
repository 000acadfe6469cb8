"""Slow and idle clients against a real server process (issue 10): deadlines and a cap.

Before: connections that never finished their request were never closed, and
about 20,000 idle sockets exhausted the descriptors. Now every connection has a
header deadline, bodies a per-byte deadline, and connections past the cap are
closed at once; the server keeps answering.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.live_server import LiveServer


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    srv = LiveServer(tmp_path / "data", "--header-timeout", "1", "--body-timeout", "1",
                     "--max-connections", "100")
    try:
        srv.wait_ready()
        yield srv
    finally:
        srv.stop()


def _connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.settimeout(5)
    return s


def _closed_by_peer(s: socket.socket) -> bool:
    try:
        return s.recv(1024) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def _health_ok(url: str, within: float) -> float:
    """Seconds until /health answered 200 (fails the test past ``within``)."""
    start = time.monotonic()
    while time.monotonic() - start < within:
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return time.monotonic() - start
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"/health did not answer within {within} s")


def test_idle_connections_are_closed_and_the_server_keeps_answering(server: LiveServer) -> None:
    idle = [_connect(server.port) for _ in range(300)]  # 3x the cap
    try:
        # past the cap new connections are closed at once, and the idle ones go after
        # the 1 s header deadline, so a real client gets through within a few seconds
        assert _health_ok(server.url, within=6) < 6
        time.sleep(1.5)
        assert all(_closed_by_peer(s) for s in idle)
        assert httpx.get(server.url + "/health", timeout=2).status_code == 200
    finally:
        for s in idle:
            s.close()


def test_headers_sent_a_byte_at_a_time_hit_the_header_deadline(server: LiveServer) -> None:
    s = _connect(server.port)
    start = time.monotonic()
    request = b"GET /health HTTP/1.1\r\nHost: localhost\r\nX-Slow: " + b"a" * 100
    closed = False
    for byte in request:
        try:
            s.send(bytes([byte]))
        except (BrokenPipeError, ConnectionResetError):
            closed = True
            break
        time.sleep(0.2)
        if time.monotonic() - start > 4:
            break
    s.settimeout(3)
    assert closed or _closed_by_peer(s)
    assert time.monotonic() - start < 6
    s.close()


def test_a_body_that_stalls_hits_the_body_deadline(server: LiveServer) -> None:
    s = _connect(server.port)
    s.send(b"POST /collections HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
           b"Content-Length: 1000\r\n\r\n{\"name\": ")
    start = time.monotonic()
    s.settimeout(4)
    assert _closed_by_peer(s)
    assert 0.8 < time.monotonic() - start < 4
    s.close()
    assert httpx.get(server.url + "/collections", timeout=2).status_code == 200


def test_kept_alive_connections_still_work(server: LiveServer) -> None:
    with httpx.Client(base_url=server.url, timeout=5) as c:
        for _ in range(3):
            assert c.get("/health").status_code == 200
            time.sleep(0.3)
