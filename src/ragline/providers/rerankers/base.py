"""The reranker protocol.

A reranker takes a query and candidate documents (``{"id", "text"}``) and gives
back *every* candidate's relevance score in descending order, cut to ``top_k``
only after all were scored (spec 000: "scores all 10 documents ... returns only
top 3"). ``original_rank`` is the 1-based input position so callers can map
results back even when ids repeat.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Protocol, TypedDict, runtime_checkable

import numpy as np

from ragline.errors import InvalidInput, RaglineError, RerankError
from ragline.providers.base import Health, ProviderConfig

log = logging.getLogger(__name__)


class RerankedItem(TypedDict):
    """One scored document, as ``/rerank`` returns it."""

    id: Any
    score: float
    original_rank: int


@runtime_checkable
class Reranker(Protocol):
    name: ClassVar[str]
    kind: ClassVar[str]  # always "reranker"
    Config: ClassVar[type[ProviderConfig]]

    @property
    def model(self) -> str: ...

    def rerank(
        self, query: str, documents: Sequence[Mapping[str, Any]], top_k: int | None = None
    ) -> list[RerankedItem]: ...

    def health_info(self) -> dict[str, str]:
        """The ``cross_encoder`` object of ``GET /health``: ``{"model", "status"}``."""
        ...

    @classmethod
    def connection_schema(cls) -> dict[str, Any]: ...

    def capabilities(self) -> list[str]: ...

    def health(self) -> Health: ...


def score_and_rank(
    query: str,
    documents: Sequence[Mapping[str, Any]],
    top_k: int | None,
    *,
    max_documents: int,
    max_chars: int,
    model: str,
    score_pairs: Callable[[list[tuple[str, str]]], Any],
) -> list[RerankedItem]:
    """The one ``rerank()`` contract every cross-encoder shares, around its scorer.

    Validates before scoring (:class:`InvalidInput` for a bad ``top_k`` or too
    many documents), truncates query and texts to ``max_chars``, scores *every*
    pair with ``score_pairs`` (one score per pair, higher is more relevant),
    then sorts descending with ties in input order so results are deterministic,
    and cuts to ``top_k`` only after all were scored. A scorer failure becomes
    :class:`RerankError` (500) with the model named in the log, not the body.
    """
    if top_k is not None and top_k < 1:
        raise InvalidInput("top_k must be at least 1")
    if len(documents) > max_documents:
        raise InvalidInput(
            f"Too many documents to rerank: {len(documents)} (maximum {max_documents})"
        )
    if not documents:
        return []
    pairs = [(query[:max_chars], str(doc.get("text") or "")[:max_chars]) for doc in documents]
    try:
        scores = np.asarray(score_pairs(pairs), dtype=np.float64)
        if scores.shape != (len(documents),):
            raise ValueError(f"model returned {scores.shape} scores for {len(documents)} pairs")
    except RaglineError:
        raise
    except Exception as exc:
        log.exception("cross-encoder %s failed while scoring", model)
        raise RerankError(f"Reranking failed: {type(exc).__name__}: {exc}") from exc
    order = sorted(range(len(documents)), key=lambda i: (-scores[i], i))
    if top_k is not None:
        order = order[:top_k]
    return [
        {"id": documents[i].get("id"), "score": float(scores[i]), "original_rank": i + 1}
        for i in order
    ]
