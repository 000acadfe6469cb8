"""The YAML alias bomb (issue 32, item 1): a 466-byte Markdown upload cannot take the
server down.

DEPENDS ON h32a (issue 32 inputs: frontmatter and metadata budgets); on a branch
without it the server's memory passes 2 GB and the watchdog here kills it (the test
fails rather than the machine).

Before: frontmatter nesting YAML aliases ten levels deep (``l0: &l0 [*a, *a, ...]``,
``l1: &l1 [*l0, ...]`` ... ``l8``) was shared by the YAML loader but expanded by the
metadata flattening: RSS reached 20.9 GB, ``/health`` timed out for minutes and the
kernel killed the process. Now the upload is answered 400 naming the limit within
10 s, RSS stays under 2 GB and ``/health`` answers throughout.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.hostile.conftest import HealthProbe, Server, start_server

RSS_LIMIT = 2 * 1024**3
DEPTH = 9


def alias_bomb(depth: int = DEPTH, width: int = 9) -> bytes:
    """Markdown whose frontmatter expands to ``width ** (depth + 1)`` scalars."""
    refs = ", ".join(["*a"] * width)
    lines = ["---", "a: &a [" + ", ".join(['"lol"'] * width) + "]"]
    prev = "a"
    for level in range(depth):
        lines.append(f"l{level}: &l{level} [" + refs.replace("*a", f"*{prev}") + "]")
        prev = f"l{level}"
    lines += ["---", "", "# Title", "", "Some text."]
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture
def bomb_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start_server(tmp_path_factory.mktemp("bomb"))
    try:
        yield srv
    finally:
        srv.live.kill()


class RssWatch:
    """Samples the server's RSS every 50 ms; kills it past ``RSS_LIMIT`` (a server without
    the budget would otherwise take the machine's memory)."""

    def __init__(self, server: Server) -> None:
        self.server, self.peak, self.killed = server, 0, False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            rss = self.server.rss_bytes()
            self.peak = max(self.peak, rss)
            if rss > RSS_LIMIT:
                self.killed = True
                self.server.live.proc.kill()
                return

    def __enter__(self) -> RssWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


def test_yaml_alias_bomb_is_refused_within_budget(bomb_server: Server) -> None:
    server = bomb_server
    bomb = alias_bomb()
    assert len(bomb) < 600
    key = server.user_key()
    with RssWatch(server) as watch, HealthProbe(server.url, every=0.05) as probe:
        answers = []
        for _ in range(3):  # three bombs in a row: each refused, memory never grows
            start = time.monotonic()
            try:
                r = httpx.post(server.url + "/api/rag/ingest/upload", timeout=30,
                               headers={"Authorization": f"Bearer {key}"},
                               files={"documentFile": ("bomb.md", bomb, "text/markdown")})
                status, text = r.status_code, r.text
            except httpx.HTTPError as exc:
                status, text = 0, type(exc).__name__
            answers.append((status, time.monotonic() - start, text[:300]))
        # /health keeps answering after the refusals too (and the probe gets enough samples
        # for a p99 however fast the refusals were)
        time.sleep(2)
    assert not watch.killed, f"RSS passed {RSS_LIMIT} bytes: the server was killed"
    assert watch.peak < RSS_LIMIT
    assert all(status == 400 and took < 10 for status, took, _ in answers), answers
    print(f"\n/health during the attack: {probe.summary()}")
    probe.assert_responsive()
    # nothing was written: the upload's collection holds no source from the bomb
    got = httpx.get(server.url + "/collections/book/sources", headers=server.admin,
                    timeout=30)
    assert got.status_code == 404 or got.json()["count"] == 0, got.text[:300]
