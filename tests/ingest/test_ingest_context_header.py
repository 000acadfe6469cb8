"""Contextual chunk headers (issue 12): 'Title > Heading' prepended to what a chunk is
embedded from ('embed') or to its stored, BM25-indexed text too ('text')."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from tests.ingestion_support import (
    SENSING,
    copy_book,
    fake_of,
    fake_settings,
    ingest_tree,
    sid,
)

from ragline.core.filters import Eq
from ragline.core.types import Record
from ragline.facade import Ragline
from ragline.services.ingestion.ingest_pipeline import chunk_header

pytestmark = pytest.mark.usefixtures("few_payload_indexes")
TITLE = "Lesson 1.1: How Robots Sense"
Maker = Callable[[str], Ragline]


def test_chunk_header_joins_title_and_heading_path() -> None:
    assert chunk_header("Guide", ["Install", "On Linux"]) == "Guide > Install > On Linux"
    assert chunk_header(None, ["Install"]) == "Install"
    assert chunk_header("Guide", []) == "Guide"
    assert chunk_header("Setup", ["Setup", "Linux"]) == "Setup > Linux"  # no echo
    assert chunk_header("", []) == ""


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Callable[[str], Ragline]]:
    opened: list[Ragline] = []

    def _make(header: str) -> Ragline:
        rl = Ragline(fake_settings(tmp_path / header, ingest_context_header=header)).start()
        opened.append(rl)
        return rl

    yield _make
    for rl in opened:
        rl.close()


def _chunks(rl: Ragline, source: str) -> list[Record]:
    info = rl.services.collections.get("book")
    store = rl.services.retrieval.store
    page = store.list_page(info.shard, "default", Eq("parent_doc_id", source), 100, 0)
    return store.get(info.shard, "default", [r.id for r in page.records], True)


def _path(rec: Record) -> list[str]:
    value = rec.metadata["heading_path"]
    assert isinstance(value, list)
    return [str(x) for x in value]


def _embed(rl: Ragline, text: str) -> np.ndarray:
    return np.asarray(fake_of(rl).embed([text], "document")[0], dtype=np.float32)


def test_off_embeds_and_stores_the_chunk_alone(make: Maker, tmp_path: Path) -> None:
    rl = make("off")
    ingest_tree(rl, "book", "default", copy_book(tmp_path))
    for rec in _chunks(rl, sid(SENSING)):
        assert not rec.text.startswith(TITLE) and "embed_hash" not in rec.metadata
        assert np.allclose(rec.embedding, _embed(rl, rec.text), atol=1e-6)


def test_embed_mode_embeds_the_header_but_stores_the_text_as_written(
    make: Maker, tmp_path: Path,
) -> None:
    rl = make("embed")
    ingest_tree(rl, "book", "default", copy_book(tmp_path))
    recs = _chunks(rl, sid(SENSING))
    assert recs
    for rec in recs:
        header = chunk_header(TITLE, _path(rec))
        assert header.startswith(TITLE) and not rec.text.startswith(TITLE + " >")
        assert np.allclose(rec.embedding, _embed(rl, f"{header}\n\n{rec.text}"), atol=1e-6)
        assert rec.metadata["embed_hash"] != rec.metadata["content_hash"]
    assert any(" > " in chunk_header(TITLE, _path(r)) for r in recs)


def test_text_mode_stores_the_header_so_bm25_sees_it(make: Maker, tmp_path: Path) -> None:
    rl = make("text")
    ingest_tree(rl, "book", "default", copy_book(tmp_path))
    for rec in _chunks(rl, sid(SENSING)):
        header = chunk_header(TITLE, _path(rec))
        assert rec.text.startswith(header + "\n\n")
        assert np.allclose(rec.embedding, _embed(rl, rec.text), atol=1e-6)


def test_a_new_title_re_embeds_chunks_whose_text_did_not_change(
    make: Maker, tmp_path: Path,
) -> None:
    rl = make("embed")
    book = copy_book(tmp_path)
    ingest_tree(rl, "book", "default", book)
    before = {r.metadata["content_hash"]: r for r in _chunks(rl, sid(SENSING))}
    path = book / SENSING
    path.write_text(path.read_text(encoding="utf-8").replace(
        'title: "Lesson 1.1: How Robots Sense"', 'title: "Robot Senses"'), encoding="utf-8")
    ingest_tree(rl, "book", "default", book)
    after = _chunks(rl, sid(SENSING))
    same_text = [r for r in after if r.metadata["content_hash"] in before]
    assert same_text  # body chunks kept their text ...
    for rec in same_text:  # ... but their vectors follow the new header
        assert not np.allclose(rec.embedding, before[rec.metadata["content_hash"]].embedding)
        header = chunk_header("Robot Senses", _path(rec))
        assert np.allclose(rec.embedding, _embed(rl, f"{header}\n\n{rec.text}"), atol=1e-6)


def test_a_collection_can_choose_its_own_header_mode(make: Maker, tmp_path: Path) -> None:
    rl = make("off")
    rl.collections.create(rl.owner(), "book", {"context_header": "text"},
                         embed={"provider": "fake"})
    ingest_tree(rl, "book", "default", copy_book(tmp_path))
    assert all(r.text.startswith(TITLE) for r in _chunks(rl, sid(SENSING)))


def test_whole_lessons_read_the_same_with_headers_in_the_text(
    make: Maker, tmp_path: Path,
) -> None:
    """``/lesson`` and ``expand`` join chunks without the headers 'text' stored."""
    lessons = {}
    for header in ("off", "text"):
        rl = make(header)
        ingest_tree(rl, "book", "default", copy_book(tmp_path / header))
        lessons[header] = rl.services.context.lesson("default", sid(SENSING), "book")
        assert lessons[header]["total_chunks"] > 2
    assert lessons["text"]["text"] == lessons["off"]["text"]
    assert TITLE + " >" not in lessons["text"]["text"]


def test_chunks_leave_room_for_their_header(tmp_path: Path) -> None:
    """A full chunk plus its header still fits the embedder: nothing is cut at embedding."""
    from ragline.services.ingestion.ingest_target import HEADER_RESERVE_TOKENS, build_target

    sizes = {}
    for header in ("off", "text"):
        settings = fake_settings(tmp_path / header, ingest_context_header=header,
                                 ingest_chunk_tokens=None)
        rl = Ragline(settings).start()
        try:
            rl.collections.create(rl.owner(), "c", embed={"provider": "fake"})
            info = rl.services.collections.get("c")
            sizes[header] = build_target(settings, rl.services.embedders, info, "default",
                                         True).chunk_tokens
        finally:
            rl.close()
    assert sizes["off"] - sizes["text"] == HEADER_RESERVE_TOKENS
