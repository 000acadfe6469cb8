"""Micro-batching of concurrent single-text embeddings (the search path).

Why: under concurrent search, each request embeds one short query. A model call
has a fixed overhead, so 64 queries in one call cost far less than 64 calls, and
running the model on the event loop would stall every other request. The batcher
collects calls for up to ``max_wait_ms`` (or until ``max_batch``), runs one
``embed()`` in a worker thread and hands each caller its row.

It is adaptive: while batches run, new calls queue up and go out together as
soon as a worker is free, so batches grow with load and latency stays at one
model call plus at most ``max_wait_ms`` when idle. Up to ``workers`` batches run
at once: the local model runs each batch on one core, so one batch at a time
would leave the second core idle while the first batch runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from ragline.providers.embedders.base import Embedder, InputType
from ragline.providers.embedders.util import check_inputs

log = logging.getLogger(__name__)


@dataclass
class _Lane:
    """Pending calls of one input_type (one embed() call takes one input_type)."""

    pending: deque[tuple[str, asyncio.Future[npt.NDArray[np.float32]], float]] = field(
        default_factory=deque
    )
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    full: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    inflight: set[asyncio.Task[None]] = field(default_factory=set)


class MicroBatcher:
    """``await batcher.embed_one(text, input_type)`` -> 1-D float32 vector.

    Bound to the event loop of its first use; if used from a new loop (tests),
    it starts fresh there. ``workers`` threads run the model; 1 is right for a
    CPU model that already uses every core.
    """

    def __init__(
        self, embedder: Embedder, max_batch: int = 64, max_wait_ms: float = 5, workers: int = 1
    ) -> None:
        if max_batch < 1 or max_wait_ms < 0 or workers < 1:
            raise ValueError("max_batch >= 1, max_wait_ms >= 0 and workers >= 1 required")
        self.embedder = embedder
        self.max_batch = max_batch
        self.max_wait = max_wait_ms / 1000
        self._executor = ThreadPoolExecutor(workers, thread_name_prefix="ragline-embed")
        self.workers = workers
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lanes: dict[str, _Lane] = {}
        self.batches = 0  # embed() calls made, for metrics and tests
        self.texts = 0  # texts embedded through those calls

    async def embed_one(
        self, text: str, input_type: InputType = "query"
    ) -> npt.NDArray[np.float32]:
        check_inputs([text], input_type)
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop, self._lanes = loop, {}
        lane = self._lanes.get(input_type)
        if lane is None:
            lane = self._lanes[input_type] = _Lane()
        if lane.task is None or lane.task.done():
            lane.task = loop.create_task(self._run(lane, input_type))
        fut: asyncio.Future[npt.NDArray[np.float32]] = loop.create_future()
        lane.pending.append((text, fut, loop.time()))
        lane.wake.set()
        if len(lane.pending) >= self.max_batch:
            lane.full.set()
        return await fut

    async def _run(self, lane: _Lane, input_type: InputType) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not lane.pending:
                lane.wake.clear()
                await lane.wake.wait()
                continue
            if len(lane.inflight) >= self.workers:  # every worker busy: let the batch grow
                await asyncio.wait(lane.inflight, return_when=asyncio.FIRST_COMPLETED)
                continue
            # Wait out the window of the oldest pending call, unless the batch fills.
            remaining = lane.pending[0][2] + self.max_wait - loop.time()
            if remaining > 0 and len(lane.pending) < self.max_batch:
                lane.full.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(lane.full.wait(), remaining)
            n = min(self.max_batch, len(lane.pending))
            batch = [lane.pending.popleft() for _ in range(n)]
            if len(lane.pending) < self.max_batch:
                lane.full.clear()
            live = [(t, f) for t, f, _ in batch if not f.done()]  # skip cancelled callers
            if live:
                task = loop.create_task(self._dispatch(loop, live, input_type))
                lane.inflight.add(task)
                task.add_done_callback(lane.inflight.discard)

    async def _dispatch(
        self,
        loop: asyncio.AbstractEventLoop,
        live: list[tuple[str, asyncio.Future[npt.NDArray[np.float32]]]],
        input_type: InputType,
    ) -> None:
        texts = [t for t, _ in live]
        self.batches += 1
        self.texts += len(texts)
        try:
            vecs = await loop.run_in_executor(
                self._executor, self.embedder.embed, texts, input_type
            )
            if len(vecs) != len(texts):
                raise RuntimeError(f"embedder returned {len(vecs)} vectors for {len(texts)} texts")
        except Exception as exc:  # every waiting caller gets the error, the lane survives
            log.debug("micro-batch of %d failed: %s", len(texts), exc)
            for _, f in live:
                if not f.done():
                    f.set_exception(exc)
            return
        for i, (_, f) in enumerate(live):
            if not f.done():
                f.set_result(np.asarray(vecs[i], dtype=np.float32))

    def stats(self) -> dict[str, float]:
        """For ``/info``: how well concurrent queries are being batched."""
        mean = self.texts / self.batches if self.batches else 0.0
        return {"batches": self.batches, "texts": self.texts, "mean_batch": round(mean, 2)}

    async def aclose(self) -> None:
        """Stop the lane tasks of the current loop and the worker thread."""
        for lane in self._lanes.values():
            for t in list(lane.inflight):
                t.cancel()
            if lane.task is not None:
                lane.task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await lane.task
        self._lanes = {}
        self._executor.shutdown(wait=False)
