"""CachedEmbedder: only misses reach the model, keys separate what must differ, LRU bounds
by entries and by bytes."""

from __future__ import annotations

import logging
import threading

import numpy as np
import pytest

from ragline.providers.embedders.base import Embedder
from ragline.providers.embedders.cache import ENTRY_OVERHEAD, CachedEmbedder, entry_bytes
from ragline.testing.fake_embedder import FakeEmbedder


def test_second_identical_query_does_not_call_the_model() -> None:
    inner = FakeEmbedder(dimension=8)
    cached = CachedEmbedder(inner, max_entries=100)
    first = cached.embed(["what is rag?"], "query")
    second = cached.embed(["what is rag?"], "query")
    assert inner.calls == 1
    np.testing.assert_array_equal(first, second)
    assert cached.stats() == {"hits": 1, "misses": 1, "size": 1, "bytes": 32 + ENTRY_OVERHEAD}


def test_only_missing_texts_reach_the_model_in_one_call_and_order_is_kept() -> None:
    inner = FakeEmbedder(dimension=8)
    cached = CachedEmbedder(inner)
    cached.embed(["a b", "c d"])
    out = cached.embed(["e f", "a b", "g h", "e f", "c d"])
    assert inner.log[-1] == (["e f", "g h"], "document")  # deduplicated misses only
    assert inner.calls == 2
    expected = np.stack([inner.vector(t) for t in ["e f", "a b", "g h", "e f", "c d"]])
    np.testing.assert_allclose(out, expected, atol=1e-7)
    assert cached.stats() == {"hits": 2, "misses": 5, "size": 4,
                              "bytes": 4 * (32 + ENTRY_OVERHEAD)}


def test_key_includes_input_type_model_and_connection() -> None:
    inner = FakeEmbedder(dimension=8, query_differs=True)
    cached = CachedEmbedder(inner)
    q = cached.embed(["same text"], "query")
    d = cached.embed(["same text"], "document")
    assert inner.calls == 2 and not np.allclose(q, d)
    other = FakeEmbedder(dimension=8, model="other-model", query_differs=True)
    assert cached._key("x", "query") != CachedEmbedder(other)._key("x", "query")
    elsewhere = FakeEmbedder(dimension=8, connection_id="fake:other", query_differs=True)
    assert cached._key("x", "query") != CachedEmbedder(elsewhere)._key("x", "query")


def test_lru_evicts_least_recently_used() -> None:
    inner = FakeEmbedder(dimension=4)
    cached = CachedEmbedder(inner, max_entries=2)
    cached.embed(["one"])
    cached.embed(["two"])
    cached.embed(["one"])  # refresh "one": "two" is now the oldest
    cached.embed(["three"])
    assert cached.stats()["size"] == 2
    calls = inner.calls
    cached.embed(["one", "three"])
    assert inner.calls == calls  # both still cached
    cached.embed(["two"])
    assert inner.calls == calls + 1  # evicted


def test_cached_vectors_cannot_be_mutated_by_callers() -> None:
    cached = CachedEmbedder(FakeEmbedder(dimension=4))
    v = cached.embed(["x"])
    v[0, 0] = 42.0  # the returned array is the caller's own copy
    assert cached.embed(["x"])[0, 0] != 42.0


def test_protocol_delegation_and_health() -> None:
    inner = FakeEmbedder(dimension=12, max_input_tokens=99)
    cached = CachedEmbedder(inner)
    assert isinstance(cached, Embedder)
    assert (cached.model, cached.dimension, cached.max_input_tokens) == ("fake-bow", 12, 99)
    assert cached.connection_id == inner.connection_id
    assert cached.count_tokens("two words") == 2
    assert "embedding_cache" in cached.capabilities()
    cached.embed(["x"])
    assert cached.health().details["cache"] == {"hits": 0, "misses": 1, "size": 1,
                                                "bytes": 48 + ENTRY_OVERHEAD}
    assert cached.embed([]).shape == (0, 12)


def test_hits_are_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    cached = CachedEmbedder(FakeEmbedder(dimension=4))
    cached.embed(["x"])
    with caplog.at_level(logging.DEBUG, logger="ragline.providers.embedders.cache"):
        cached.embed(["x", "y"])
    assert any("1 hit(s), 1 miss(es)" in r.getMessage() for r in caplog.records)


def test_thread_safe_under_concurrent_use() -> None:
    inner = FakeEmbedder(dimension=8)
    cached = CachedEmbedder(inner, max_entries=50)
    texts = [f"text {i}" for i in range(80)]
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        try:
            for _ in range(200):
                batch = list(rng.choice(texts, size=3))
                out = cached.embed(batch)
                expected = np.stack([inner.vector(t) for t in batch])
                np.testing.assert_allclose(out, expected, atol=1e-7)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    stats = cached.stats()
    assert stats["size"] <= 50 and stats["hits"] + stats["misses"] == 4 * 200 * 3
    assert stats["bytes"] == stats["size"] * (8 * 4 + ENTRY_OVERHEAD)  # the count stays true


def test_lookup_answers_hits_only_and_never_calls_the_model() -> None:
    inner = FakeEmbedder(dimension=8, query_differs=True)
    cached = CachedEmbedder(inner, max_entries=10)
    assert cached.lookup("what is rag?", "query") is None  # a miss is not counted
    vec = cached.embed(["what is rag?"], "query")[0]
    np.testing.assert_array_equal(cached.lookup("what is rag?", "query"), vec)
    assert cached.lookup("what is rag?", "document") is None  # input_type is in the key
    assert inner.calls == 1
    assert cached.stats() == {"hits": 1, "misses": 1, "size": 1, "bytes": 32 + ENTRY_OVERHEAD}
    assert CachedEmbedder(inner, max_entries=0).lookup("what is rag?", "query") is None


def test_the_byte_bound_evicts_least_recently_used_whatever_the_entry_bound() -> None:
    inner = FakeEmbedder(dimension=64)  # 256 bytes of data an entry
    each = 64 * 4 + ENTRY_OVERHEAD
    cached = CachedEmbedder(inner, max_entries=1_000, max_bytes=3 * each)
    cached.embed(["one", "two", "three"])
    cached.embed(["one"])  # refresh "one": "two" is now the oldest
    cached.embed(["four"])
    assert cached.stats()["size"] == 3 and cached.stats()["bytes"] == 3 * each
    calls = inner.calls
    cached.embed(["one", "three", "four"])
    assert inner.calls == calls  # all still cached
    cached.embed(["two"])
    assert inner.calls == calls + 1  # it was evicted
    assert cached.stats()["bytes"] <= 3 * each


def test_the_same_bytes_hold_fewer_wide_vectors() -> None:
    budget = 20_000
    narrow = CachedEmbedder(FakeEmbedder(dimension=16), max_bytes=budget)
    wide = CachedEmbedder(FakeEmbedder(dimension=1024), max_bytes=budget)
    texts = [f"text {i}" for i in range(100)]
    narrow.embed(texts)
    wide.embed(texts)
    assert narrow.stats()["size"] == budget // (16 * 4 + ENTRY_OVERHEAD) == 44
    assert wide.stats()["size"] == budget // (1024 * 4 + ENTRY_OVERHEAD) == 4
    assert wide.stats()["bytes"] == 4 * entry_bytes(wide.embed(["text 99"])[0])
    # the most recent texts are the ones kept
    calls = wide.inner.calls  # type: ignore[attr-defined]
    wide.embed(texts[-4:])
    assert wide.inner.calls == calls  # type: ignore[attr-defined]


def test_a_vector_larger_than_the_byte_bound_is_not_kept_and_zero_turns_it_off() -> None:
    inner = FakeEmbedder(dimension=64)
    tiny = CachedEmbedder(inner, max_bytes=100)
    tiny.embed(["x"])
    tiny.embed(["x"])
    assert inner.calls == 2 and tiny.stats()["size"] == 0 and tiny.stats()["bytes"] == 0
    off = CachedEmbedder(inner, max_bytes=0)
    off.embed(["x"])
    assert off.lookup("x", "document") is None and off.stats()["bytes"] == 0
    with pytest.raises(ValueError, match="max_bytes"):
        CachedEmbedder(inner, max_bytes=-1)


def test_clear_forgets_the_bytes_too() -> None:
    cached = CachedEmbedder(FakeEmbedder(dimension=8))
    cached.embed(["a", "b"])
    cached.clear()
    assert cached.stats()["size"] == 0 and cached.stats()["bytes"] == 0
