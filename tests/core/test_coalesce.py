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


class Gate:
    """A ``run`` that records its calls and holds each one until released."""

    def __init__(self, fail_on: int | None = None) -> None:
        self.calls: list[list[int]] = []
        self.started = threading.Semaphore(0)
        self.release = threading.Event()
        self.fail_on = fail_on

    def __call__(self, key: str, items: list[int]) -> list[int]:
        self.calls.append(list(items))
        self.started.release()
        assert self.release.wait(10)
        if self.fail_on in items:
            raise ValueError(f"item {self.fail_on} breaks the call")
        return [i * 10 for i in items]

    async def wait_started(self, n: int = 1) -> None:
        for _ in range(n):
            assert await asyncio.to_thread(self.started.acquire, True, 10)


async def spin(turns: int = 5) -> None:
    """Let the event loop run a few turns (no time passes on purpose)."""
    for _ in range(turns):
        await asyncio.sleep(0)


async def test_a_lone_item_leaves_at_once_without_a_wait_window() -> None:
    sent: list[int] = []

    def seen(name: str, size: int, waits: list[float]) -> None:
        sent.append(size)

    c: Coalescer[str, int, int] = Coalescer(lambda k, items: items, on_batch=seen)  # defaults
    assert c.max_wait == 0
    task = asyncio.ensure_future(c.submit("k", 1))
    await spin()  # a few loop turns, no timer: the batch is already on its way
    assert sent == [1]
    assert await task == 1
    # a window holds items back only while a call runs: a lone item still leaves at once
    sent.clear()
    w: Coalescer[str, int, int] = Coalescer(lambda k, items: items, max_wait_ms=1000,
                                            on_batch=seen)
    assert await asyncio.wait_for(w.submit("k", 2), 0.5) == 2
    assert sent == [1]
    # the former behaviour, kept behind a flag: the window holds a lone item back too
    sent.clear()
    old: Coalescer[str, int, int] = Coalescer(lambda k, items: items, max_wait_ms=1000,
                                              wait_when_idle=True, on_batch=seen)
    late = asyncio.ensure_future(old.submit("k", 3))
    await spin()
    assert sent == []
    late.cancel()
    for co in (c, w, old):
        await co.aclose()


async def test_while_a_call_runs_a_window_gathers_the_next_batch() -> None:
    gate = Gate()
    c: Coalescer[str, int, int] = Coalescer(gate, max_batch=64, max_wait_ms=10_000,
                                            workers=2)
    first = asyncio.ensure_future(c.submit("k", 0))
    await gate.wait_started()  # the model was idle: no wait
    rest = []
    for i in (1, 2, 3):  # a worker is free, but a call runs: these wait for company
        rest.append(asyncio.ensure_future(c.submit("k", i)))
        await spin()
    assert gate.calls == [[0]]
    gate.release.set()  # the call ends: the window ends with it
    assert list(await asyncio.gather(first, *rest)) == [0, 10, 20, 30]
    assert gate.calls == [[0], [1, 2, 3]]
    await c.aclose()


@pytest.mark.parametrize("workers", [1, 2])
async def test_items_arriving_during_running_calls_form_the_next_batch(workers: int) -> None:
    gate = Gate()
    c: Coalescer[str, int, int] = Coalescer(gate, max_batch=64, workers=workers)
    first = []
    for i in range(workers):  # each arrives while the workers before it are busy
        first.append(asyncio.ensure_future(c.submit("k", i)))
        await gate.wait_started()
    rest = [asyncio.ensure_future(c.submit("k", i)) for i in range(workers, workers + 5)]
    await spin()
    assert gate.calls == [[i] for i in range(workers)]  # free workers: at once, alone
    gate.release.set()
    assert await asyncio.gather(*first, *rest) == [i * 10 for i in range(workers + 5)]
    assert gate.calls == [[i] for i in range(workers)] + [list(range(workers, workers + 5))]
    await c.aclose()


async def test_a_batch_error_of_one_item_reaches_that_caller_only() -> None:
    gate = Gate(fail_on=3)
    gate.release.set()
    c: Coalescer[str, int, int] = Coalescer(gate, max_batch=8, max_wait_ms=50,
                                            isolate=lambda exc: isinstance(exc, ValueError))
    res = await asyncio.gather(*(c.submit("k", i) for i in range(6)), return_exceptions=True)
    assert [r for i, r in enumerate(res) if i != 3] == [0, 10, 20, 40, 50]
    assert isinstance(res[3], ValueError) and "item 3" in str(res[3])
    assert gate.calls == [list(range(6))] + [[i] for i in range(6)]  # the batch, then alone
    await c.aclose()


async def test_an_outage_is_not_retried_item_by_item() -> None:
    gate = Gate(fail_on=0)
    gate.release.set()
    c: Coalescer[str, int, int] = Coalescer(gate, max_batch=8, max_wait_ms=50,
                                            isolate=lambda exc: False)
    res = await asyncio.gather(*(c.submit("k", i) for i in range(4)), return_exceptions=True)
    assert all(isinstance(r, ValueError) for r in res)
    assert gate.calls == [[0, 1, 2, 3]]  # one call: each caller got the batch's error
    await c.aclose()


async def test_cancelling_a_caller_touches_no_other() -> None:
    gate = Gate()
    c: Coalescer[str, int, int] = Coalescer(gate, max_batch=64, workers=1)
    running = asyncio.ensure_future(c.submit("k", 0))
    await gate.wait_started()
    queued = {i: asyncio.ensure_future(c.submit("k", i)) for i in (1, 2, 3)}
    await spin()
    queued[2].cancel()  # not sent yet: dropped from the next batch
    running.cancel()  # already running: its result is thrown away
    await spin()
    gate.release.set()
    assert list(await asyncio.gather(queued[1], queued[3])) == [10, 30]
    assert gate.calls == [[0], [1, 3]]
    assert running.cancelled() and queued[2].cancelled()
    assert await c.submit("k", 4) == 40  # the lane carries on
    await c.aclose()
