"""Domain types shared by every layer.

Metadata values are JSON scalars or flat lists of scalars: that is what every
supported store can index and filter, so anything else is refused at the edge
instead of being half-supported deeper down.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union

import numpy as np
import numpy.typing as npt

Scalar = Union[str, int, float, bool]
MetaValue = Union[Scalar, None, list[Scalar]]
Metadata = dict[str, MetaValue]
Vector = npt.NDArray[np.float32]

if TYPE_CHECKING:
    from ragline.core.filters import Node


@dataclass(slots=True)
class Record:
    """A document or chunk as stored: id, text, metadata, embedding, tenant."""

    id: str
    text: str
    metadata: Metadata
    embedding: Vector | None = None
    tenant: str = "default"


@dataclass(slots=True)
class ScoredRecord:
    id: str
    text: str
    metadata: Metadata
    score: float
    embedding: Vector | None = None


@dataclass(slots=True, frozen=True)
class StoreQuery:
    """One first-stage search on a shard, as :meth:`VectorStore.query_batch` takes it.

    ``dense`` ranks by ``vector``, ``sparse`` by BM25 of ``text``, ``hybrid`` fuses
    both candidate lists (``candidates`` deep each) with ``fusion`` (``rrf`` with
    ``rrf_k``, or ``dbsf``). ``score_threshold`` applies to dense scores only.
    """

    tenant: str
    mode: str
    limit: int
    vector: Vector | None = None
    text: str = ""
    where: Node | None = None
    with_vectors: bool = False
    score_threshold: float | None = None
    rrf_k: int = 60
    candidates: int = 100
    fusion: str = "rrf"


@dataclass(slots=True)
class Page:
    """One page of a listing: ``records`` plus the total number of matches."""

    records: list[Record]
    total: int


@dataclass(slots=True, frozen=True)
class CollectionInfo:
    """A catalog row. Frozen: the catalog caches and shares these (its metadata
    dict must not be mutated either)."""

    name: str
    metadata: dict[str, Any]
    dimension: int | None
    embedding_provider: str | None = None
    embedding_model: str | None = None
    created_at: str = ""
    updated_at: str = ""
    shard: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
