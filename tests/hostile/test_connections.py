"""Connections that cannot be starved (issue 32, item 2), against a real server.

Before: 1,500 half-sent requests blocked ``/health`` outright, and 1,100 sockets
sending ``POST`` headers then one body byte at a time (with or without a key) held
every slot of the 1,000-connection cap, so 45 of 45 ``/health`` probes failed. Now
the oldest connection without a complete request makes room for each newcomer, a
body without a valid key is refused from its headers, and every request has a total
deadline: ``/health`` keeps a p99 under 500 ms throughout.
"""

from __future__ import annotations

import contextlib
import socket
import time

from tests.hostile.conftest import HealthProbe, Server

HALF_SENT = 1500
SLOW_BODIES = 1100
ATTACK_S = 8.0


def _open(port: int, first: bytes) -> socket.socket | None:
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(first)
        s.setblocking(False)
        return s
    except OSError:  # the server closed it at once to make room: also fine
        return None


def _closed(s: socket.socket) -> bool:
    try:
        return s.recv(65536) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def _attack(server: Server, count: int, first: bytes, drip: bytes | None,
            reopen: bool) -> list[socket.socket]:
    """Open ``count`` sockets that each send ``first``; for ``ATTACK_S`` seconds send
    ``drip`` on every open one each second and, with ``reopen``, open again as many as
    the server closed (so the cap stays full the whole time)."""
    port = server.live.port
    sockets = [s for s in (_open(port, first) for _ in range(count)) if s is not None]
    end = time.monotonic() + ATTACK_S
    while time.monotonic() < end:
        time.sleep(1.0)
        alive = []
        for s in sockets:
            try:
                if drip is not None:
                    s.send(drip)
                alive.append(s)
            except OSError:
                s.close()
        reopened = [_open(port, first) for _ in range(count - len(alive) if reopen else 0)]
        sockets = alive + [s for s in reopened if s is not None]
    return sockets


def test_half_sent_requests_do_not_block_health(server: Server) -> None:
    with HealthProbe(server.url) as probe:
        sockets = _attack(server, HALF_SENT, b"GET /health HTTP/1.1\r\nHost: localhost\r\n",
                          drip=None, reopen=True)
    for s in sockets:
        s.close()
    print(f"\n/health during the attack: {probe.summary()}")
    probe.assert_responsive()


def _slow_body(key: str | None) -> bytes:
    auth = f"Authorization: Bearer {key}\r\n".encode() if key else b""
    return (b"POST /collections/book/documents HTTP/1.1\r\nHost: localhost\r\n"
            b"Content-Type: application/json\r\nContent-Length: 1000000\r\n" + auth
            + b"\r\n{")


def test_slow_bodies_without_a_key_are_refused_from_their_headers(server: Server) -> None:
    """Each socket sends its headers and one byte of a 1 MB body, then a byte a second:
    each is answered 401 at once and closed, and ``/health`` never notices."""
    port = server.live.port
    answers: dict[int, bytes] = {}
    with HealthProbe(server.url) as probe:
        sockets = [s for s in (_open(port, _slow_body(None)) for _ in range(SLOW_BODIES))
                   if s is not None]
        end = time.monotonic() + ATTACK_S
        while time.monotonic() < end:  # the whole attack time, answered or not
            for i, s in enumerate(sockets):
                if i in answers:
                    continue
                try:
                    piece = s.recv(65536)
                except BlockingIOError:
                    with contextlib.suppress(OSError):
                        s.send(b" ")  # the next byte of the body
                    continue
                except OSError:
                    piece = b""
                answers[i] = piece
            time.sleep(0.2)
    for s in sockets:
        s.close()
    print(f"\n/health during the attack: {probe.summary()}")
    probe.assert_responsive()
    assert len(sockets) >= SLOW_BODIES * 0.95, len(sockets)
    refused = sum(a.startswith(b"HTTP/1.1 401") for a in answers.values())
    assert refused == len(sockets), (refused, len(answers), len(sockets))


def test_slow_bodies_with_a_key_cannot_hold_the_connection_cap(server: Server) -> None:
    """A valid key's slow bodies are read (the key is good), but 1,100 of them cannot
    fill the 1,000-connection cap: the newcomer is served, the oldest make room."""
    key = server.user_key()
    with HealthProbe(server.url) as probe:
        sockets = _attack(server, SLOW_BODIES, _slow_body(key), drip=b" ", reopen=True)
    closed = sum(_closed(s) for s in sockets)
    for s in sockets:
        s.close()
    print(f"\n/health during the attack: {probe.summary()}")
    probe.assert_responsive()
    assert closed < len(sockets)  # the attack was real: many sockets were still served
