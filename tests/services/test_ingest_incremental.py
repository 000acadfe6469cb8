"""Incremental ingestion of a directory: exact embeddings and chunk counts per change."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragline.facade import Ragline
from ragline.ingest import chunk_document, load_file
from ragline.testing.fake_embedder import FakeEmbedder
from tests.ingestion_support import (
    CHUNK_TOKENS,
    CODE,
    MDX,
    SENSING,
    by_parent,
    check_chains,
    edit_section,
    fake_of,
    ingest_tree,
    sid,
    stored,
)

pytestmark = pytest.mark.usefixtures("few_payload_indexes")

T = "default"


def expected_hashes(book: Path, rel: str) -> list[str]:
    doc = load_file(book / rel, book)
    return [c.content_hash for c in chunk_document(doc, FakeEmbedder().count_tokens,
                                                   CHUNK_TOKENS, 0.15)]


def test_first_run_embeds_every_chunk_once_and_writes_full_records(rl: Ragline,
                                                                   book: Path) -> None:
    stats = ingest_tree(rl, "book", T, book)
    records = stored(rl)
    fake = fake_of(rl)
    distinct = {r.text for r in records}
    assert stats.files_seen == stats.files_changed == 6
    assert stats.chunks_created == len(records) == sum(
        len(expected_hashes(book, r)) for r in [SENSING, CODE, MDX,
                                                "README.md", "module-1-foundations/README.md",
                                                "module-1-foundations/chapter-1-sensing/"
                                                "02-broken-frontmatter.md"])
    assert stats.texts_embedded == fake.texts_embedded == len(distinct)
    assert stats.embedding_calls == fake.calls
    # one malformed frontmatter, plus spec 004's defaults announced for the 4 sources
    # lacking proficiency_level/hardware_tier (two READMEs, the broken one, the MDX)
    assert sum("malformed frontmatter" in w for w in stats.warnings) == 1
    assert sum("in the frontmatter; using" in w for w in stats.warnings) == 4
    assert len(stats.warnings) == 5
    check_chains(records)
    sensing = by_parent(records)[sid(SENSING)]
    m = sensing[0].metadata
    assert m["source_path"] == SENSING and m["source_type"] == "md"
    assert m["title"] == "Lesson 1.1: How Robots Sense"
    assert (m["module"], m["chapter"], m["lesson"]) == (1, 1, 1)
    assert m["hardware_tier"] == 2 and m["proficiency_level"] == "B1"
    assert m["fm_id"] == "lesson-1-1-how-robots-sense"
    for r in sensing:
        assert int(r.metadata["token_count"]) <= CHUNK_TOKENS  # type: ignore[arg-type]
        assert r.metadata["content_hash"] and r.metadata["source_hash"]
        assert r.metadata["created_at"] and r.metadata["updated_at"]
        assert r.metadata["section_id"] and "section_title" in r.metadata
    assert [r.metadata["content_hash"] for r in sensing] == expected_hashes(book, SENSING)


def test_rerun_without_changes_embeds_and_writes_nothing(rl: Ragline, book: Path) -> None:
    ingest_tree(rl, "book", T, book)
    before = {r.id: r.metadata["updated_at"] for r in stored(rl)}
    fake = fake_of(rl)
    calls = fake.calls
    stats = ingest_tree(rl, "book", T, book)
    assert (stats.files_skipped, stats.files_changed, stats.texts_embedded) == (6, 0, 0)
    assert (stats.chunks_created, stats.chunks_updated, stats.chunks_deleted) == (0, 0, 0)
    assert fake.calls == calls
    assert {r.id: r.metadata["updated_at"] for r in stored(rl)} == before


def test_changed_section_re_embeds_only_new_text(rl: Ragline, book: Path) -> None:
    ingest_tree(rl, "book", T, book)
    old = by_parent(stored(rl))
    old_hashes = {r.metadata["content_hash"] for r in old[sid(SENSING)]}
    other_ids = {r.id: r.metadata["updated_at"] for p, rs in old.items() if p != sid(SENSING)
                 for r in rs}
    edit_section(book / SENSING, "Cameras",
                 "Cameras changed: a short new paragraph about event cameras and optics.")
    new_hashes = expected_hashes(book, SENSING)
    fake = fake_of(rl)
    texts = fake.texts_embedded
    stats = ingest_tree(rl, "book", T, book)
    fresh = set(new_hashes) - old_hashes
    gone = old_hashes - set(new_hashes)
    assert fresh and gone
    assert stats.files_changed == 1 and stats.files_skipped == 5
    assert stats.texts_embedded == fake.texts_embedded - texts == len(fresh)
    assert stats.chunks_created == len(fresh)
    assert stats.chunks_deleted == len(gone)
    assert stats.chunks_updated == len(new_hashes) - len(fresh)
    after = by_parent(stored(rl))
    assert [r.metadata["content_hash"] for r in after[sid(SENSING)]] == new_hashes
    assert {r.id: r.metadata["updated_at"] for p, rs in after.items() if p != sid(SENSING)
            for r in rs} == other_ids
    check_chains(stored(rl))


def test_added_deleted_and_renamed_files(rl: Ragline, book: Path) -> None:
    ingest_tree(rl, "book", T, book)
    fake = fake_of(rl)
    total = len(stored(rl))
    # add
    new_rel = "module-1-foundations/chapter-2-code/03-new-lesson.md"
    (book / new_rel).write_text("# New lesson\n\n## Only section\n\nFresh words on motors "
                                "and gearboxes, torque and speed.\n")
    n_new = len(expected_hashes(book, new_rel))
    texts = fake.texts_embedded
    stats = ingest_tree(rl, "book", T, book)
    assert (stats.files_changed, stats.chunks_created, stats.texts_embedded) == (1, n_new, n_new)
    assert fake.texts_embedded - texts == n_new
    assert len(stored(rl)) == total + n_new
    # delete
    n_code = len(by_parent(stored(rl))[sid(CODE)])
    (book / CODE).unlink()
    texts = fake.texts_embedded
    stats = ingest_tree(rl, "book", T, book)
    assert (stats.files_deleted, stats.chunks_deleted, stats.texts_embedded) == (1, n_code, 0)
    assert fake.texts_embedded == texts
    assert sid(CODE) not in by_parent(stored(rl))
    assert rl.services.ingest.state_of("book", T, sid(CODE)) is None
    assert len(stored(rl)) == total + n_new - n_code
    # rename: delete + add, vectors reused from the deleted source
    n_mdx = len(by_parent(stored(rl))[sid(MDX)])
    renamed = "module-1-foundations/chapter-2-code/09-components-renamed.mdx"
    (book / MDX).rename(book / renamed)
    stats = ingest_tree(rl, "book", T, book)
    assert (stats.files_changed, stats.files_deleted) == (1, 1)
    assert (stats.chunks_created, stats.chunks_deleted, stats.texts_embedded) == (
        n_mdx, n_mdx, 0)
    assert fake.texts_embedded == texts
    parents = by_parent(stored(rl))
    assert sid(MDX) not in parents and len(parents[sid(renamed)]) == n_mdx
    assert parents[sid(renamed)][0].metadata["lesson"] == 9
    check_chains(stored(rl))


def test_full_mode_re_embeds_everything_and_recreate_swaps_the_shard(rl: Ragline,
                                                                     book: Path) -> None:
    ingest_tree(rl, "book", T, book)
    count = len(stored(rl))
    ids = {r.id for r in stored(rl)}
    stats = ingest_tree(rl, "book", T, book, "full")
    assert stats.files_changed == 6 and stats.texts_embedded == len({r.text for r in stored(rl)})
    assert (stats.chunks_created, stats.chunks_updated, stats.chunks_deleted) == (0, count, 0)
    rl.services.collections.update_metadata("book", {"owner": "docs team"}, merge=True)
    old_shard = rl.services.collections.get("book").shard
    stats = ingest_tree(rl, "book", T, book, "recreate")
    info = rl.services.collections.get("book")
    assert info.shard != old_shard and not rl.services.store.has_shard(old_shard)
    assert info.metadata["owner"] == "docs team"
    assert (stats.chunks_created, stats.chunks_deleted) == (count, count)
    assert {r.id for r in stored(rl)} == ids
    check_chains(stored(rl))
    again = ingest_tree(rl, "book", T, book)
    assert again.files_skipped == 6 and again.texts_embedded == 0


def test_emptied_collection_is_rebuilt_by_the_next_incremental_run(rl: Ragline,
                                                                  book: Path) -> None:
    ingest_tree(rl, "book", T, book)
    count = len(stored(rl))
    rl.services.collections.empty("book", T)
    stats = ingest_tree(rl, "book", T, book)
    assert stats.files_changed == 6 and len(stored(rl)) == count


def test_restricted_run_reads_only_the_listed_paths(rl: Ragline, book: Path) -> None:
    ingest_tree(rl, "book", T, book)
    edit_section(book / SENSING, "Cameras", "Only this edit should be picked up now.")
    edit_section(book / CODE, "Message Rates", "This edit waits for the next full scan.")
    (book / MDX).unlink()
    stats = rl.services.ingest.run_directory("book", T, book,
                                             restrict=[SENSING, MDX, "img/logo.png"])
    assert (stats.files_seen, stats.files_changed, stats.files_deleted) == (1, 1, 1)
    assert rl.services.ingest.state_of("book", T, sid(CODE)) is not None
    code_hash = rl.services.ingest.state_of("book", T, sid(CODE)).source_hash  # type: ignore[union-attr]
    stats = ingest_tree(rl, "book", T, book)
    assert stats.files_changed == 1
    assert rl.services.ingest.state_of("book", T, sid(CODE)).source_hash != code_hash  # type: ignore[union-attr]


def test_empty_file_removes_its_chunks_with_a_warning(rl: Ragline, book: Path) -> None:
    ingest_tree(rl, "book", T, book)
    (book / MDX).write_text("   \n")
    stats = ingest_tree(rl, "book", T, book)
    assert stats.files_failed == 1 and stats.chunks_deleted > 0
    assert any("empty" in w for w in stats.warnings)
    assert sid(MDX) not in by_parent(stored(rl))


def test_missing_path_and_bad_mode_are_refused(rl: Ragline, tmp_path: Path) -> None:
    from ragline.errors import InvalidInput

    with pytest.raises(InvalidInput, match="does not exist"):
        rl.services.ingest.run_directory("book", T, tmp_path / "nope")
    with pytest.raises(InvalidInput, match="Invalid mode"):
        rl.services.ingest.run_directory("book", T, tmp_path, "sideways")
