"""Domain types shared by every layer.

Metadata values are JSON scalars or flat lists of scalars: that is what every
supported store can index and filter, so anything else is refused at the edge
instead of being half-supported deeper down.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Union

import numpy as np
import numpy.typing as npt

from ragline.core.tenancy import TenantScope

Scalar = Union[str, int, float, bool]
MetaValue = Union[Scalar, None, list[Scalar]]
Metadata = dict[str, MetaValue]
Vector = npt.NDArray[np.float32]

if TYPE_CHECKING:
    from ragline.core.filters import Node


@dataclass(slots=True)
class Record:
    """A document or chunk as stored: id, text, metadata, embedding, tenant.

    ``values``: optionally, the embedding as the caller sent it, a list of Python
    numbers already validated to equal ``embedding`` once rounded to float32. A store
    whose client wants Python lists (Qdrant Edge) hands these over instead of making
    new ones with ``tolist()`` (~6 ms per 1,000 384-d vectors of a bulk write)."""

    id: str
    text: str
    metadata: Metadata
    embedding: Vector | None = None
    tenant: str = "default"
    values: list[float] | None = field(default=None, repr=False, compare=False)


@dataclass(slots=True)
class ScoredRecord:
    """A search hit. ``tenant``: whose record it is, where the store says (a search over a
    reader's scope mixes its own records and the shared corpus's, ``*``)."""

    id: str
    text: str
    metadata: Metadata
    score: float
    embedding: Vector | None = None
    tenant: str | None = None


class SearchMode(StrEnum):
    """How a first-stage search ranks: by vector, by BM25 of the text, or both fused."""

    DENSE = "dense"
    SPARSE = "sparse"
    HYBRID = "hybrid"


class Fusion(StrEnum):
    """How a hybrid search fuses its dense and BM25 candidate lists."""

    RRF = "rrf"
    DBSF = "dbsf"


@dataclass(slots=True, frozen=True)
class StoreQuery:
    """One first-stage search on a shard, as :meth:`VectorStore.query_batch` takes it.

    ``dense`` ranks by ``vector``, ``sparse`` by BM25 of ``text``, ``hybrid`` fuses
    both candidate lists (``candidates`` deep each) with ``fusion`` (``rrf`` with
    ``rrf_k``, or ``dbsf``). ``score_threshold`` applies to dense scores only.
    ``tenant``: the tenants searched (a reader's own and the shared corpus:
    :mod:`ragline.core.tenancy`).
    """

    tenant: TenantScope
    mode: SearchMode
    limit: int
    vector: Vector | None = None
    text: str = ""
    where: Node | None = None
    with_vectors: bool = False
    score_threshold: float | None = None
    rrf_k: int = 60
    candidates: int = 100
    fusion: Fusion = Fusion.RRF

    def __post_init__(self) -> None:
        # plain strings are accepted (the enums are str-valued) and normalised, so a
        # typo fails here rather than deep inside a store's request builder
        object.__setattr__(self, "mode", SearchMode(self.mode))
        object.__setattr__(self, "fusion", Fusion(self.fusion))


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
