"""The reranker protocol.

A reranker takes a query and candidate documents (``{"id", "text"}``) and gives
back *every* candidate's relevance score in descending order, cut to ``top_k``
only after all were scored (spec 000: "scores all 10 documents ... returns only
top 3"). ``original_rank`` is the 1-based input position so callers can map
results back even when ids repeat.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Protocol, TypedDict, runtime_checkable

from ragline.providers.base import Health, ProviderConfig


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
