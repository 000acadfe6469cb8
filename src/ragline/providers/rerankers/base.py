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
from ragline.providers.base import Health, ProviderConfig, config_schema

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


class LocalCrossEncoder:
    """What every in-process cross-encoder shares around its own scorer: ``rerank()``
    (:func:`score_and_rank` over ``_score``), the ``/health`` object, the schema of its
    ``Config``, its capabilities and a health probe that scores one pair.

    A subclass sets ``Config``, ``CAPABILITIES`` and ``config`` (with ``model``,
    ``max_documents`` and ``max_chars``) and implements ``_score``.
    """

    Config: ClassVar[type[ProviderConfig]]
    CAPABILITIES: ClassVar[list[str]]
    config: Any

    @property
    def model(self) -> str:
        return str(self.config.model)

    def _score(self, pairs: list[tuple[str, str]]) -> Any:
        """One score per (query, text) pair, higher is more relevant."""
        raise NotImplementedError

    def rerank(
        self, query: str, documents: Sequence[Mapping[str, Any]], top_k: int | None = None
    ) -> list[RerankedItem]:
        """Score every document, sort by score descending, then keep ``top_k``.

        Ties keep input order so results are deterministic. Raises
        :class:`InvalidInput` for too many documents or a bad ``top_k`` and
        :class:`RerankError` (500) when the model itself fails.
        """
        return score_and_rank(
            query, documents, top_k, max_documents=self.config.max_documents,
            max_chars=self.config.max_chars, model=self.model, score_pairs=self._score,
        )

    def health_info(self) -> dict[str, str]:
        """The ``cross_encoder`` object for ``GET /health`` (spec 000)."""
        return {"model": self.model, "status": "loaded"}

    @classmethod
    def connection_schema(cls) -> dict[str, Any]:
        return config_schema(cls.Config)

    def capabilities(self) -> list[str]:
        return list(self.CAPABILITIES)

    def health(self) -> Health:
        """One tiny pair scored: the model is loaded *and* runs."""
        details: dict[str, Any] = dict(self.health_info())
        try:
            self.rerank("health", [{"id": "probe", "text": "check"}])
        except Exception as exc:  # health reports, it does not raise
            return Health.now("down", details, error=f"scoring failed ({type(exc).__name__})")
        return Health.now("ok", details)
