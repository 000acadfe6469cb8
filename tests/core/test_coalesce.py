"""Coalescer: per-key batches, per-item errors, and whole-call failures."""

from __future__ import annotations

import asyncio
import threading

import pytest

from ragline.core.coalesce import Coalescer


async def test_keys_never_share_a_call_and_results_keep_their_callers() -> None:
    calls: list[tuple[str, list[int]]] = []

    def run(key: str, items: list[int]) -> list[str]:
        calls.append((key, list(items)))
        return [f"{key}:{i * 10}" for i in items]

    c: Coalescer[str, int, str] = Coalescer(run, max_batch=8, max_wait_ms=5)
    out = await asyncio.gather(*(c.submit("ab"[i % 2], i) for i in range(12)))
    assert out == [f"{'ab'[i % 2]}:{i * 10}" for i in range(12)]
    for key, items in calls:  # one key per call
        assert all("ab"[i % 2] == key for i in items)
    assert sorted(i for _, items in calls for i in items) == list(range(12))
    assert len(calls) < 12  # coalesced
    assert c.stats() == {"batches": len(calls), "items": 12,
                         "mean_batch": round(12 / len(calls), 2)}
    await c.aclose()


async def test_an_exception_entry_reaches_only_its_caller() -> None:
    def run(key: str, items: list[int]) -> list[int | BaseException]:
        return [ValueError(f"bad {i}") if i == 3 else i for i in items]

    c: Coalescer[str, int, int] = Coalescer(run, max_batch=8, max_wait_ms=20)
    res = await asyncio.gather(*(c.submit("k", i) for i in range(6)), return_exceptions=True)
    assert [r for i, r in enumerate(res) if i != 3] == [0, 1, 2, 4, 5]
    assert isinstance(res[3], ValueError) and str(res[3]) == "bad 3"
    await c.aclose()


async def test_a_failing_call_fails_its_batch_and_the_lane_recovers() -> None:
    fail = threading.Event()
    fail.set()

    def run(key: str, items: list[int]) -> list[int]:
        if fail.is_set():
            raise RuntimeError("store down")
        return items

    c: Coalescer[str, int, int] = Coalescer(run, max_batch=8, max_wait_ms=5)
    res = await asyncio.gather(*(c.submit("k", i) for i in range(4)), return_exceptions=True)
    assert all(isinstance(r, RuntimeError) for r in res)
    fail.clear()
    assert await c.submit("k", 7) == 7
    await c.aclose()


async def test_wrong_result_count_is_an_error_not_a_hang() -> None:
    c: Coalescer[str, int, int] = Coalescer(lambda k, items: items[:-1], max_batch=4,
                                            max_wait_ms=5)
    with pytest.raises(RuntimeError, match="results for"):
        await asyncio.wait_for(c.submit("k", 1), timeout=5)
    await c.aclose()


def test_bad_settings_are_refused() -> None:
    for kw in ({"max_batch": 0}, {"max_wait_ms": -1}, {"workers": 0}):
        with pytest.raises(ValueError):
            Coalescer(lambda k, items: items, **kw)  # type: ignore[arg-type]
