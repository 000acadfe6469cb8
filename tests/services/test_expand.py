"""Context expansion over ingested chunks: neighbours, sections, whole sources."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragline.core.types import Record, ScoredRecord
from ragline.errors import DocumentNotFound, NotFound
from ragline.facade import Ragline
from ragline.ingest import load_file
from ragline.services.search.expand import (
    body_text,
    expand_hits,
    get_context,
    get_lesson,
    join_chunks,
)
from tests.ingestion_support import (
    SENSING,
    by_parent,
    ingest_tree,
    sid,
    stored,
)

pytestmark = pytest.mark.usefixtures("few_payload_indexes")

T = "default"


@pytest.fixture
def ingested(rl: Ragline, book: Path) -> tuple[Ragline, list[Record]]:
    ingest_tree(rl, "book", T, book)
    return rl, by_parent(stored(rl))[sid(SENSING)]


def _words(text: str) -> list[str]:
    return text.split()


def test_join_removes_the_overlap_between_neighbours(
        ingested: tuple[Ragline, list[Record]], tmp_path: Path) -> None:
    _, chunks = ingested
    same_section = [c for c in chunks if c.metadata["section_id"] == chunks[1].metadata[
        "section_id"]]
    assert len(same_section) >= 2
    joined = join_chunks(same_section)
    assert len(joined) < sum(len(c.text) for c in same_section)  # overlap dropped
    body = load_file(tmp_path / "book" / SENSING, tmp_path / "book").text
    assert " ".join(_words(joined)) in " ".join(_words(body))


def test_context_neighbours_window_and_ends(ingested: tuple[Ragline, list[Record]]) -> None:
    rl, chunks = ingested
    info = rl.services.collections.get("book")
    first = get_context(rl.services.store, info, T, chunks[0].id)
    assert first["prev"] is None and first["prev_chunk_id"] is None  # FR-016a
    assert first["next"]["id"] == chunks[1].id == first["next_chunk_id"]
    last = get_context(rl.services.store, info, T, chunks[-1].id)
    assert last["next"] is None and last["next_chunk_id"] is None  # FR-016b
    mid = get_context(rl.services.store, info, T, chunks[3].id, window=2)
    assert [c["id"] for c in mid["prev"]] == [chunks[1].id, chunks[2].id]
    assert [c["id"] for c in mid["next"]] == [chunks[4].id, chunks[5].id]
    edge = get_context(rl.services.store, info, T, chunks[1].id, window=5)
    assert [c["id"] for c in edge["prev"]] == [chunks[0].id]
    with pytest.raises(DocumentNotFound):
        get_context(rl.services.store, info, T, "no-such-chunk")


def test_dangling_links_are_answered_as_null(ingested: tuple[Ragline, list[Record]]) -> None:
    rl, chunks = ingested
    info = rl.services.collections.get("book")
    rl.services.store.delete_ids(info.shard, T, [chunks[2].id])
    body = get_context(rl.services.store, info, T, chunks[3].id)
    assert body["prev"] is None and body["chunk"]["prev_chunk_id"] is None
    assert body["next"]["id"] == chunks[4].id


def test_lesson_is_whole_and_ordered(ingested: tuple[Ragline, list[Record]]) -> None:
    rl, chunks = ingested
    info = rl.services.collections.get("book")
    lesson = get_lesson(rl.services.store, info, T, sid(SENSING))
    assert lesson["total_chunks"] == len(chunks)
    assert [c["id"] for c in lesson["chunks"]] == [c.id for c in chunks]
    assert [c["chunk_index"] for c in lesson["chunks"]] == list(range(len(chunks)))
    assert lesson["title"] == "Lesson 1.1: How Robots Sense"
    with pytest.raises(NotFound):
        get_lesson(rl.services.store, info, T, "module-9/none")


def test_expand_hits_modes(ingested: tuple[Ragline, list[Record]]) -> None:
    rl, chunks = ingested
    info = rl.services.collections.get("book")
    hits = [ScoredRecord(c.id, c.text, c.metadata, 0.5) for c in (chunks[0], chunks[4])]
    assert expand_hits(rl.services.store, info, T, hits, "none") == [{}, {}]
    nb = expand_hits(rl.services.store, info, T, hits, "neighbors")
    assert nb[0]["context_ids"] == [chunks[0].id, chunks[1].id]
    assert nb[1]["context_ids"] == [chunks[3].id, chunks[4].id, chunks[5].id]
    assert body_text(chunks[4]) in nb[1]["context"]  # joined without chunk headers
    sec = expand_hits(rl.services.store, info, T, hits, "section")
    section = chunks[4].metadata["section_id"]
    assert sec[1]["context_ids"] == [c.id for c in chunks if c.metadata["section_id"] == section]
    doc = expand_hits(rl.services.store, info, T, hits, "document")
    assert doc[0]["context_ids"] == doc[1]["context_ids"] == [c.id for c in chunks]
