"""The vector-store protocol.

A store keeps shards (one per collection generation) addressed by an opaque
``key`` that the catalog hands out; collection names, metadata and embedding
settings live in the catalog, not here. That split is what lets "empty a
collection" be a pointer swap instead of a 50,000-point delete.

Every method takes the tenant explicitly: isolation is enforced by the store's
own filter on every call, not left to callers. Writes name one tenant; reads
(``get``, ``list_page``, ``count``, ``distinct``, ``query_batch``) take a
:data:`~ragline.core.tenancy.TenantScope`: one tenant, or a tuple of them (a
reader's own tenant and the shared corpus ``*``), which the store turns into its
``tenant in (...)`` condition. ``get`` answers one record per id: the first
tenant's of the scope that has it (core/tenancy.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar, Protocol, runtime_checkable

from ragline.core.filters import Node
from ragline.core.tenancy import TenantScope
from ragline.core.types import Page, Record, Scalar, ScoredRecord, StoreQuery
from ragline.providers.base import Health, ProviderConfig


@runtime_checkable
class VectorStore(Protocol):
    name: ClassVar[str]
    kind: ClassVar[str]
    Config: ClassVar[type[ProviderConfig]]

    def create_shard(self, key: str, dimension: int) -> None:
        """Create an empty shard; a no-op if it exists with the same dimension."""

    def has_shard(self, key: str) -> bool: ...

    def shard_keys(self) -> list[str]:
        """Every shard on disk (to find orphans after a crash)."""

    def drop_shard(self, key: str) -> None:
        """Remove a shard and its files; a no-op if it does not exist."""

    def upsert(self, key: str, records: list[Record]) -> None:
        """Insert or replace records (all have embeddings of the shard's dimension).

        Callers validate first; the store writes the batch as one operation.
        """

    def upsert_parts(self, key: str, parts: Iterable[list[Record]]) -> None:
        """:meth:`upsert` of every part's records, as one operation. ``parts`` may
        validate each part as it is asked for: a store may work on a part while the
        next one is made (Qdrant Edge makes its points), and an exception from
        ``parts`` ends the call with nothing written."""

    def get(
        self, key: str, tenant: TenantScope, ids: list[str], with_vectors: bool = False
    ) -> list[Record]:
        """Records in the order of ``ids`` (missing ones left out).

        ``with_vectors`` returns embeddings too, which lets ingestion reuse the
        vectors of chunks whose text did not change instead of re-embedding them.
        """

    def delete_ids(self, key: str, tenant: str, ids: list[str]) -> int: ...

    def delete_where(self, key: str, tenant: str, where: Node | None) -> int: ...

    def list_page(
        self, key: str, tenant: TenantScope, where: Node | None, limit: int, offset: int
    ) -> Page: ...

    def count(self, key: str, tenant: TenantScope, where: Node | None) -> int: ...

    def has_text_index(self, key: str) -> bool:
        """Whether sparse and hybrid queries can rank this shard by BM25."""

    def query_batch(self, key: str, queries: list[StoreQuery]) -> list[list[ScoredRecord]]:
        """Several first-stage searches on one shard in one call, results in order.

        The only search method: a batch of one is a single search, and each result
        equals what that query returns alone. The search path coalesces concurrent
        requests into these calls. An error fails the whole call (the caller retries
        queries one by one to isolate it). An unknown shard gives empty results.
        """
        ...

    def distinct(self, key: str, tenant: TenantScope, field: str) -> list[Scalar]: ...

    def size_bytes(self, key: str) -> int: ...

    def optimize(self, key: str) -> bool: ...

    @classmethod
    def connection_schema(cls) -> dict[str, Any]: ...

    def capabilities(self) -> list[str]: ...

    def health(self) -> Health: ...

    def close(self) -> None: ...


def scalar_sort_key(v: Any) -> tuple[int, Any]:
    """The order ``distinct()`` answers in, the same for every store: booleans, then
    numbers, then everything else as text (mixed types cannot be compared directly)."""
    if isinstance(v, bool):
        return (0, v)
    if isinstance(v, int | float):
        return (1, v)
    return (2, str(v))
