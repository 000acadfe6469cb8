"""The per-connection facades behind ``?service=`` (ragline/facade_routed.py), in
isolation: one start per connection, closed with the server, never kept across a close."""

from __future__ import annotations

import threading
import time

from ragline.errors import ServiceUnavailable
from ragline.facade_routed import RoutedFacades


class Facade:
    def __init__(self, cid: str, delay: float = 0.0) -> None:
        self.cid, self.delay = cid, delay
        self.started = self.closed = 0

    def start(self) -> Facade:
        time.sleep(self.delay)
        self.started += 1
        return self

    def close(self) -> None:
        self.closed += 1


def test_concurrent_first_requests_start_one_facade() -> None:
    built: list[Facade] = []

    def build(cid: str) -> Facade:
        built.append(Facade(cid, delay=0.05))
        return built[-1]

    facades = RoutedFacades(build)
    got: list[Facade] = []
    threads = [threading.Thread(target=lambda: got.append(facades.get("a"))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(built) == 1 and built[0].started == 1
    assert all(f is built[0] for f in got) and len(got) == 8
    facades.drop("a")
    assert built[0].closed == 1
    assert facades.get("a") is built[1]  # a dropped connection starts afresh
    facades.close()
    assert built[1].closed == 1


def test_a_slow_start_does_not_hold_other_connections() -> None:
    facades = RoutedFacades(lambda cid: Facade(cid, delay=1.0 if cid == "slow" else 0.0))
    facades.get("fast")
    t = threading.Thread(target=facades.get, args=("slow",))
    t.start()
    time.sleep(0.05)
    began = time.monotonic()
    facades.get("fast")
    assert time.monotonic() - began < 0.5
    t.join()
    facades.close()


def test_a_facade_started_across_a_close_is_closed_not_kept() -> None:
    made: list[Facade] = []

    def build(cid: str) -> Facade:
        made.append(Facade(cid, delay=0.2))
        return made[-1]

    facades = RoutedFacades(build)
    errors: list[BaseException] = []

    def first() -> None:
        try:
            facades.get("a")
        except ServiceUnavailable as exc:
            errors.append(exc)

    t = threading.Thread(target=first)
    t.start()
    time.sleep(0.05)
    facades.close()
    t.join()
    assert len(errors) == 1 and made[0].closed == 1
    assert facades.get("a") is made[1] and made[1].closed == 0  # started afresh, kept
