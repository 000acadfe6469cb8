"""``ragline ingest``: progress, summary table, exit codes (fake embedder, in process)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragline.cli.main import app
from tests.ingestion_support import (
    SENSING,
    copy_book,
    edit_section,
)

pytestmark = pytest.mark.usefixtures("few_payload_indexes")


@pytest.fixture(autouse=True)
def fake_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGLINE_DEFAULT_EMBEDDER", "fake")
    monkeypatch.setenv("RAGLINE_INGEST_CHUNK_TOKENS", "60")


def test_ingest_command_runs_incrementally(tmp_path: Path) -> None:
    book = copy_book(tmp_path)
    args = ["ingest", str(book), "--collection", "book", "--data-dir", str(tmp_path / "d")]
    runner = CliRunner()
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    assert "succeeded" in first.output and "files changed" in first.output
    edit_section(book / SENSING, "Cameras", "The CLI sees this change.")
    second = runner.invoke(app, [*args, "--quiet"])
    assert second.exit_code == 0, second.output
    row = next(line for line in second.output.splitlines() if "files unchanged" in line)
    assert row.split()[-2] == "5"
    bad = runner.invoke(app, [*args[:3], "book", "--mode", "sideways", "--data-dir",
                              str(tmp_path / "d")])
    assert bad.exit_code == 2 and "Invalid mode" in bad.output
    missing = runner.invoke(app, ["ingest", str(tmp_path / "nope"), "--collection", "book",
                                  "--data-dir", str(tmp_path / "d")])
    # rich wraps at the terminal width (80 columns without a TTY): compare unwrapped
    assert missing.exit_code == 2 and "does not exist" in " ".join(missing.output.split())


def test_ingest_as_tenant_star_publishes_the_book_to_every_reader(tmp_path: Path) -> None:
    """``--as-tenant '*'`` on a data directory (no server) writes the shared corpus, as an
    admin key naming ``*`` does over HTTP: a user of any tenant then finds the book."""
    from ragline.core.principal import Principal
    from ragline.facade import Ragline, SearchRequest
    from ragline.settings import Settings

    book = copy_book(tmp_path)
    data = tmp_path / "d"
    out = CliRunner().invoke(app, ["ingest", str(book), "--collection", "book",
                                   "--data-dir", str(data), "--as-tenant", "*", "--quiet"])
    assert out.exit_code == 0, out.output
    with Ragline(Settings(_env_file=None, data_dir=data)) as rl:  # type: ignore[call-arg]
        for user in (Principal("alice"), Principal("bob")):
            assert rl.documents.sources(user, "book")[1] == 6
            assert all(s.shared for s in rl.documents.sources(user, "book")[0])
            hits = rl.search.query_sync(user, SearchRequest(collection="book", query="lidar",
                                                      mode="sparse", limit=3)).hits
            assert hits and "idar" in hits[0].text
        assert rl.documents.sources(rl.owner(), "book")[1] == 6  # the owner reads it too
        assert rl.documents.page(Principal("default"), "book").total == \
            rl.documents.page(Principal("*"), "book").total
