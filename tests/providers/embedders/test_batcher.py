"""MicroBatcher: concurrent single embeds become few model calls, off the event loop."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

from ragline.errors import InvalidInput, ProviderError
from ragline.providers.embedders.batcher import MicroBatcher
from ragline.testing.fake_embedder import FakeEmbedder


class ThreadRecordingEmbedder(FakeEmbedder):
    """Remembers which threads ran embed(), to prove the loop thread never does."""

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.threads: set[int] = set()

    def embed(self, texts, input_type="document"):  # type: ignore[no-untyped-def]
        self.threads.add(threading.get_ident())
        return super().embed(texts, input_type)


async def test_100_concurrent_calls_are_batched_and_match_unbatched() -> None:
    inner = ThreadRecordingEmbedder(dimension=16, delay=0.01, query_differs=True)
    batcher = MicroBatcher(inner, max_batch=64, max_wait_ms=5)
    texts = [f"query number {i} about topic {i % 7}" for i in range(100)]
    results = await asyncio.gather(*(batcher.embed_one(t, "query") for t in texts))
    assert inner.calls <= 5  # 100 calls -> a handful of batches
    assert batcher.batches == inner.calls
    assert max(len(t) for t, _ in inner.log) <= 64
    assert threading.get_ident() not in inner.threads  # never on the event loop thread
    unbatched = FakeEmbedder(dimension=16, query_differs=True)
    for text, vec in zip(texts, results, strict=True):
        assert vec.shape == (16,) and vec.dtype == np.float32
        np.testing.assert_allclose(vec, unbatched.embed([text], "query")[0], atol=1e-7)
    await batcher.aclose()


async def test_input_types_never_share_a_batch() -> None:
    inner = FakeEmbedder(dimension=8, query_differs=True)
    batcher = MicroBatcher(inner, max_batch=64, max_wait_ms=5)
    q, d = await asyncio.gather(batcher.embed_one("x", "query"), batcher.embed_one("x", "document"))
    assert {it for _, it in inner.log} == {"query", "document"}
    assert all(len(t) == 1 for t, _ in inner.log)
    assert not np.allclose(q, d)
    await batcher.aclose()


async def test_lone_call_waits_at_most_the_window() -> None:
    inner = FakeEmbedder(dimension=8)
    batcher = MicroBatcher(inner, max_batch=64, max_wait_ms=5)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await batcher.embed_one("alone")
    assert loop.time() - t0 < 0.5
    assert inner.calls == 1
    await batcher.aclose()


async def test_full_batch_goes_out_without_waiting_for_the_window() -> None:
    inner = FakeEmbedder(dimension=8)
    batcher = MicroBatcher(inner, max_batch=10, max_wait_ms=10_000)
    await asyncio.wait_for(
        asyncio.gather(*(batcher.embed_one(f"t{i}") for i in range(10))), timeout=5
    )
    assert [len(t) for t, _ in inner.log] == [10]
    await batcher.aclose()


async def test_model_error_reaches_every_caller_and_batcher_recovers() -> None:
    inner = FakeEmbedder(dimension=8, fail_with=ProviderError("upstream down"))
    batcher = MicroBatcher(inner, max_batch=8, max_wait_ms=2)
    results = await asyncio.gather(
        *(batcher.embed_one(f"t{i}") for i in range(5)), return_exceptions=True
    )
    assert all(isinstance(r, ProviderError) for r in results)
    inner.fail_with = None
    vec = await batcher.embed_one("after recovery")
    assert vec.shape == (8,)
    await batcher.aclose()


async def test_cancelled_caller_is_skipped() -> None:
    inner = FakeEmbedder(dimension=8)
    batcher = MicroBatcher(inner, max_batch=64, max_wait_ms=50)
    doomed = asyncio.ensure_future(batcher.embed_one("cancel me"))
    kept = asyncio.ensure_future(batcher.embed_one("keep me"))
    await asyncio.sleep(0)
    doomed.cancel()
    vec = await kept
    assert vec.shape == (8,)
    assert inner.log == [(["keep me"], "query")]
    await batcher.aclose()


async def test_bad_input_is_refused_before_queueing() -> None:
    batcher = MicroBatcher(FakeEmbedder(dimension=8))
    with pytest.raises(InvalidInput):
        await batcher.embed_one("x", "passage")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        MicroBatcher(FakeEmbedder(), max_batch=0)
    await batcher.aclose()


def test_usable_from_successive_event_loops() -> None:
    inner = FakeEmbedder(dimension=8)
    batcher = MicroBatcher(inner, max_batch=4, max_wait_ms=1)
    for _ in range(2):
        vec = asyncio.run(batcher.embed_one("again"))
        assert vec.shape == (8,)
    assert inner.calls == 2


class OverlapEmbedder(FakeEmbedder):
    """Counts how many embed() calls run at the same moment."""

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self._guard = threading.Lock()
        self.running = 0
        self.peak = 0

    def embed(self, texts, input_type="document"):  # type: ignore[no-untyped-def]
        with self._guard:
            self.running += 1
            self.peak = max(self.peak, self.running)
        try:
            return super().embed(texts, input_type)
        finally:
            with self._guard:
                self.running -= 1


@pytest.mark.parametrize("workers", [1, 2, 3])
async def test_at_most_workers_batches_run_at_once(workers: int) -> None:
    inner = OverlapEmbedder(dimension=8, delay=0.05)
    batcher = MicroBatcher(inner, max_batch=4, max_wait_ms=1, workers=workers)
    texts = [f"t{i}" for i in range(40)]
    results = await asyncio.gather(*(batcher.embed_one(t) for t in texts))
    assert inner.peak == workers  # the second core is used, never oversubscribed
    for text, vec in zip(texts, results, strict=True):  # each caller still gets its own row
        np.testing.assert_allclose(vec, FakeEmbedder(dimension=8).embed([text])[0], atol=1e-7)
    assert batcher.stats() == {"batches": inner.calls, "texts": 40,
                               "mean_batch": round(40 / inner.calls, 2)}
    assert max(len(t) for t, _ in inner.log) <= 4
    await batcher.aclose()


async def test_busy_workers_let_the_next_batch_grow() -> None:
    # While the only worker is busy, callers queue up and leave together.
    inner = FakeEmbedder(dimension=8, delay=0.1)
    batcher = MicroBatcher(inner, max_batch=64, max_wait_ms=0, workers=1)
    first = asyncio.ensure_future(batcher.embed_one("first"))
    await asyncio.sleep(0.02)  # "first" is now in the model
    await asyncio.gather(first, *(batcher.embed_one(f"t{i}") for i in range(20)))
    assert [len(t) for t, _ in inner.log] == [1, 20]
    await batcher.aclose()


async def test_cached_text_is_answered_without_a_batch() -> None:
    from ragline.providers.embedders.cache import CachedEmbedder

    inner = FakeEmbedder(dimension=8, query_differs=True)
    batcher = MicroBatcher(CachedEmbedder(inner), max_batch=64, max_wait_ms=10_000)
    first = await asyncio.wait_for(
        asyncio.gather(*(batcher.embed_one(f"q{i}", "query") for i in range(64))), timeout=5)
    assert batcher.batches == 1
    again = await asyncio.wait_for(batcher.embed_one("q7", "query"), timeout=1)  # no window
    np.testing.assert_array_equal(again, first[7])
    assert batcher.batches == 1 and inner.calls == 1
    await batcher.aclose()


class PoisonEmbedder(FakeEmbedder):
    """A model that breaks on one text (as a tokenizer or graph bug would)."""

    def embed(self, texts, input_type="document"):  # type: ignore[no-untyped-def]
        if "poison" in texts:
            raise RuntimeError("the model broke on a text")
        return super().embed(texts, input_type)


async def test_a_text_that_breaks_the_model_fails_its_own_caller_only() -> None:
    inner = PoisonEmbedder(dimension=8)
    batcher = MicroBatcher(inner, max_batch=8, max_wait_ms=50)
    texts = ["fine one", "poison", "fine two"]
    res = await asyncio.gather(*(batcher.embed_one(t) for t in texts), return_exceptions=True)
    assert isinstance(res[1], RuntimeError)
    for i in (0, 2):
        vec = res[i]
        assert isinstance(vec, np.ndarray)
        np.testing.assert_allclose(vec, FakeEmbedder(dimension=8).embed([texts[i]], "query")[0],
                                   atol=1e-7)
    await batcher.aclose()


async def test_an_upstream_outage_is_not_retried_text_by_text() -> None:
    inner = FakeEmbedder(dimension=8, fail_with=ProviderError("upstream down"))
    batcher = MicroBatcher(inner, max_batch=8, max_wait_ms=50)
    res = await asyncio.gather(*(batcher.embed_one(f"t{i}") for i in range(5)),
                               return_exceptions=True)
    assert all(isinstance(r, ProviderError) for r in res)
    assert inner.calls == 1  # one call for the batch, not one more per text
    await batcher.aclose()


async def test_by_default_a_lone_query_is_embedded_at_once() -> None:
    inner = FakeEmbedder(dimension=8)
    batcher = MicroBatcher(inner)  # the defaults: no wait window
    task = asyncio.ensure_future(batcher.embed_one("alone"))
    for _ in range(5):
        await asyncio.sleep(0)  # loop turns only: no timer could have fired
    assert batcher.batches == 1
    assert (await task).shape == (8,)
    await batcher.aclose()
