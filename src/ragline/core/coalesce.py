"""Coalescing of concurrent single requests into batched calls made off the event loop.

Why: under concurrent search, each request needs one query embedded and one store
query run. Both have a fixed cost per call (a model call, a pass over a shard's
segments and a GIL hand-off), so serving 30 waiting requests with one call is far
cheaper than 30 calls, and blocking work must never run on the event loop.

``await coalescer.submit(key, item)`` queues ``item`` in the lane of ``key`` (one
call takes items of one key: an input type, a shard) and resolves to its result.
By default (``max_wait_ms=0``) nothing ever waits for company: an item that finds a
worker free leaves at once, alone if it is alone; items that arrive while all
``workers`` calls run queue up and leave together, up to ``max_batch``, as soon as a
worker is free. So batches grow with load and an idle server adds nothing to a lone
request (issue 38: a 3 ms window cost 1.6x QPS at one client and paid off only from
~16). ``max_wait_ms > 0`` adds a window for items that arrive while a call of their
lane runs: they wait for company until the oldest has waited that long, the batch is
full or a call ends (with nothing running, what is pending leaves at once), even if a
worker is free; ``wait_when_idle=True`` makes a lone item wait too (the behaviour
before issue 38).

``run`` returns one entry per item, in order; an entry that is an exception is
raised to that item's caller alone. If ``run`` itself raises for a batch of several
items and ``isolate(error)`` says the error may belong to one item, each item runs
alone (same worker), so only the item that fails gets an error; otherwise (an outage:
every item would fail again) every caller in the batch gets the error. Either way the
lane carries on. A caller that is cancelled is dropped from a batch not yet sent, and
its result discarded from one already running; the others are not affected.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")
R = TypeVar("R")


@dataclass
class _Lane(Generic[T, R]):
    pending: deque[tuple[T, asyncio.Future[R], float]] = field(default_factory=deque)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    # set when the lane fills or a call ends: ends a window early
    kick: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    inflight: set[asyncio.Task[None]] = field(default_factory=set)


def _ended(lane: _Lane[Any, Any], task: asyncio.Task[None]) -> None:
    """A call of the lane ended: a worker is free, and a window waiting on it ends."""
    lane.inflight.discard(task)
    lane.kick.set()


class Coalescer(Generic[K, T, R]):
    """Bound to the event loop of its first use; from a new loop (tests) it starts fresh."""

    def __init__(
        self, run: Callable[[K, list[T]], Sequence[R | BaseException]], *,
        max_batch: int = 64, max_wait_ms: float = 0, workers: int = 1, name: str = "batch",
        on_batch: Callable[[str, int, list[float]], None] | None = None,
        isolate: Callable[[BaseException], bool] | None = None,
        wait_when_idle: bool = False,
    ) -> None:
        if max_batch < 1 or max_wait_ms < 0 or workers < 1:
            raise ValueError("max_batch >= 1, max_wait_ms >= 0 and workers >= 1 required")
        self.run = run
        self.name = name
        # Observer of each batch sent: (name, size, seconds each item waited); metrics.
        self.on_batch = on_batch
        # Whether a whole-batch error is retried item by item (see the module doc).
        self.isolate = isolate
        self.max_batch = max_batch
        self.max_wait = max_wait_ms / 1000
        # False: the window applies only while a call of the lane runs (see module doc)
        self.wait_when_idle = wait_when_idle
        self.workers = workers
        self._executor = ThreadPoolExecutor(workers, thread_name_prefix=f"ragline-{name}")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lanes: dict[K, _Lane[T, R]] = {}
        self.batches = 0  # run() calls made, for metrics and tests
        self.items = 0  # items sent through those calls

    async def submit(self, key: K, item: T) -> R:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop, self._lanes = loop, {}
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = _Lane()
        if lane.task is None or lane.task.done():
            lane.task = loop.create_task(self._drain(lane, key))
        fut: asyncio.Future[R] = loop.create_future()
        lane.pending.append((item, fut, loop.time()))
        lane.wake.set()
        if len(lane.pending) >= self.max_batch:
            lane.kick.set()
        return await fut

    async def _drain(self, lane: _Lane[T, R], key: K) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not lane.pending:
                lane.wake.clear()
                await lane.wake.wait()
                continue
            if len(lane.inflight) >= self.workers:  # every worker busy: let the batch grow
                await asyncio.wait(lane.inflight, return_when=asyncio.FIRST_COMPLETED)
                continue
            # A window: wait out the oldest item's, unless the batch fills or a call ends
            # (then look again: with nothing running, what is pending leaves at once).
            if (self.max_wait > 0 and len(lane.pending) < self.max_batch
                    and (lane.inflight or self.wait_when_idle)):
                remaining = lane.pending[0][2] + self.max_wait - loop.time()
                if remaining > 0:
                    lane.kick.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(lane.kick.wait(), remaining)
                    continue
            n = min(self.max_batch, len(lane.pending))
            batch = [lane.pending.popleft() for _ in range(n)]
            live = [(it, f) for it, f, _ in batch if not f.done()]  # skip cancelled callers
            if live and self.on_batch is not None:
                now = loop.time()
                self.on_batch(self.name, len(live), [now - t for _, f, t in batch
                                                     if not f.done()])
            if live:
                task = loop.create_task(self._dispatch(loop, key, live))
                lane.inflight.add(task)
                task.add_done_callback(functools.partial(_ended, lane))

    async def _dispatch(
        self, loop: asyncio.AbstractEventLoop, key: K, live: list[tuple[T, asyncio.Future[R]]],
    ) -> None:
        items = [it for it, _ in live]
        self.batches += 1
        self.items += len(items)
        try:
            results = await loop.run_in_executor(self._executor, self._call, key, items)
        except Exception as exc:  # every waiting caller gets the error, the lane survives
            log.debug("batch of %d failed: %s", len(items), exc)
            for _, f in live:
                if not f.done():
                    f.set_exception(exc)
            return
        for (_, f), res in zip(live, results, strict=True):
            if f.done():
                continue
            if isinstance(res, BaseException):
                f.set_exception(res)
            else:
                f.set_result(res)

    def _call(self, key: K, items: list[T]) -> Sequence[R | BaseException]:
        """``run`` in a worker thread; a batch it fails is retried item by item when
        ``isolate`` says the error may be one item's."""
        try:
            return self._checked(key, items)
        except Exception as exc:
            if len(items) == 1 or self.isolate is None or not self.isolate(exc):
                raise
            log.debug("batch of %d failed (%s): each item alone", len(items), exc)
        out: list[R | BaseException] = []
        for item in items:
            try:
                out.append(self._checked(key, [item])[0])
            except Exception as exc:
                out.append(exc)
        return out

    def _checked(self, key: K, items: list[T]) -> Sequence[R | BaseException]:
        results = self.run(key, items)
        if len(results) != len(items):
            raise RuntimeError(f"batch call returned {len(results)} results for "
                               f"{len(items)} items")
        return results

    def stats(self) -> dict[str, Any]:
        """For ``/info``: how well concurrent requests are being coalesced."""
        mean = self.items / self.batches if self.batches else 0.0
        return {"batches": self.batches, "items": self.items, "mean_batch": round(mean, 2)}

    def close(self) -> None:
        """Stop the worker threads once the calls in progress are done."""
        self._executor.shutdown(wait=False)

    async def aclose(self) -> None:
        """Stop the lane tasks of the current loop and the worker threads."""
        for lane in self._lanes.values():
            for t in list(lane.inflight):
                t.cancel()
            if lane.task is not None:
                lane.task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await lane.task
        self._lanes = {}
        self._executor.shutdown(wait=False)
