"""The write side of ingestion: sources → chunk records → embeddings → store → state.

One :class:`Pipeline` writes into one shard for one tenant. The order of
writes is what makes every crash repairable by the next run:

1. ``begin``: sources written for the first time get a state row with no hash,
   so even a brand-new file that crashes mid-write and is then deleted is
   noticed (its chunks are found and removed).
2. ``upsert``: every chunk of each changed source (the new ones and the
   unchanged ones, whose neighbours or metadata may have moved).
3. ``delete``: stale ids = (ids in the state, plus ids the store holds under this
   ``parent_doc_id``) minus the new ids. The store query is what catches chunks
   written by a run that crashed before updating the state.
4. ``commit``: the state row gets the new hash and chunk ids, last.

Before step 3 deletes chunks that an existing row lists, that row is marked
``modified``, so at every moment a clean row's chunks are all in the store: a
crash between 3 and 4 can never make a re-upload of the old bytes "unchanged".

A crash between any two steps leaves searchable chunks (old, new, or both for
a moment) and a state that still says "changed", so the next run redoes the
source. Embeddings of chunks whose text did not change are reused from the
store (same content hash, same vector), never recomputed.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
)

from ragline.catalog.ingest_state import SourceState
from ragline.catalog.sqlite import now_iso
from ragline.catalog.tables import SourceStates
from ragline.core.filters import Eq
from ragline.core.types import CollectionInfo, Record, Vector
from ragline.errors import (
    IngestCancelled,
    InvalidInput,
    ModelNotLoaded,
    NotFound,
    ProviderError,
    RaglineError,
)
from ragline.ingest import assign_chunk_ids, chunk_document
from ragline.ingest.ids import content_hash
from ragline.ingest.types import SourceDocument
from ragline.providers.embedders.base import Embedder
from ragline.providers.retry import was_retried
from ragline.providers.stores.base import VectorStore
from ragline.services.corpus.diskspace import DiskGuard
from ragline.services.ingestion.ingest_stats import IngestStats, Progress

log = logging.getLogger(__name__)

TokenCounter = Callable[[str], int]
UPSERT_BATCH = 512
"""Records per store write; a group larger than this is written in several."""
REUSE_POOL_MAX = 20_000
"""Vectors kept from deleted sources for renamed files (bounds memory on mass deletes)."""


@dataclass
class Target:
    """Where and how to write: the shard, the tenant and the chunking/embedding settings."""

    info: CollectionInfo
    tenant: str
    embedder: Embedder
    count_tokens: TokenCounter
    chunk_tokens: int
    overlap: float
    fingerprint: str
    reuse: bool = True
    defaults: dict[str, Any] = field(default_factory=dict)
    path_pattern: str | None = None
    frontmatter_defaults: dict[str, Any] = field(default_factory=dict)
    context_header: str = "off"
    """Contextual chunk headers (``off``, ``embed`` or ``text``): see :func:`chunk_header`."""
    book_id: str = ""
    """Spec 004's ``book_id`` of chunks whose source names none (see :func:`book_id_of`)."""


def chunk_header(title: str | None, heading_path: list[str]) -> str:
    """``Title > Heading > Sub-heading``: where a chunk sits in its document.

    Prepended to a chunk as a contextual chunk header: for ``embed`` only to the
    text the embedder sees (the stored text and the BM25 index stay as written),
    for ``text`` to the stored text too, so BM25 indexes it and results show it.
    A chunk alone often never names its subject ("it", "this node"); its
    document's title and section do. Empty when the document has neither.
    """
    parts = [p.strip() for p in [title or "", *heading_path] if p and p.strip()]
    deduped = [p for i, p in enumerate(parts) if i == 0 or p != parts[i - 1]]
    return " > ".join(deduped)


@dataclass
class Prepared:
    """A changed source, chunked, with the records to write (some still without vectors)."""

    state: SourceState
    records: list[Record]
    old_ids: list[str]
    existing: set[str]
    first_write: bool
    embed_inputs: dict[str, str] = field(default_factory=dict)
    """Record id -> the text to embed, where it differs from the record's text."""
    parsed: bool = True
    """The source parsed (a changed file): counted in ``files_changed`` once its write is
    acknowledged, not before (a job's progress counts what is written)."""


def _embed_key(metadata: Mapping[str, Any]) -> str | None:
    """What a stored vector was computed from: the header-and-text hash when a
    contextual header was embedded, else the chunk text's hash."""
    key = metadata.get("embed_hash") or metadata.get("content_hash")
    return key if isinstance(key, str) and key else None


def _retryable(exc: BaseException) -> bool:
    """Retry what no lower layer already handled: a ProviderError from the shared retry
    layer was either retried there (transient) or is permanent (a 401), so retrying it
    here would only multiply HTTP calls (ragline.providers.retry)."""
    if was_retried(exc):
        return False
    return not isinstance(exc, InvalidInput | ModelNotLoaded | NotFound | IngestCancelled)


class Pipeline:
    def __init__(self, store: VectorStore, state: SourceStates, target: Target, stats: IngestStats,
                 *, batch_size: int, retry_attempts: int, retry_wait: float,
                 retry_max_wait: float, progress: Progress | None = None,
                 should_stop: Callable[[], bool] | None = None,
                 background_writes: bool = False, disk: DiskGuard | None = None) -> None:
        self.store = store
        self.disk = disk or DiskGuard.unlimited()
        self.state = state
        self.t = target
        self.stats = stats
        self.batch_size = batch_size
        self.retry_attempts = retry_attempts
        self.retry_wait = retry_wait
        self.retry_max_wait = retry_max_wait
        self.progress = progress
        self.should_stop = should_stop
        self.reuse_pool: dict[str, Vector] = {}
        self._writer = (ThreadPoolExecutor(1, thread_name_prefix="ragline-ingest-write")
                        if background_writes else None)
        self._pending: Future[None] | None = None

    @property
    def shard(self) -> str:
        return self.t.info.shard

    def report(self) -> None:
        if self.progress is not None:
            self.progress(self.stats)

    def check_stop(self) -> None:
        if self.should_stop is not None and self.should_stop():
            raise IngestCancelled("ingestion stopped by shutdown; committed sources are kept")

    def stored_ids(self, source_id: str) -> set[str]:
        """Ids the store holds under ``parent_doc_id == source_id`` (whatever the state says)."""
        ids: set[str] = set()
        where = Eq("parent_doc_id", source_id)
        while True:
            page = self.store.list_page(self.shard, self.t.tenant, where, 1000, len(ids))
            ids.update(r.id for r in page.records)
            if not page.records or len(ids) >= page.total:
                return ids

    def remember_vectors(self, sources: list[SourceState]) -> None:
        """Keep the vectors of sources about to be deleted: a renamed file reuses them."""
        if not self.t.reuse:
            return
        for src in sources:
            if len(self.reuse_pool) >= REUSE_POOL_MAX:
                return
            for rec in self.store.get(self.shard, self.t.tenant, src.chunk_ids, True):
                h = _embed_key(rec.metadata)
                if h and rec.embedding is not None:
                    self.reuse_pool[h] = rec.embedding

    # -- prepare ---------------------------------------------------------------------
    def prepare(self, entry: SourceState, doc: SourceDocument | None,
                old: SourceState | None) -> Prepared:
        """Chunk ``doc`` (None: the source has no usable content) into full records."""
        records: list[Record] = []
        existing: set[str] = set()
        embed_inputs: dict[str, str] = {}
        if doc is not None:
            t = self.t
            chunks = chunk_document(doc, t.count_tokens, t.chunk_tokens, t.overlap)
            ids = assign_chunk_ids(doc.source_id, chunks, namespace=t.tenant)
            found = {r.id: r for r in self.store.get(self.shard, t.tenant, ids, t.reuse)}
            existing = set(found)
            now = now_iso()
            for i, (chunk, cid) in enumerate(zip(chunks, ids, strict=True)):
                prior = found.get(cid)
                meta: dict[str, Any] = dict(doc.metadata)
                meta.update({
                    "source_id": doc.source_id, "parent_doc_id": doc.source_id,
                    "source_path": doc.source_path, "source_type": doc.source_type,
                    "title": doc.title, "section_id": chunk.section_id,
                    "section_title": chunk.section_title, "heading_path": chunk.heading_path,
                    "chunk_index": i, "total_chunks": len(chunks),
                    "prev_chunk_id": ids[i - 1] if i else None,
                    "next_chunk_id": ids[i + 1] if i + 1 < len(ids) else None,
                    "content_hash": chunk.content_hash, "source_hash": doc.source_hash,
                    "source_file_hash": doc.source_hash,  # spec 004's name, same value
                    "token_count": chunk.token_count,
                    "created_at": (prior.metadata.get("created_at") if prior else None) or now,
                    "updated_at": now,
                })
                if chunk.page_number is not None:
                    meta["page_number"] = chunk.page_number
                if chunk.heading_paths:  # a merged chunk's sections (issue 36)
                    meta["heading_paths"] = [" > ".join(p) for p in chunk.heading_paths]
                if not isinstance(meta.get("book_id"), str | int) or meta["book_id"] == "":
                    meta["book_id"] = t.book_id or t.info.name  # frontmatter's wins
                text = embed_text = chunk.text
                header = chunk_header(doc.title, chunk.heading_path) if t.context_header in (
                    "embed", "text") else ""
                if header:
                    embed_text = f"{header}\n\n{chunk.text}"
                    if t.context_header == "text":
                        text = embed_text
                        meta["chunk_header"] = header  # joins strip it (services.expand)
                    # the vector depends on the header too: reuse it only for the same input
                    meta["embed_hash"] = content_hash(embed_text)
                key = _embed_key(meta)
                vec = None
                if t.reuse:
                    if (prior is not None and prior.embedding is not None
                            and _embed_key(prior.metadata) == key):
                        vec = prior.embedding
                    elif key is not None:
                        vec = self.reuse_pool.get(key)
                records.append(Record(cid, text, meta, vec, t.tenant))
                if embed_text != text:
                    embed_inputs[cid] = embed_text
        entry.chunk_ids = [r.id for r in records]
        entry.fingerprint = self.t.fingerprint
        return Prepared(entry, records, old.chunk_ids if old else [], existing,
                        old is None or old.source_hash is None, embed_inputs, doc is not None)

    # -- embed -----------------------------------------------------------------------
    def _log_retry(self, rs: RetryCallState) -> None:
        exc = rs.outcome.exception() if rs.outcome else None
        wait = rs.next_action.sleep if rs.next_action else 0.0
        self.stats.warn(f"embedding attempt {rs.attempt_number} failed ({exc!r}); "
                        f"retrying in {wait:.1f}s")

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        retrying = Retrying(
            stop=stop_after_attempt(self.retry_attempts),
            wait=wait_exponential(multiplier=self.retry_wait, max=self.retry_max_wait),
            retry=retry_if_exception(_retryable), before_sleep=self._log_retry, reraise=True)
        try:
            for attempt in retrying:
                with attempt:
                    self.check_stop()
                    self.stats.embedding_calls += 1
                    t0 = time.perf_counter()
                    try:
                        vecs = np.asarray(self.t.embedder.embed(texts, "document"), np.float32)
                    finally:
                        self.stats.embed_seconds += time.perf_counter() - t0
        except RaglineError:
            raise
        except Exception as exc:
            raise ProviderError(f"embedding {len(texts)} text(s) failed after "
                                f"{self.retry_attempts} attempt(s): {exc!r}") from exc
        dim = self.t.info.dimension
        if vecs.shape != (len(texts), dim) or not np.isfinite(vecs).all():
            raise ProviderError(f"the embedder returned vectors of shape {vecs.shape} (expected "
                                f"({len(texts)}, {dim})) or non-finite values")
        self.stats.texts_embedded += len(texts)
        return vecs

    def embed_missing(self, group: list[Prepared]) -> None:
        """Embed every record without a vector, each distinct text once, in batches."""
        todo: dict[str, list[Record]] = {}
        for p in group:
            for r in p.records:
                if r.embedding is None:
                    todo.setdefault(p.embed_inputs.get(r.id, r.text), []).append(r)
        texts = list(todo)
        for start in range(0, len(texts), self.batch_size):
            part = texts[start:start + self.batch_size]
            for text, vec in zip(part, self._embed_batch(part), strict=True):
                for r in todo[text]:
                    r.embedding = vec
            self.report()

    # -- write -----------------------------------------------------------------------
    def flush(self, group: list[Prepared]) -> None:
        """Embed a group of changed sources, then write it in the crash-safe order.

        With background writes, the group's write runs in the writer thread while
        the caller prepares and embeds the next group (the model releases the GIL);
        the previous group's write is always finished first, so writes stay in order.
        """
        if not group:
            return
        first = [p.state for p in group if p.first_write]
        if first:
            self.state.begin(self.t.info.name, self.shard, self.t.tenant, first)
        self.embed_missing(group)
        self.check_stop()
        self.drain()
        if self._writer is None:
            self._write(group)
        else:
            self._pending = self._writer.submit(self._write, group)

    def _write(self, group: list[Prepared]) -> None:
        with self.state.writing(self.t.info.name, self.t.tenant):
            self._write_locked(group)

    def _write_locked(self, group: list[Prepared]) -> None:
        records = [r for p in group for r in p.records]
        # 507 before the store is touched (issue 10); the run stops here and the next
        # run repairs, as after a crash
        self.disk.check("write ingested chunks",
                        need=2 * sum(4 * len(r.embedding) + len(r.text) + 256
                                     for r in records if r.embedding is not None))
        for start in range(0, len(records), UPSERT_BATCH):
            self.store.upsert(self.shard, records[start:start + UPSERT_BATCH])
        stale_of: list[set[str]] = []
        for p in group:
            stale_of.append((set(p.old_ids) | self.stored_ids(p.state.source_id))
                            - set(p.state.chunk_ids))
        # a row about to lose chunks it lists is never "unchanged" until the commit below
        # (a crash in between: a re-upload of the old bytes must not answer unchanged)
        losing = [p.state.source_id for p, stale in zip(group, stale_of, strict=True)
                  if stale & set(p.old_ids)]
        if losing:
            self.state.mark_modified(self.t.info.name, self.shard, self.t.tenant, losing)
        for p, stale in zip(group, stale_of, strict=True):
            new = set(p.state.chunk_ids)
            if stale:
                self.stats.chunks_deleted += self.store.delete_ids(
                    self.shard, self.t.tenant, sorted(stale))
            self.stats.chunks_created += len(new - p.existing)
            self.stats.chunks_updated += len(new & p.existing)
        self.state.commit(self.t.info.name, self.shard, self.t.tenant, [p.state for p in group])
        self.stats.files_changed += sum(1 for p in group if p.parsed)  # now acknowledged
        self.stats.writes_acknowledged += 1
        self.report()

    def drain(self) -> None:
        """Wait for the write in flight, raising its error."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def close(self, *, quiet: bool = False) -> None:
        """Finish the write in flight and stop the writer (``quiet``: do not raise)."""
        try:
            with contextlib.suppress(BaseException) if quiet else contextlib.nullcontext():
                self.drain()
        finally:
            if self._writer is not None:
                self._writer.shutdown(wait=True)

    def delete_source(self, old: SourceState) -> None:
        """Remove a source: mark its row modified, delete its chunks, drop the row. A crash
        in between leaves a row that is never "unchanged" (its file gone, or its chunks):
        the next run, a re-upload or ``ragline verify --repair`` finishes the job."""
        name, tenant = self.t.info.name, self.t.tenant
        with self.state.writing(name, tenant):
            self.state.mark_modified(name, self.shard, tenant, [old.source_id])
            n = self.store.delete_ids(self.shard, self.t.tenant, old.chunk_ids)
            n += self.store.delete_where(self.shard, self.t.tenant,
                                         Eq("parent_doc_id", old.source_id))
            self.stats.chunks_deleted += n
            self.state.drop(name, self.shard, tenant, [old.source_id])
            self.stats.writes_acknowledged += 1
