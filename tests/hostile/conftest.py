"""The hostile tier (``make test-hostile``, marker ``hostile``): a real server under attack.

Every test here starts (or shares) a real ``ragline serve`` process and attacks it the
way issue 32 did, bounded in count and time, while a probe measures ``/health`` from a
fresh connection every few milliseconds. The whole tier stays within about five minutes.

The attacks open thousands of sockets, so the test process raises its own open-file
limit here (``ragline serve`` raises its own to fit its connection cap).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.live_server import LiveServer

SOCKETS_NEEDED = 8192


def _raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = SOCKETS_NEEDED if hard == resource.RLIM_INFINITY else min(SOCKETS_NEEDED, hard)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


_raise_fd_limit()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.hostile)


@dataclass
class Server:
    live: LiveServer
    admin_key: str
    data: Path

    @property
    def url(self) -> str:
        return self.live.url

    @property
    def admin(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.admin_key}"}

    def user_key(self, tenant: str = "default") -> str:
        r = httpx.post(self.url + "/api/keys", headers=self.admin, timeout=30,
                       json={"role": "user", "tenant": tenant, "name": "hostile"})
        assert r.status_code == 201, r.text
        return str(r.json()["key"])

    def rss_bytes(self) -> int:
        """The server process's resident memory (0 once it is gone)."""
        try:
            status = Path(f"/proc/{self.live.proc.pid}/status").read_text()
        except OSError:
            return 0
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0


def start_server(tmp: Path, *flags: str, env: dict[str, str] | None = None) -> Server:
    data = tmp / "data"
    live = LiveServer(data, *flags, env={
        "RAGLINE_AUTH": "on", "RAGLINE_DEFAULT_EMBEDDER": "fake",
        "RAGLINE_DEFAULT_COLLECTION": "book", **(env or {})})
    live.wait_ready(120)
    return Server(live, (data / "admin-key.txt").read_text().strip(), data)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One real server for a module's attacks (auth on, the default settings otherwise)."""
    srv = start_server(tmp_path_factory.mktemp("hostile"))
    try:
        yield srv
    finally:
        srv.live.stop()


PROBE = """
import json, sys, threading, time
import httpx
url, every, timeout = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
stop = threading.Event()
print("ready", flush=True)
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
out = []
with httpx.Client(timeout=timeout, limits=httpx.Limits(max_keepalive_connections=0)) as c:
    while not stop.is_set():
        start = time.monotonic()
        try:
            status = str(c.get(url + "/health").status_code)
        except httpx.HTTPError as exc:
            status = type(exc).__name__
        out.append((time.monotonic() - start, status))
        stop.wait(every)
print(json.dumps(out))
"""


@dataclass
class HealthProbe:
    """``GET /health`` from a new connection every ``every`` seconds while an attack runs:
    each answer's latency (a failure is listed). The probe is a process of its own, so
    the attack's work in the test process (its GIL) does not count as server latency."""

    url: str
    every: float = 0.02
    timeout: float = 5.0
    latencies: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    _proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> HealthProbe:
        self._proc = subprocess.Popen(
            [sys.executable, "-c", PROBE, self.url, str(self.every), str(self.timeout)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self._proc.stdout is not None  # its start-up (imports) is not the attack's
        assert self._proc.stdout.readline().strip() == "ready"
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._proc is not None
        out, _ = self._proc.communicate("", timeout=60)
        for latency, status in json.loads(out or "[]"):
            self.latencies.append(latency)
            if status != "200":
                self.failures.append(status)

    def p99(self) -> float:
        ordered = sorted(self.latencies)
        return ordered[max(0, int(len(ordered) * 0.99) - 1)] if ordered else float("inf")

    def summary(self) -> str:
        ordered = sorted(self.latencies)
        if not ordered:
            return "no probes"
        return (f"{len(ordered)} probes, p50 {ordered[len(ordered) // 2] * 1000:.0f} ms, "
                f"p99 {self.p99() * 1000:.0f} ms, max {ordered[-1] * 1000:.0f} ms, "
                f"{len(self.failures)} failed {self.failures[:5]}")

    def assert_responsive(self, p99_s: float = 0.5) -> None:
        assert len(self.latencies) >= 20, self.summary()
        assert not self.failures and self.p99() < p99_s, self.summary()
