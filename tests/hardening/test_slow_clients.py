"""Slow and idle clients against a real server process (issues 10, 32): deadlines and a cap.

Before: connections that never finished their request were never closed, and
about 20,000 idle sockets exhausted the descriptors (issue 10); then 1,100 sockets
sending a body byte every 10 s without a key held every slot of the connection cap,
which refused every newcomer (issue 32). Now every connection has a header deadline,
bodies a per-gap deadline, the whole request a total deadline, a body without a
valid key is refused from the headers before it is read, and at the cap the
connection that waited longest without a complete request makes room for the new one.
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
        # past the cap the oldest idle connections make room for newer ones, and the
        # rest go after the 1 s header deadline: a real client gets through at once
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


@pytest.fixture
def guarded(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[LiveServer, str]]:
    """A server with auth on, long per-step deadlines, a 3 s total deadline (or the
    test's parameter) and a cap of 40 connections; yields it and its admin key."""
    data = tmp_path / "data"
    total = str(getattr(request, "param", 3))
    srv = LiveServer(data, "--header-timeout", "30", "--body-timeout", "30",
                     "--request-timeout", total, "--max-connections", "40",
                     env={"RAGLINE_AUTH": "on"})
    try:
        srv.wait_ready()
        yield srv, (data / "admin-key.txt").read_text().strip()
    finally:
        srv.stop()


def _answer(s: socket.socket) -> bytes:
    data = b""
    while True:
        try:
            piece = s.recv(65536)
        except (ConnectionResetError, TimeoutError):
            return data
        if not piece:
            return data
        data += piece


BODY_HEADERS = (b"POST /collections/kb/documents HTTP/1.1\r\nHost: localhost\r\n"
                b"Content-Type: application/json\r\nContent-Length: 1000000\r\n")


def test_a_body_without_a_valid_key_is_refused_before_it_is_read(
    guarded: tuple[LiveServer, str],
) -> None:
    server, key = guarded
    for credential in (b"", b"Authorization: Bearer rl_not_a_key\r\n",
                       b"Authorization: Basic dXNlcjpwdw==\r\n"):
        s = _connect(server.port)
        start = time.monotonic()
        s.send(BODY_HEADERS + credential + b"\r\n" + b"{")  # one byte of a 1 MB body
        answer = _answer(s)  # the answer comes, and the server hangs up
        took = time.monotonic() - start
        s.close()
        assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
        assert b"connection: close" in answer.lower() and b'"error": "unauthorized"' in answer
        assert took < 2, took
    # a valid key: the server waits for the body (no answer yet), then serves it
    s = _connect(server.port)
    body = b'{"documents": []}'
    s.send(BODY_HEADERS.replace(b"1000000", str(len(body)).encode())
           + f"Authorization: Bearer {key}\r\n\r\n".encode())
    s.settimeout(0.5)
    with pytest.raises(TimeoutError):
        s.recv(1024)
    s.settimeout(5)
    s.send(body)
    assert s.recv(65536).split(b" ", 2)[1] in (b"200", b"404")  # kb may not exist: routed
    s.close()


def test_a_trickling_body_hits_the_total_deadline(guarded: tuple[LiveServer, str]) -> None:
    """A byte every 0.4 s never trips the 30 s per-gap deadline; the 3 s total one ends it."""
    server, key = guarded
    s = _connect(server.port)
    start = time.monotonic()
    s.send(BODY_HEADERS + f"Authorization: Bearer {key}\r\n\r\n".encode())
    closed = False
    while time.monotonic() - start < 8:
        try:
            s.send(b" ")
        except (BrokenPipeError, ConnectionResetError):
            closed = True
            break
        s.settimeout(0.4)
        if _closed_by_peer(s):
            closed = True
            break
    took = time.monotonic() - start
    s.close()
    assert closed and 2.5 < took < 6, took


@pytest.mark.parametrize("guarded", [60], indirect=True)  # no total deadline in the way
def test_at_the_cap_the_oldest_incomplete_connection_makes_room(
    guarded: tuple[LiveServer, str],
) -> None:
    """40 half-sent requests fill the cap; each newcomer is served, and the connection
    that waited longest is the one closed for it."""
    server, _ = guarded
    half: list[socket.socket] = []

    def half_send() -> None:
        s = _connect(server.port)
        s.send(b"GET /health HTTP/1.1\r\nHost: localhost\r\n")  # never finished
        half.append(s)
        time.sleep(0.01)

    for _ in range(40):
        half_send()
    try:
        for i in range(5):
            start = time.monotonic()
            r = httpx.get(server.url + "/health", timeout=2)
            assert r.status_code == 200 and time.monotonic() - start < 1
            assert _closed_by_peer(half[i]), i  # the oldest first
            half_send()  # the cap is full again
        for s in half[-20:]:  # the newer ones are still open (nothing to read yet)
            s.settimeout(0.05)
            assert not _closed_by_peer(s)
    finally:
        for s in half:
            s.close()


def test_serve_raises_the_open_file_limit_to_fit_the_cap() -> None:
    import resource

    from ragline.cli.main import raise_fd_limit

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        want = 2048 if hard == resource.RLIM_INFINITY else min(2048, hard)
        assert raise_fd_limit(2048) == want == resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        assert raise_fd_limit(100) == want  # never lowered
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
