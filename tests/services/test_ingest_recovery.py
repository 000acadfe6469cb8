"""Crashes at each step of a write are repaired by the next run; retries; single sources."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragline.core.principal import Principal
from ragline.errors import IngestCancelled, ProviderError
from ragline.facade import IngestSource, Ragline
from ragline.services.ingestion.ingest_stats import DocumentResult
from tests.ingestion_support import (
    MDX,
    SENSING,
    Boom,
    by_parent,
    check_chains,
    clean_snapshot,
    edit_section,
    fake_of,
    ingest_tree,
    sid,
    snapshot,
    stored,
)

pytestmark = pytest.mark.usefixtures("few_payload_indexes")

T = "default"


@pytest.fixture
def rl_overrides() -> dict[str, Any]:
    return {"ingest_retry_attempts": 3}


def fresh_count(tmp_path: Path, book: Path) -> tuple[int, set[str]]:
    """Chunks and ids a clean ingestion of ``book`` produces (the repaired state)."""
    clean = clean_snapshot(tmp_path, book)
    return len(clean), set(clean)


def test_crash_between_write_and_delete_is_repaired(rl: Ragline, book: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    ingest_tree(rl, "book", T, book)
    old_state = rl.services.ingest.state_of("book", T, sid(SENSING))
    assert old_state is not None
    edit_section(book / SENSING, "Cameras", "A rewritten camera section, short and new.")
    before = len(stored(rl))

    def crash(*args: Any, **kwargs: Any) -> int:
        raise Boom("killed between upsert and delete")

    monkeypatch.setattr(rl.services.store, "delete_ids", crash)
    with pytest.raises(Boom):
        rl.services.ingest.run_directory("book", T, book)
    monkeypatch.undo()
    crashed = stored(rl)
    assert len(crashed) > before  # old and new chunks side by side: still searchable
    state = rl.services.ingest.state_of("book", T, sid(SENSING))
    assert state is not None  # the state still describes the old version...
    assert (state.source_hash, state.chunk_ids) == (old_state.source_hash, old_state.chunk_ids)
    assert state.state == "modified"  # ...marked before its chunks were to be deleted
    fake = fake_of(rl)
    texts = fake.texts_embedded
    stats = ingest_tree(rl, "book", T, book)
    assert stats.files_changed == 1 and stats.texts_embedded == 0  # vectors were written
    assert fake.texts_embedded == texts
    count, ids = fresh_count(tmp_path, book)
    records = stored(rl)
    assert len(records) == count and {r.id for r in records} == ids
    check_chains(records)


def test_crash_before_state_commit_of_a_new_file_then_deleted(
        rl: Ragline, book: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ingest_tree(rl, "book", T, book)
    rel = "module-1-foundations/chapter-2-code/05-short-lived.md"
    (book / rel).write_text("# Short lived\n\n## Section\n\nWords that will vanish soon.\n")

    def crash(*args: Any, **kwargs: Any) -> None:
        raise Boom("killed before the state commit")

    monkeypatch.setattr(rl.services.ingest_state, "commit", crash)
    with pytest.raises(Boom):
        rl.services.ingest.run_directory("book", T, book)
    monkeypatch.undo()
    assert sid(rel) in by_parent(stored(rl))  # written, but not committed
    (book / rel).unlink()
    stats = ingest_tree(rl, "book", T, book)
    assert stats.files_deleted == 1
    assert sid(rel) not in by_parent(stored(rl))
    count, ids = fresh_count(tmp_path, book)
    assert {r.id for r in stored(rl)} == ids and len(stored(rl)) == count


def test_failing_embedder_leaves_the_index_untouched_and_is_retried(
        rl: Ragline, book: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ingest_tree(rl, "book", T, book)
    before = snapshot(rl)
    fake = fake_of(rl)
    fake.fail_with = ConnectionError("embedding API down")
    edit_section(book / SENSING, "Cameras", "Camera text that cannot be embedded right now.")
    calls = fake.calls
    with pytest.raises(ProviderError, match="after 3 attempt"):
        rl.services.ingest.run_directory("book", T, book)
    assert fake.calls - calls == 3
    assert snapshot(rl) == before
    # transient: two failures, then success
    fake.fail_with = None
    real = fake.embed
    failures = iter([True, True])

    def flaky(texts: list[str], input_type: Any = "document") -> np.ndarray:
        if next(failures, False):
            raise TimeoutError("rate limited")
        return real(texts, input_type)

    monkeypatch.setattr(fake, "embed", flaky)
    stats = ingest_tree(rl, "book", T, book)
    assert stats.embedding_calls == 3 and stats.files_changed == 1
    assert sum("retrying" in w for w in stats.warnings) == 2
    check_chains(stored(rl))


def test_stop_request_keeps_what_was_committed(rl: Ragline, book: Path) -> None:
    ingest_tree(rl, "book", T, book)
    (book / MDX).unlink()
    edit_section(book / SENSING, "Cameras", "Edited before a shutdown.")
    with pytest.raises(IngestCancelled):
        rl.services.ingest.run_directory("book", T, book, should_stop=lambda: True)
    stats = ingest_tree(rl, "book", T, book)
    assert (stats.files_changed, stats.files_deleted) == (1, 1)
    check_chains(stored(rl))


def ingest_text(rl: Ragline, tenant: str, text: str) -> DocumentResult:
    """A text through the ingestion door, as ``tenant``'s owner (processed while it waits)."""
    out = rl.ingestion.submit(Principal.owner(tenant), IngestSource(
        "text", "book", text=text, title="Gripper notes"))
    assert out.document is not None
    return out.document


def test_text_and_upload_sources_are_per_tenant_and_idempotent(rl: Ragline) -> None:
    text = "## Notes\n\nGrippers need force control.\n\n## More\n\nSuction cups need seals."
    first = ingest_text(rl, "alice", text)
    assert not first.unchanged and first.chunks == first.chunks_created >= 1
    again = ingest_text(rl, "alice", text)
    assert again.unchanged and again.texts_embedded == 0 and again.chunks == first.chunks
    bob = ingest_text(rl, "bob", text)
    assert bob.source_id == first.source_id
    alice_ids = {r.id for r in stored(rl, tenant="alice")}
    bob_ids = {r.id for r in stored(rl, tenant="bob")}
    assert len(alice_ids) == len(bob_ids) == first.chunks and not alice_ids & bob_ids
    up = rl.ingestion.submit(Principal.owner("alice"), IngestSource(
        "upload", "book", data=b"Line one.\n\nLine two about arms.", filename="notes.txt")).document
    assert up is not None
    assert up.source_id == "upload/notes.txt"
    meta = by_parent(stored(rl, tenant="alice"))["upload/notes.txt"][0].metadata
    assert meta["original_filename"] == "notes.txt" and meta["source_type"] == "txt"
    assert rl.services.ingest.delete_source("book", "alice", "upload/notes.txt") == up.chunks
    assert "upload/notes.txt" not in by_parent(stored(rl, tenant="alice"))
