"""Conformance suite every embedder provider runs (see :mod:`provider_conformance`).

Subclass it with ``provider`` (and ideally ``broken``) fixtures::

    class TestMyEmbedder(EmbedderConformance):
        @pytest.fixture
        def provider(self): return registry.build("embedders", "mine", {...})
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest

from ragline.errors import InvalidInput
from ragline.providers.embedders.cache import CachedEmbedder
from ragline.testing.provider_conformance import ProviderContract

TEXTS = ["ROS 2 topics carry messages between nodes", "Disk full: clean old logs",
         "Ünïcödé text — with dashes", "a"]


class EmbedderConformance(ProviderContract):
    KIND: ClassVar[str] = "embedders"

    def test_identity(self, provider: Any) -> None:
        assert isinstance(provider.model, str) and provider.model
        assert isinstance(provider.connection_id, str) and provider.connection_id
        assert provider.max_input_tokens > 0

    def test_embeds_normalised_float32_rows_in_order(self, provider: Any) -> None:
        out = provider.embed(TEXTS, input_type="document")
        assert out.dtype == np.float32 and out.shape == (len(TEXTS), provider.dimension)
        assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-3)
        one = provider.embed([TEXTS[1]], input_type="document")
        assert np.allclose(one[0], out[1], atol=1e-4)  # batch position does not matter

    def test_deterministic_and_distinct(self, provider: Any) -> None:
        a = provider.embed(TEXTS[:2], input_type="query")
        b = provider.embed(TEXTS[:2], input_type="query")
        assert np.allclose(a, b, atol=1e-5)
        assert not np.allclose(a[0], a[1], atol=1e-3)

    def test_query_and_document_input_types(self, provider: Any) -> None:
        for input_type in ("query", "document"):
            out = provider.embed(["where do nodes talk"], input_type=input_type)
            assert out.shape == (1, provider.dimension)

    def test_refuses_an_unknown_input_type(self, provider: Any) -> None:
        with pytest.raises((InvalidInput, ValueError)):
            provider.embed(["x"], input_type="sideways")

    def test_counts_tokens(self, provider: Any) -> None:
        short, long = provider.count_tokens("nodes"), provider.count_tokens("nodes " * 50)
        assert isinstance(short, int) and 0 < short < long

    def test_cache_in_front_of_it_hits_on_repeats(self, provider: Any) -> None:
        cached = CachedEmbedder(provider, max_entries=100)
        first = cached.embed(TEXTS[:2], input_type="query")
        again = cached.embed(TEXTS[:2], input_type="query")
        assert np.array_equal(first, again)
        assert cached.stats()["hits"] == 2

    def check_health_details(self, provider: Any, details: dict[str, Any]) -> None:
        assert details["model"] == provider.model
        assert details["dimension"] == provider.dimension
