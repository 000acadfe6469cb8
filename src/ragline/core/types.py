"""Domain types shared by every layer.

Metadata values are JSON scalars or flat lists of scalars: that is what every
supported store can index and filter, so anything else is refused at the edge
instead of being half-supported deeper down.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

import numpy as np
import numpy.typing as npt

Scalar = Union[str, int, float, bool]
MetaValue = Union[Scalar, None, list[Scalar]]
Metadata = dict[str, MetaValue]
Vector = npt.NDArray[np.float32]


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
