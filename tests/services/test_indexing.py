"""The background indexing service: when a build is due, and that it runs one."""

from __future__ import annotations

from collections.abc import Callable

from ragline.services.ingestion.indexing import IndexingService


class FakeStore:
    def __init__(self) -> None:
        self.status = {"a": (50_000, 0), "b": (30_000, 29_000)}
        self.built: list[str] = []

    def open_keys(self) -> list[str]:
        return list(self.status)

    def index_status(self, key: str) -> tuple[int, int]:
        return self.status[key]

    def build_index(self, key: str, should_stop: Callable[[], bool] | None = None) -> bool:
        self.built.append(key)
        points, _ = self.status[key]
        self.status[key] = (points, points - 25_000)  # Edge left some points unindexed
        return True


def test_due_needs_enough_unindexed_points_and_growth() -> None:
    svc = IndexingService(FakeStore(), min_points=20_000, growth=0.05, interval_s=1)
    assert svc.due(20_000, 0)
    assert not svc.due(19_999, 0)
    assert not svc.due(1_020_000, 1_000_000)  # 20k unindexed < 5 % of 1M
    assert svc.due(1_050_000, 1_000_000)


def test_builds_due_shards_once_until_they_grow_again() -> None:
    store = FakeStore()
    svc = IndexingService(store, min_points=20_000, growth=0.05, interval_s=1)
    assert svc.run_once() == 1 and store.built == ["a"]
    assert svc.run_once() == 0  # still 25k unindexed, but no growth since the build
    store.status["a"] = (75_000, 25_000)
    assert svc.run_once() == 1 and store.built == ["a", "a"]
    assert svc.stats()["builds"] == 2


def test_stores_without_background_builds_are_left_alone() -> None:
    svc = IndexingService(object(), min_points=1, growth=0.0, interval_s=1)
    svc.start()
    assert svc.stats()["enabled"] is False
    svc.stop()


def test_stats_report_pending_builds_and_the_last_swap() -> None:
    store = FakeStore()
    svc = IndexingService(store, min_points=20_000, growth=0.05, interval_s=1)
    stats = svc.stats()
    assert stats["pending"] == 1  # "a": 50k unindexed; "b": 1k, below min_points
    assert stats["last_swap_stall_ms"] is None and stats["building"] is False
    store.last_build = {"load_s": 0.02, "locked_s": 0.005, "close_s": 0.01,  # type: ignore[attr-defined]
                        "build_s": 40.0}
    svc.run_once()
    stats = svc.stats()
    assert stats["pending"] == 0 and stats["builds"] == 1
    assert stats["last_swap_stall_ms"] == 35.0  # load + locked replay + close
    assert stats["last_build"] == {"load_s": 0.02, "locked_s": 0.005, "close_s": 0.01,
                                   "build_s": 40.0}
