"""Sources as first-class objects (issue 12): listing, deleting, and deletes that keep the
ingestion state true, also when they crash half-way; re-ingesting a moved tree."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from ragline.errors import SourceNotFound
from ragline.facade import IngestSource, Ragline
from tests.ingestion_support import (
    CODE,
    SENSING,
    Boom,
    by_parent,
    clean_snapshot,
    ingest_tree,
    sid,
    snapshot,
    stored,
)

pytestmark = pytest.mark.usefixtures("few_payload_indexes")

T = "default"


def upload(rl: Ragline, name: str, text: str) -> Any:
    out = rl.ingestion.submit(rl.owner(), IngestSource("upload", "book", data=text.encode(),
                                             filename=name))
    assert out.document is not None
    return out.document


NOTE = "# Note\n\n" + "\n\n".join(f"Paragraph {i} about sensors and motors, number {i}."
                                  for i in range(40))


def test_sources_list_the_tree_with_state_counts_hashes_and_times(rl: Ragline,
                                                                   book: Path) -> None:
    ingest_tree(rl, "book", T, book)
    upload(rl, "note.md", NOTE)
    sources, total = rl.documents.sources(rl.owner(), "book")
    assert total == len(sources) == 7
    by_id = {s.source_id: s for s in sources}
    per_parent = by_parent(stored(rl))
    assert set(by_id) == set(per_parent)  # every source with chunks, nothing else
    s = by_id[sid(SENSING)]
    assert (s.origin, s.source_path, s.state) == ("directory", SENSING, "ingested")
    assert s.chunk_count == len(per_parent[sid(SENSING)])
    import hashlib
    assert s.source_hash == hashlib.sha256((book / SENSING).read_bytes()).hexdigest()
    assert s.created_at and s.updated_at >= s.created_at
    assert s.root == str(book.resolve())  # the owner (local) sees the root
    assert by_id["upload/note.md"].origin == "upload"
    page, total = rl.documents.sources(rl.owner(), "book", limit=2, offset=1)
    assert [p.source_id for p in page] == sorted(by_id)[1:3] and total == 7
    detail = rl.documents.source(rl.owner(), "book", sid(SENSING))
    assert detail.chunk_ids == [r.id for r in per_parent[sid(SENSING)]]
    assert detail.chunks_in_store == len(detail.chunk_ids)
    assert detail.title == "Lesson 1.1: How Robots Sense"


def test_delete_source_removes_chunks_and_state_together(rl: Ragline, book: Path) -> None:
    ingest_tree(rl, "book", T, book)
    n_before = len(stored(rl))
    n_sensing = len(by_parent(stored(rl))[sid(SENSING)])
    assert rl.documents.delete_source(rl.owner(), "book", sid(SENSING)) == n_sensing
    assert len(stored(rl)) == n_before - n_sensing
    assert sid(SENSING) not in by_parent(stored(rl))
    with pytest.raises(SourceNotFound):
        rl.documents.source(rl.owner(), "book", sid(SENSING))
    with pytest.raises(SourceNotFound):
        rl.documents.delete_source(rl.owner(), "book", sid(SENSING))
    # the file is still in the tree: the next run writes it again, as new
    stats = ingest_tree(rl, "book", T, book)
    assert stats.files_changed == 1 and stats.chunks_created == n_sensing
    assert len(stored(rl)) == n_before


def test_another_tenants_source_is_not_found(rl: Ragline) -> None:
    from ragline.core.principal import Principal, Role

    upload(rl, "note.md", NOTE)
    other = Principal("acme", Role.USER)
    assert rl.documents.sources(other, "book") == ([], 0)
    with pytest.raises(SourceNotFound):
        rl.documents.source(other, "book", "upload/note.md")
    with pytest.raises(SourceNotFound):
        rl.documents.delete_source(other, "book", "upload/note.md")
    assert rl.documents.source(rl.owner(), "book", "upload/note.md").chunks_in_store > 0


def test_documents_delete_of_every_chunk_drops_the_state(rl: Ragline) -> None:
    """The issue's case: deleting an upload's chunks through the documents API, then
    re-sending it, must write it again (it answered "unchanged" over an empty store)."""
    first = upload(rl, "note.md", NOTE)
    assert rl.documents.delete(rl.owner(), "book",
                               where={"source_id": "upload/note.md"}) == first.chunks
    assert stored(rl) == []
    assert rl.documents.sources(rl.owner(), "book") == ([], 0)
    again = upload(rl, "note.md", NOTE)
    assert not again.unchanged and again.chunks == first.chunks
    assert len(stored(rl)) == first.chunks


def test_documents_delete_of_some_chunks_marks_the_source_modified(rl: Ragline) -> None:
    first = upload(rl, "note.md", NOTE)
    assert first.chunks >= 3
    ids = [r.id for r in by_parent(stored(rl))["upload/note.md"]]
    assert rl.documents.delete(rl.owner(), "book", ids=ids[:2]) == 2
    detail = rl.documents.source(rl.owner(), "book", "upload/note.md")
    assert detail.state == "modified"
    assert detail.chunk_ids == ids[2:] and detail.chunks_in_store == len(ids) - 2
    again = upload(rl, "note.md", NOTE)  # not "unchanged": the two chunks come back
    assert not again.unchanged
    assert [r.id for r in by_parent(stored(rl))["upload/note.md"]] == ids
    assert rl.documents.source(rl.owner(), "book", "upload/note.md").state == "ingested"
    assert upload(rl, "note.md", NOTE).unchanged  # and now it is


def test_a_delete_that_touches_no_ingested_chunk_leaves_sources_clean(rl: Ragline) -> None:
    from ragline.facade import DocumentInput

    upload(rl, "note.md", NOTE)
    ids = [r.id for r in by_parent(stored(rl))["upload/note.md"]]
    rl.documents.add(rl.owner(), "book", [DocumentInput("a plain document", {"k": 1},
                                                        id="plain")])
    # ids name one ingested chunk, but 'where' keeps only the plain document
    assert rl.documents.delete(rl.owner(), "book", ids=[ids[0], "plain"],
                               where={"k": 1}) == 1
    assert rl.documents.source(rl.owner(), "book", "upload/note.md").state == "ingested"
    assert upload(rl, "note.md", NOTE).unchanged


def test_directory_run_rewrites_a_source_whose_chunks_were_deleted(rl: Ragline,
                                                                   book: Path) -> None:
    ingest_tree(rl, "book", T, book)
    ids = [r.id for r in by_parent(stored(rl))[sid(CODE)]]
    rl.documents.delete(rl.owner(), "book", ids=ids[-1:])
    stats = ingest_tree(rl, "book", T, book)
    assert stats.files_changed == 1 and stats.files_skipped == 5
    assert stats.texts_embedded == 1  # only the deleted chunk; the others keep their vectors
    assert [r.id for r in by_parent(stored(rl))[sid(CODE)]] == ids


def test_a_tenant_emptying_the_collection_drops_its_state(rl: Ragline, book: Path) -> None:
    from ragline.core.principal import Principal, Role

    ingest_tree(rl, "book", T, book)
    user = Principal(T, Role.USER)
    assert rl.collections.empty(user, "book") > 0
    assert rl.documents.sources(rl.owner(), "book") == ([], 0)
    stats = ingest_tree(rl, "book", T, book)
    assert stats.files_changed == 6 and stats.files_skipped == 0


@pytest.mark.parametrize("step", ["store_delete", "settle"])
def test_a_crash_mid_delete_never_leaves_an_unchanged_source_without_chunks(
        rl: Ragline, step: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault injected after each step of a documents delete: the re-upload is never
    "unchanged" unless every chunk is there, and verify --repair settles the rest."""
    first = upload(rl, "note.md", NOTE)
    ids = [r.id for r in by_parent(stored(rl))["upload/note.md"]]
    sv = rl.services
    if step == "store_delete":  # the store deleted, then the process died
        real = sv.documents.delete

        def delete_then_die(*a: Any, **k: Any) -> int:
            real(*a, **k)
            raise Boom("killed after the store delete")
        monkeypatch.setattr(sv.documents, "delete", delete_then_die)
    else:  # died in the settle transaction
        def die(*a: Any, **k: Any) -> None:
            raise Boom("killed in settle")
        monkeypatch.setattr(sv.ingest_state, "settle", die)
    with pytest.raises(Boom):
        rl.documents.delete(rl.owner(), "book", ids=ids[:3])
    monkeypatch.undo()
    assert len(stored(rl)) == first.chunks - 3
    assert rl.documents.source(rl.owner(), "book", "upload/note.md").state == "modified"
    report = rl.admin.verify(rl.owner())
    assert [(f.kind, f.count) for f in report.problems] == [("missing_chunks", 3)]
    assert not report.ok
    repaired = rl.admin.verify(rl.owner(), repair=True)
    assert repaired.ok and rl.admin.verify(rl.owner()).findings == []
    assert rl.documents.source(rl.owner(), "book", "upload/note.md").chunk_ids == ids[3:]
    assert not upload(rl, "note.md", NOTE).unchanged
    assert len(stored(rl)) == first.chunks


def test_a_crash_before_the_store_delete_only_costs_a_rewrite(
        rl: Ragline, monkeypatch: pytest.MonkeyPatch) -> None:
    first = upload(rl, "note.md", NOTE)

    def die(*a: Any, **k: Any) -> int:
        raise Boom("killed before the store delete")
    monkeypatch.setattr(rl.services.documents, "delete", die)
    with pytest.raises(Boom):
        rl.documents.delete(rl.owner(), "book", where={"source_id": "upload/note.md"})
    monkeypatch.undo()
    assert len(stored(rl)) == first.chunks
    assert rl.admin.verify(rl.owner()).ok  # modified but agreeing with the store
    again = upload(rl, "note.md", NOTE)
    assert not again.unchanged and again.texts_embedded == 0


# -- moved roots ---------------------------------------------------------------------------
def test_reingesting_a_moved_tree_reconciles_deleted_files(rl: Ragline, book: Path,
                                                           tmp_path: Path) -> None:
    ingest_tree(rl, "book", T, book)
    before = {r.id for r in stored(rl)}
    code_ids = {r.id for r in by_parent(stored(rl))[sid(CODE)]}
    moved = tmp_path / "moved-book"
    shutil.move(book, moved)
    (moved / CODE).unlink()  # deleted while (or after) it moved
    stats = ingest_tree(rl, "book", T, moved)
    assert stats.files_deleted == 1 and stats.files_changed == 0
    assert stats.files_skipped == 5 and stats.texts_embedded == 0
    assert any("no longer exist" in w for w in stats.warnings)
    assert sid(CODE) not in by_parent(stored(rl))
    assert {r.id for r in stored(rl)} == before - code_ids
    sources, _ = rl.documents.sources(rl.owner(), "book")
    assert {s.root for s in sources} == {str(moved.resolve())}
    again = ingest_tree(rl, "book", T, moved)
    assert again.files_skipped == 5 and again.files_changed == again.files_deleted == 0
    assert rl.admin.verify(rl.owner()).findings == []


def test_a_moved_tree_leaves_nothing_behind_compared_with_a_clean_run(
        rl: Ragline, book: Path, tmp_path: Path) -> None:
    ingest_tree(rl, "book", T, book)
    moved = tmp_path / "renamed"
    book.rename(moved)
    (moved / SENSING).unlink()
    ingest_tree(rl, "book", T, moved)
    assert snapshot(rl) == clean_snapshot(tmp_path, moved)


def test_a_second_tree_that_still_exists_is_not_reconciled_away(rl: Ragline, book: Path,
                                                                tmp_path: Path) -> None:
    ingest_tree(rl, "book", T, book)
    other = tmp_path / "other"
    (other / "extra").mkdir(parents=True)
    (other / "extra" / "page.md").write_text("# Extra\n\nAnother tree's page.\n")
    stats = ingest_tree(rl, "book", T, other)
    assert stats.files_deleted == 0
    assert len(rl.documents.sources(rl.owner(), "book")[0]) == 7


def test_a_missing_root_sharing_nothing_with_the_tree_is_left_alone(
        rl: Ragline, book: Path, tmp_path: Path) -> None:
    """An unmounted disk holding another book is not a move: its sources stay."""
    ingest_tree(rl, "book", T, book)
    shutil.rmtree(book)
    other = tmp_path / "other"
    other.mkdir()
    (other / "page.md").write_text("# Page\n\nUnrelated.\n")
    stats = ingest_tree(rl, "book", T, other)
    assert stats.files_deleted == 0
    assert len(rl.documents.sources(rl.owner(), "book")[0]) == 7
    notices = [f for f in rl.admin.verify(rl.owner()).findings if f.kind == "missing_root"]
    assert [f.count for f in notices] == [6] and rl.admin.verify(rl.owner()).ok


def test_a_crash_before_an_updates_commit_never_makes_the_old_bytes_unchanged(
        rl: Ragline, monkeypatch: pytest.MonkeyPatch) -> None:
    """Upload v1, upload v2 dies after its stale delete (before the state commit), then
    re-send v1: the row still carries v1's hash, so it must not answer "unchanged"."""
    v1 = upload(rl, "note.md", NOTE)
    v2_text = NOTE.replace("Paragraph 3 ", "Changed paragraph 3 ").replace(
        "Paragraph 30 ", "Changed paragraph 30 ")

    def die(*a: Any, **k: Any) -> None:
        raise Boom("killed before the commit")
    monkeypatch.setattr(rl.services.ingest_state, "commit", die)
    with pytest.raises(Boom):
        upload(rl, "note.md", v2_text)
    monkeypatch.undo()
    assert rl.documents.source(rl.owner(), "book", "upload/note.md").state == "modified"
    again = upload(rl, "note.md", NOTE)
    assert not again.unchanged
    chunks = by_parent(stored(rl))["upload/note.md"]
    assert len(chunks) == v1.chunks and all("Changed" not in r.text for r in chunks)
    assert rl.admin.verify(rl.owner()).findings == []
