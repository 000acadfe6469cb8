"""``ragline verify`` on a deliberately damaged data directory: what it reports, what
``--repair`` fixes, its exit codes (0 consistent, 1 problems left, 2 could not run), and
the ``ragline sources`` commands."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ragline.cli.main import app
from ragline.facade import Ragline
from tests.ingestion_support import (
    CODE,
    MDX,
    SENSING,
    by_parent,
    clean_snapshot,
    copy_book,
    fake_settings,
    ingest_tree,
    sid,
    snapshot,
    stored,
)

pytestmark = pytest.mark.usefixtures("few_payload_indexes")

T = "default"
BROKEN_README = "README"


@pytest.fixture(autouse=True)
def fake_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGLINE_DEFAULT_EMBEDDER", "fake")
    monkeypatch.setenv("RAGLINE_INGEST_CHUNK_TOKENS", "60")


def verify(data: Path, *args: str) -> Any:
    return CliRunner().invoke(app, ["verify", "--data-dir", str(data), *args])


def damage(tmp_path: Path) -> tuple[Path, Path, dict[str, Any]]:
    """Ingest the book, then break it four ways behind ragline's back."""
    book = copy_book(tmp_path)
    data = tmp_path / "data"
    rl = Ragline(fake_settings(tmp_path)).start()
    facts: dict[str, Any] = {}
    try:
        ingest_tree(rl, "book", T, book)
        info = rl.services.collections.get("book")
        parents = by_parent(stored(rl))
        # 1. chunks lost from the store while the state still lists them
        lost = [r.id for r in parents[sid(SENSING)][:2]]
        rl.services.store.delete_ids(info.shard, T, lost)
        facts["lost"] = lost
        facts["sensing_ids"] = [r.id for r in parents[sid(SENSING)]]
        # 2. every chunk of a source lost
        code = [r.id for r in parents[sid(CODE)]]
        rl.services.store.delete_ids(info.shard, T, code)
        facts["code"] = len(code)
        # the plain documents API is never touched by verify
        from ragline.facade import DocumentInput

        rl.documents.add(rl.owner(), "book", [DocumentInput("hand-written", {"k": 1},
                                                            id="plain")])
        shard = info.shard
    finally:
        rl.close()
    db = sqlite3.connect(data / "catalog.sqlite3")
    with db:
        # 3. a state row lost: its chunks become orphans
        facts["orphans"] = len(parents[BROKEN_README])
        db.execute("DELETE FROM ingest_sources WHERE source_id=?", (BROKEN_README,))
        # 4. a first write that never finished
        db.execute("UPDATE ingest_sources SET source_hash=NULL WHERE source_id=?", (sid(MDX),))
        facts["interrupted"] = len(parents[sid(MDX)])
    db.close()
    facts["shard"] = shard
    return book, data, facts


def test_verify_reports_and_repairs_a_damaged_data_dir(tmp_path: Path) -> None:
    book, data, facts = damage(tmp_path)
    first = verify(data, "--json")
    assert first.exit_code == 1, first.output
    report = json.loads(first.output)
    found = {(f["kind"], f["source_id"]): f["count"] for f in report["findings"]}
    assert found == {("missing_chunks", sid(SENSING)): 2,
                     ("missing_chunks", sid(CODE)): facts["code"],
                     ("orphan_chunks", BROKEN_README): facts["orphans"],
                     ("interrupted_write", sid(MDX)): facts["interrupted"]}
    assert report["ok"] is False and report["repaired"] == 0
    table = verify(data)  # the human form says what to do
    assert table.exit_code == 1 and "run with --repair" in table.output
    fixed = verify(data, "--repair")
    assert fixed.exit_code == 0, fixed.output
    assert "4 problem(s) repaired" in " ".join(fixed.output.split())
    again = verify(data, "--json")
    assert again.exit_code == 0 and json.loads(again.output)["findings"] == []
    rl = Ragline(fake_settings(tmp_path)).start()
    try:
        s = rl.documents.source(rl.owner(), "book", sid(SENSING))
        assert s.state == "modified" and s.chunk_ids == facts["sensing_ids"][2:]
        sources = {x.source_id for x in rl.documents.sources(rl.owner(), "book")[0]}
        assert sid(CODE) not in sources and sid(MDX) not in sources
        assert rl.documents.get(rl.owner(), "book", "plain").text == "hand-written"
        # the next run restores exactly what a clean ingestion writes
        stats = ingest_tree(rl, "book", T, book)
        assert stats.files_changed == 4 and stats.files_skipped == 2
        rl.documents.delete(rl.owner(), "book", ids=["plain"])
        got = snapshot(rl)
    finally:
        rl.close()
    assert got == clean_snapshot(tmp_path, book)
    assert verify(data).exit_code == 0


def test_verify_of_a_consistent_dir_exits_0_and_errors_exit_2(tmp_path: Path) -> None:
    book = copy_book(tmp_path)
    data = tmp_path / "data"
    assert CliRunner().invoke(app, ["ingest", str(book), "--collection", "book",
                                    "--data-dir", str(data), "--quiet"]).exit_code == 0
    ok = verify(data)
    assert ok.exit_code == 0 and "consistent" in ok.output and "6 source(s)" in ok.output
    bad = verify(data, "--collection", "nope")
    assert bad.exit_code == 2 and "not found" in bad.output
    rl = Ragline(fake_settings(tmp_path)).start()  # a server holding the directory
    try:
        busy = verify(data)
        assert busy.exit_code == 2 and "cannot open" in busy.output
    finally:
        rl.close()


def test_sources_commands(tmp_path: Path) -> None:
    book = copy_book(tmp_path)
    data = tmp_path / "data"
    runner = CliRunner()
    assert runner.invoke(app, ["ingest", str(book), "--collection", "book",
                               "--data-dir", str(data), "--quiet"]).exit_code == 0
    base = ["--collection", "book", "--data-dir", str(data)]
    listed = runner.invoke(app, ["sources", "list", *base])
    assert listed.exit_code == 0 and "\nREADME " in listed.output and "ingested" in listed.output
    assert "6 of 6 source(s)" in listed.output
    as_json = json.loads(runner.invoke(app, ["sources", "list", "--json", *base]).stdout)
    assert as_json["total"] == 6 and sid(SENSING) in [s["source_id"]
                                                       for s in as_json["sources"]]
    table = runner.invoke(app, ["sources", "show", sid(SENSING), *base])
    assert table.exit_code == 0 and "in the store)" in table.output
    shown = runner.invoke(app, ["sources", "show", sid(SENSING), "--json", *base])
    detail = json.loads(shown.output)
    assert detail["state"] == "ingested" and detail["chunks_in_store"] == detail["chunk_count"]
    assert detail["root"] == str(book.resolve())
    gone = runner.invoke(app, ["sources", "delete", sid(SENSING), *base])
    assert gone.exit_code == 0 and f"deleted {sid(SENSING)}" in gone.output
    missing = runner.invoke(app, ["sources", "show", sid(SENSING), *base])
    assert missing.exit_code == 3 and "not found" in " ".join(missing.output.split())
    assert verify(data).exit_code == 0
