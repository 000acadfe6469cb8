"""Conformance suite every reranker provider runs (see :mod:`provider_conformance`).

The contract is spec 000's ``/rerank``: every document scored, results in
descending score order, cut to ``top_k`` only after all were scored, each with
its ``id`` and 1-based ``original_rank``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ragline.testing.provider_conformance import ProviderContract

QUERY = "how do ROS 2 nodes exchange messages?"
DOCS = [{"id": f"d{i}", "text": t} for i, t in enumerate([
    "ROS 2 nodes publish and subscribe to topics",
    "Bake the bread for forty minutes",
    "Services are request/response calls between nodes",
    "The weather in Lisbon is mild",
    "DDS is the middleware under ROS 2 topics",
])]


class RerankerConformance(ProviderContract):
    KIND: ClassVar[str] = "rerankers"

    def test_identity(self, provider: Any) -> None:
        assert isinstance(provider.model, str) and provider.model
        info = provider.health_info()
        assert info["model"] and info["status"]

    def test_scores_every_document_in_descending_order(self, provider: Any) -> None:
        out = provider.rerank(QUERY, DOCS)
        assert sorted(r["original_rank"] for r in out) == list(range(1, len(DOCS) + 1))
        scores = [r["score"] for r in out]
        assert scores == sorted(scores, reverse=True)
        assert all(isinstance(s, float) for s in scores)
        for r in out:
            assert r["id"] == DOCS[r["original_rank"] - 1]["id"]

    def test_top_k_cuts_after_scoring_all(self, provider: Any) -> None:
        full = provider.rerank(QUERY, DOCS)
        top = provider.rerank(QUERY, DOCS, top_k=2)
        assert [r["id"] for r in top] == [r["id"] for r in full[:2]]

    def test_deterministic(self, provider: Any) -> None:
        a, b = provider.rerank(QUERY, DOCS), provider.rerank(QUERY, DOCS)
        assert [(r["id"], round(r["score"], 5)) for r in a] == \
            [(r["id"], round(r["score"], 5)) for r in b]

    def test_empty_input(self, provider: Any) -> None:
        assert provider.rerank(QUERY, []) == []

    def check_health_details(self, provider: Any, details: dict[str, Any]) -> None:
        assert details["model"] == provider.model
