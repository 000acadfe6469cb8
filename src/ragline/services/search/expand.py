"""Context expansion: a chunk's neighbours, its section, its whole source (spec 004).

Everything here follows the ``prev_chunk_id``/``next_chunk_id``/``chunk_index``
fields the ingestion pipeline writes. References to chunks that no longer exist
(spec 004: "prev/next ID integrity violations") are answered as ``null``, never
as errors, so readers never fail on a half-repaired chain. Neighbouring chunks
overlap (the chunker repeats the end of a chunk at the start of the next), so
joined context text drops the repeated part.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from ragline.core.filters import And, Eq, Node
from ragline.core.tenancy import TenantScope, own_tenant
from ragline.core.types import CollectionInfo, Record, ScoredRecord
from ragline.errors import DocumentNotFound, NotFound
from ragline.providers.stores.base import VectorStore

log = logging.getLogger(__name__)

ExpandMode = Literal["none", "neighbors", "section", "document"]
MIN_OVERLAP_CHARS = 12
PAGE = 1000


def chunk_view(rec: Record, *, prev_id: str | None = None, next_id: str | None = None,
               checked: bool = False) -> dict[str, Any]:
    """A chunk as the API returns it; ``checked`` replaces its links with verified ones."""
    meta = rec.metadata
    return {
        "id": rec.id, "text": rec.text, "metadata": meta,
        "parent_doc_id": meta.get("parent_doc_id"), "chunk_index": meta.get("chunk_index"),
        "section_id": meta.get("section_id"), "section_title": meta.get("section_title"),
        "prev_chunk_id": prev_id if checked else meta.get("prev_chunk_id"),
        "next_chunk_id": next_id if checked else meta.get("next_chunk_id"),
    }


def _overlap(a: str, b: str) -> int:
    """Length of the longest suffix of ``a`` that starts ``b`` (at least a few chars)."""
    if len(a) < MIN_OVERLAP_CHARS or len(b) < MIN_OVERLAP_CHARS:
        return 0
    probe = b[:MIN_OVERLAP_CHARS]
    start = max(0, len(a) - len(b))
    pos = a.find(probe, start)
    while pos != -1:
        k = len(a) - pos
        if b.startswith(a[pos:]):
            return k
        pos = a.find(probe, pos + 1)
    return 0


def body_text(rec: Record) -> str:
    """A chunk's text without the contextual header ingestion put in front of it
    (``ingest_context_header = "text"`` records it as metadata ``chunk_header``)."""
    header = rec.metadata.get("chunk_header")
    if isinstance(header, str) and header and rec.text.startswith(header + "\n\n"):
        return rec.text[len(header) + 2:]
    return rec.text


def join_chunks(records: list[Record]) -> str:
    """The text of consecutive chunks with the overlap between neighbours (and any
    contextual chunk headers) removed."""
    out = ""
    for rec in records:
        text = body_text(rec)
        if not out:
            out = text
            continue
        k = _overlap(out, text)
        out += text[k:] if k else "\n\n" + text
    return out


def source_chunks(store: VectorStore, info: CollectionInfo, tenant: TenantScope, parent_doc_id: str,
                  committed: list[str] | None = None, section_id: str | None = None,
                  ) -> list[Record]:
    """Every chunk of a source in reading order.

    ``committed`` (the chunk ids the ingestion state recorded) wins when all of
    them exist: after a crashed update the store may briefly hold two versions,
    and the committed one is the one to read in full.
    """
    if not info.dimension:
        return []
    where: Node = Eq("parent_doc_id", parent_doc_id)
    if section_id is not None:
        where = And((where, Eq("section_id", section_id)))
    found: list[Record] = []
    while True:
        page = store.list_page(info.shard, tenant, where, PAGE, len(found))
        found.extend(page.records)
        if not page.records or len(found) >= page.total:
            break
    by_id = {r.id: r for r in found}
    if committed and all(i in by_id for i in committed):
        ordered = [by_id[i] for i in committed]
        return [r for r in ordered if section_id is None
                or r.metadata.get("section_id") == section_id]

    def key(r: Record) -> tuple[int, str]:
        idx = r.metadata.get("chunk_index")
        return (idx if isinstance(idx, int) else 1 << 30, str(r.metadata.get("updated_at", "")))

    ordered = sorted(found, key=key)
    out: list[Record] = []
    for r in ordered:  # two versions at one index: keep the newest
        if out and out[-1].metadata.get("chunk_index") == r.metadata.get("chunk_index"):
            out[-1] = r
        else:
            out.append(r)
    return out


def get_context(store: VectorStore, info: CollectionInfo, tenant: TenantScope, chunk_id: str,
                window: int | None = None) -> dict[str, Any]:
    """The chunk with its previous and next chunks (``window`` of each, as lists)."""
    found = store.get(info.shard, tenant, [chunk_id]) if info.dimension else []
    if not found:
        raise DocumentNotFound(f"Chunk '{chunk_id}' not found in collection '{info.name}'")
    chunk = found[0]
    meta = chunk.metadata
    if window is None:
        links = [i for i in (meta.get("prev_chunk_id"), meta.get("next_chunk_id"))
                 if isinstance(i, str)]
        by_id = {r.id: r for r in store.get(info.shard, tenant, links)}
    else:
        parent = meta.get("parent_doc_id")
        family = source_chunks(store, info, tenant, parent) if isinstance(parent, str) else []
        by_id = {r.id: r for r in family}
    before = _walk(chunk, by_id, "prev_chunk_id", window or 1)
    after = _walk(chunk, by_id, "next_chunk_id", window or 1)
    body: dict[str, Any] = {
        "chunk": chunk_view(chunk, prev_id=before[0].id if before else None,
                            next_id=after[0].id if after else None, checked=True),
        "parent_doc_id": meta.get("parent_doc_id"),
    }
    if window is None:
        body["prev"] = chunk_view(before[0]) if before else None
        body["next"] = chunk_view(after[0]) if after else None
    else:
        body["window"] = window
        body["prev"] = [chunk_view(r) for r in reversed(before)]
        body["next"] = [chunk_view(r) for r in after]
    body["prev_chunk_id"] = body["chunk"]["prev_chunk_id"]
    body["next_chunk_id"] = body["chunk"]["next_chunk_id"]
    return body


def _walk(start: Record, by_id: dict[str, Record], link: str, steps: int) -> list[Record]:
    out: list[Record] = []
    current = start
    seen = {start.id}
    for _ in range(steps):
        nxt = current.metadata.get(link)
        if not isinstance(nxt, str):
            break
        rec = by_id.get(nxt)
        if rec is None or rec.id in seen:
            log.info("chunk %s: %s %s does not exist; treated as null", current.id, link, nxt)
            break
        out.append(rec)
        seen.add(rec.id)
        current = rec
    return out


def get_lesson(store: VectorStore, info: CollectionInfo, tenant: TenantScope, parent_doc_id: str,
               committed: list[str] | None = None) -> dict[str, Any]:
    """All chunks of a source in ``chunk_index`` order, with ``total_chunks`` and the text."""
    chunks = source_chunks(store, info, tenant, parent_doc_id, committed)
    if not chunks:
        raise NotFound(f"Lesson '{parent_doc_id}' not found in collection '{info.name}'")
    first = chunks[0].metadata
    return {
        "parent_doc_id": parent_doc_id, "title": first.get("title"),
        "source_path": first.get("source_path"), "collection": info.name,
        "total_chunks": len(chunks), "chunks": [chunk_view(r) for r in chunks],
        "text": join_chunks(chunks),
    }


def expand_hits(store: VectorStore, info: CollectionInfo, tenant: TenantScope,
                hits: list[ScoredRecord], mode: str) -> list[dict[str, Any]]:
    """Per hit: ``context`` (text around it) and ``context_ids`` (the chunks used, in order)."""
    if mode == "none" or not hits:
        return [{} for _ in hits]
    as_records = [Record(h.id, h.text, h.metadata, None, own_tenant(tenant)) for h in hits]
    if mode == "neighbors":
        links = {i for h in hits for i in (h.metadata.get("prev_chunk_id"),
                                            h.metadata.get("next_chunk_id"))
                 if isinstance(i, str)}
        by_id = {r.id: r for r in store.get(info.shard, tenant, sorted(links))}
        groups = []
        for rec in as_records:
            prev = by_id.get(str(rec.metadata.get("prev_chunk_id")))
            nxt = by_id.get(str(rec.metadata.get("next_chunk_id")))
            groups.append([r for r in (prev, rec, nxt) if r is not None])
    else:
        cache: dict[tuple[str, str | None], list[Record]] = {}
        groups = []
        for rec in as_records:
            parent = rec.metadata.get("parent_doc_id")
            if not isinstance(parent, str):
                groups.append([rec])
                continue
            section = rec.metadata.get("section_id") if mode == "section" else None
            key = (parent, section if isinstance(section, str) else None)
            if key not in cache:
                cache[key] = source_chunks(store, info, tenant, parent, section_id=key[1])
            groups.append(cache[key] or [rec])
    return [{"expand": mode, "context": join_chunks(g), "context_ids": [r.id for r in g]}
            for g in groups]
