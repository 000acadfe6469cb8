"""CachedEmbedder: only misses reach the model, keys separate what must differ, LRU bound."""

from __future__ import annotations

import logging
import threading

import numpy as np
import pytest

from ragline.providers.embedders.base import Embedder
from ragline.providers.embedders.cache import CachedEmbedder
from ragline.testing.fake_embedder import FakeEmbedder


def test_second_identical_query_does_not_call_the_model() -> None:
    inner = FakeEmbedder(dimension=8)
    cached = CachedEmbedder(inner, max_entries=100)
    first = cached.embed(["what is rag?"], "query")
    second = cached.embed(["what is rag?"], "query")
    assert inner.calls == 1
    np.testing.assert_array_equal(first, second)
    assert cached.stats() == {"hits": 1, "misses": 1, "size": 1}


def test_only_missing_texts_reach_the_model_in_one_call_and_order_is_kept() -> None:
    inner = FakeEmbedder(dimension=8)
    cached = CachedEmbedder(inner)
    cached.embed(["a b", "c d"])
    out = cached.embed(["e f", "a b", "g h", "e f", "c d"])
    assert inner.log[-1] == (["e f", "g h"], "document")  # deduplicated misses only
    assert inner.calls == 2
    expected = np.stack([inner.vector(t) for t in ["e f", "a b", "g h", "e f", "c d"]])
    np.testing.assert_allclose(out, expected, atol=1e-7)
    assert cached.stats() == {"hits": 2, "misses": 5, "size": 4}


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
    assert cached.health().details["cache"] == {"hits": 0, "misses": 1, "size": 1}
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


def test_lookup_answers_hits_only_and_never_calls_the_model() -> None:
    inner = FakeEmbedder(dimension=8, query_differs=True)
    cached = CachedEmbedder(inner, max_entries=10)
    assert cached.lookup("what is rag?", "query") is None  # a miss is not counted
    vec = cached.embed(["what is rag?"], "query")[0]
    np.testing.assert_array_equal(cached.lookup("what is rag?", "query"), vec)
    assert cached.lookup("what is rag?", "document") is None  # input_type is in the key
    assert inner.calls == 1
    assert cached.stats() == {"hits": 1, "misses": 1, "size": 1}
    assert CachedEmbedder(inner, max_entries=0).lookup("what is rag?", "query") is None
