"""Documents in a collection: add (upsert), list, get, delete, search, distinct values.

Every write is validated completely before the store is touched, and each
request reaches the store as one batch, so a request is written whole or not
at all (see :mod:`ragline.services.corpus.validation`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ragline.core.filters import Node, key_problem
from ragline.core.ids import new_doc_id
from ragline.core.tenancy import TenantScope
from ragline.core.types import CollectionInfo, Page, Record, Scalar
from ragline.errors import InvalidInput, PayloadTooLarge, ShardGone
from ragline.providers.stores.base import VectorStore
from ragline.services.corpus.collections import MSG_NOT_EXIST, CollectionService
from ragline.services.corpus.diskspace import DiskGuard
from ragline.services.corpus.validation import (
    MSG_NO_EMBEDDINGS,
    MSG_REQUIRED,
    InputLimits,
    check_dimension,
    check_metadata,
    check_metadata_size,
    check_text_size,
    check_vector,
    check_vectors,
    metadata_fits,
)

if TYPE_CHECKING:
    from ragline.services.corpus.embedders import EmbedderPool


@dataclass
class DocumentInput:
    text: str
    metadata: dict[str, Any] | None = None
    embedding: Any = None
    id: str | None = None


class DocumentService:
    def __init__(
        self, collections: CollectionService, store: VectorStore, max_per_request: int,
        embedders: EmbedderPool | None = None, limits: InputLimits | None = None,
        disk: DiskGuard | None = None,
    ) -> None:
        self.disk = disk or DiskGuard.unlimited()
        self.limits = limits or InputLimits()
        self.max_dimension = self.limits.max_dimension
        self.collections = collections
        self.store = store
        self.max_per_request = max_per_request
        self.embedders = embedders

    def _has_embedder(self, info: CollectionInfo) -> bool:
        return self.embedders is not None and self.embedders.known(info.embedding_provider)

    # -- writes ------------------------------------------------------------------------
    def add(self, name: str, docs: list[DocumentInput] | None, tenant: str) -> list[str]:
        if not docs:
            raise InvalidInput(MSG_REQUIRED)
        if len(docs) > self.max_per_request:
            raise PayloadTooLarge(
                f"Too many documents in one request: {len(docs)} (maximum "
                f"{self.max_per_request}, setting max_documents_per_request); send them in "
                "several requests"
            )
        info = self.collections.get(name)
        missing = [i for i, d in enumerate(docs) if d.embedding is None]
        if missing and not self._has_embedder(info):
            raise InvalidInput(MSG_NO_EMBEDDINGS)
        ids: list[str] = []
        seen: set[str] = set()
        max_chars = self.limits.max_document_chars
        for i, d in enumerate(docs):
            if not isinstance(d.text, str):
                raise InvalidInput(f"Invalid document at index {i}: 'text' must be a string")
            doc_id = d.id if d.id is not None else new_doc_id()
            if not isinstance(doc_id, str) or not doc_id:
                raise InvalidInput(
                    f"Invalid document at index {i}: 'id' must be a non-empty string"
                )
            if doc_id in seen:
                raise InvalidInput(f"Duplicate document id '{doc_id}' in request (index {i})")
            seen.add(doc_id)
            ids.append(doc_id)
            if len(d.text) > max_chars:
                check_text_size(d.text, self.limits, f"document at index {i}")
            if not metadata_fits(d.metadata, self.limits):  # else the checks below raise
                meta = check_metadata(d.metadata, f"document at index {i}")
                check_metadata_size(meta, self.limits, f"document at index {i}")
        if self._write_in_parts(name, docs, ids, tenant, info, missing):
            return ids
        vectors: list[np.ndarray | None] = [None] * len(docs)
        values: list[list[float] | None] = [None] * len(docs)
        dim0: int | None = None
        given = [i for i, d in enumerate(docs) if d.embedding is not None]
        fast = check_vectors([docs[i].embedding for i in given], self.max_dimension)
        if fast is not None:  # all valid, one length: no per-number loop
            for row, i in enumerate(given):
                vectors[i] = fast[row]
                raw = docs[i].embedding  # what the caller sent: rounds to fast[row]
                values[i] = raw if type(raw) is list else None
            given = []
        for i in given:
            raw = docs[i].embedding  # numpy rows (api/bulk_json, library callers) as lists
            if isinstance(raw, np.ndarray):
                raw = raw.tolist()
            vec = check_vector(raw, f"document at index {i}", self.max_dimension)
            if dim0 is None:
                dim0 = len(vec)
            elif len(vec) != dim0:
                first = next(j for j, v in enumerate(vectors) if v is not None)
                raise InvalidInput(
                    f"Embedding dimension mismatch: document at index {i} has {len(vec)} "
                    f"dimensions, but document at index {first} has {dim0}"
                )
            vectors[i] = vec
        if missing:
            assert self.embedders is not None and info.embedding_provider
            embedded = self.embedders.embed_documents(
                info.embedding_provider, info.embedding_model, [docs[i].text for i in missing])
            for j, i in enumerate(missing):
                vectors[i] = np.asarray(embedded[j], dtype=np.float32)
        dim = len(vectors[0])  # type: ignore[arg-type]
        for i, v in enumerate(vectors):
            assert v is not None
            check_dimension(len(v), dim, f"document at index {i}", name)
        records = [
            Record(ids[i], d.text, dict(d.metadata or {}), vectors[i], tenant, values[i])
            for i, d in enumerate(docs)
        ]
        # 507 before the store is touched: a full disk kills Edge with SIGBUS (issue 10)
        self.disk.check("write documents", need=_estimate(records))
        with self.collections.lock(name):
            info = self.collections.get(name)
            check_dimension(dim, info.dimension, "the documents", name)
            if info.dimension is None:
                self.store.create_shard(info.shard, dim)
                self.collections.set_dimension(name, dim)
            elif not self.store.has_shard(info.shard):
                self.store.create_shard(info.shard, info.dimension)
        # the shard key is re-read so a concurrent "empty" is never written around;
        # if an empty swaps the shard between that read and the write, write again
        try:
            self.store.upsert(self.collections.get(name).shard, records)
        except ShardGone:
            self.store.upsert(self.collections.get(name).shard, records)
        return ids

    def _write_in_parts(self, name: str, docs: list[DocumentInput], ids: list[str],
                        tenant: str, info: CollectionInfo, missing: list[int]) -> bool:
        """A large batch of pre-computed vectors for an existing shard, written while its
        vectors are checked part by part (:meth:`VectorStore.upsert_parts`: a shard
        process makes one part's points while the next part is checked). Only when every
        part passes the all-at-once check (:func:`check_vectors`) with the collection's
        dimension; at the first that does not, nothing has been written and this returns
        False: the whole-batch path checks again and raises what it always did, for the
        same document. Also False when the collection changed under the write.

        Only for vectors given as lists of Python numbers (library callers, bodies that
        orjson reads): checking those is most of the caller's work, which the parts
        overlap. Rows already read into one matrix (``api/bulk_json``) cost next to
        nothing to check; there the extra calls to the shard process measured x0.91-0.96
        the documents/s of one part (BENCHMARKS.md, "Bulk writes in parts")."""
        if missing or len(docs) < 2 * WRITE_PART \
                or not all(type(d.embedding) is list for d in docs):
            return False
        info = self.collections.get(name)  # re-read, as below: an "empty" swaps shards
        if info.dimension is None or not self.store.has_shard(info.shard):
            return False
        try:
            self.store.upsert_parts(info.shard, self._checked_parts(docs, ids, tenant, info))
        except (_WholeBatch, ShardGone):
            return False
        return True

    def _checked_parts(self, docs: list[DocumentInput], ids: list[str], tenant: str,
                       info: CollectionInfo) -> Iterator[list[Record]]:
        n, size = len(docs), 0
        for lo in range(0, n, WRITE_PART):
            hi = n if n - lo < 2 * WRITE_PART else lo + WRITE_PART  # no small last part
            part = docs[lo:hi]
            fast = check_vectors([d.embedding for d in part], self.max_dimension)
            if fast is None or fast.shape[1] != info.dimension:
                raise _WholeBatch
            records = [Record(ids[lo + j], d.text, dict(d.metadata or {}), fast[j], tenant,
                              d.embedding if type(d.embedding) is list else None)
                       for j, d in enumerate(part)]
            size += _estimate(records)
            if hi == n:  # 507 before the store writes: a full disk kills Edge (issue 10)
                self.disk.check("write documents", need=size)
            yield records
            if hi == n:
                return

    def delete(self, name: str, tenant: str, ids: list[str] | None, where: Node | None) -> int:
        info = self.collections.get(name)
        if ids is None and where is None:
            raise InvalidInput("Give 'ids' or 'where' to choose the documents to delete")
        deleted = 0
        if ids is not None:
            if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
                raise InvalidInput("'ids' must be a list of strings")
            if where is None:
                return self.store.delete_ids(info.shard, tenant, ids)
            keep = {r.id for r in self.store.get(info.shard, tenant, ids)
                    if _matches(r, where)}
            return self.store.delete_ids(info.shard, tenant, sorted(keep))
        deleted = self.store.delete_where(info.shard, tenant, where)
        return deleted

    def delete_all(self, name: str, tenant: str) -> int:
        """Every document of ``tenant`` in the collection (one store delete, so atomic per
        shard); other tenants' documents stay."""
        info = self.collections.get(name)
        if info.dimension is None or not self.store.has_shard(info.shard):
            return 0
        return self.store.delete_where(info.shard, tenant, None)

    # -- reads ----------------------------------------------------------------------------
    def list_page(
        self, name: str, tenant: TenantScope, where: Node | None, limit: int, offset: int
    ) -> Page:
        info = self.collections.get(name)
        if offset < 0:
            raise InvalidInput("'offset' must be 0 or more")
        if limit < 0:
            raise InvalidInput("'limit' must be 0 or more")
        if where is not None:
            self.collections.require("metadata_filtering", "filter by metadata")
        return self.store.list_page(info.shard, tenant, where, limit, offset)

    def get(self, name: str, tenant: TenantScope, doc_id: str) -> Record | None:
        info = self.collections.get(name)
        found = self.store.get(info.shard, tenant, [doc_id])
        return found[0] if found else None

    def count(self, name: str, tenant: TenantScope, where: Node | None = None) -> int:
        info = self.collections.get(name)
        return self.store.count(info.shard, tenant, where)

    def distinct(self, name: str, tenant: TenantScope, field: str) -> list[Scalar]:
        info = self.collections.get(name, message=MSG_NOT_EXIST.format(name))
        problem = key_problem(field)
        if problem is not None:
            raise InvalidInput(f"Invalid 'field': {field!r} {problem}")
        self.collections.require("facets", "list distinct metadata values")
        return self.store.distinct(info.shard, tenant, field)


WRITE_PART = 125
"""Documents per part of a batch written in parts (at least two parts: batches of 250
or more). Measured with ``store_batch``, 1,000 384-d documents a call, on 2 cores (3
interleaved rounds on a noisy machine, medians): parts of 125, 250 and 500 gave x1.30,
x1.18 and x1.13 the documents/s of one part (BENCHMARKS.md, "Bulk writes in parts")."""


class _WholeBatch(Exception):
    """A part failed the all-at-once checks: the batch goes the whole-batch way."""


def _estimate(records: list[Record]) -> int:
    """Rough bytes a write adds on disk (vectors, text, payload; x2 for the WAL)."""
    size = 0
    for r in records:
        dim = 0 if r.embedding is None else len(r.embedding)
        size += 4 * dim + len(r.text) + 256
    return 2 * size


def _matches(record: Record, where: Node) -> bool:
    from ragline.core.filter_eval import matches

    return matches(where, record.metadata)
