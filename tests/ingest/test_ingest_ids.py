"""Deterministic, content-based chunk ids (spec 004 FR-007)."""

from __future__ import annotations

import uuid

from ingest_support import BOOK, SENSING, words

from ragline.ingest import assign_chunk_ids, chunk_document, chunk_id, load_bytes
from ragline.ingest.ids import CHUNK_NAMESPACE, content_hash


def test_chunk_id_is_a_stable_uuid5() -> None:
    h = content_hash("hello")
    value = chunk_id("docs/a", h)
    assert value == chunk_id("docs/a", h)
    assert uuid.UUID(value).version == 5
    assert value == str(uuid.uuid5(CHUNK_NAMESPACE, f"docs/a\x1f{h}"))
    assert value == "95051f69-721a-5e9f-88fb-5bbe94b11bb8"  # pinned: ids live in indexes


def test_every_input_changes_the_id() -> None:
    h = content_hash("hello")
    ids = {
        chunk_id("docs/a", h),
        chunk_id("docs/b", h),
        chunk_id("docs/a", content_hash("hello!")),
        chunk_id("docs/a", h, 1),
        chunk_id("docs/a", h, namespace="tenant-1"),
        chunk_id("docs/a", h, namespace="tenant-2"),
    }
    assert len(ids) == 6


def test_identical_chunks_in_one_document_get_distinct_ids() -> None:
    doc = load_bytes(b"## A\n\nSame words here.\n\n## A\n\nSame words here.", "d.md")
    chunks = chunk_document(doc, words, target_tokens=100, min_tokens=0)
    assert chunks[0].text == chunks[1].text
    ids = assign_chunk_ids(doc.source_id, chunks)
    assert len(set(ids)) == 2
    assert ids[0] == chunk_id(doc.source_id, chunks[0].content_hash)


def test_editing_one_section_keeps_the_other_ids() -> None:
    original = (BOOK / SENSING).read_text()
    edited = original.replace("Joint encoders report", "Joint encoders measure and report")
    assert edited != original

    def ids_by_section(text: str) -> tuple[dict[str, list[str]], list[str]]:
        doc = load_bytes(text.encode(), SENSING)
        chunks = chunk_document(doc, words, target_tokens=60)
        ids = assign_chunk_ids(doc.source_id, chunks)
        by_section: dict[str, list[str]] = {}
        for chunk, cid in zip(chunks, ids, strict=True):
            by_section.setdefault(chunk.section_id, []).append(cid)
        return by_section, ids

    before, before_all = ids_by_section(original)
    after, after_all = ids_by_section(edited)
    assert before_all == ids_by_section(original)[1]  # same content → same ids
    assert before.keys() == after.keys()
    changed = {s for s in before if before[s] != after[s]}
    assert changed == {"proprioception"}
    assert len(set(before_all) & set(after_all)) == len(before_all) - len(before["proprioception"])
