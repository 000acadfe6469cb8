"""Issue 33 item 8: every listing command has ``--json``, and its table reads at 80 columns.

The tables are rendered the way a user in a default terminal sees them (``COLUMNS=80``):
no line is wider than the terminal and no header is cut mid-word; the first column
(the id people copy) stays whole when it is an id.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragline.cli.common import fit_widths
from ragline.cli.main import app
from ragline.facade import Ragline
from ragline.settings import Settings
from tests.ingestion_support import copy_book

pytestmark = pytest.mark.usefixtures("few_payload_indexes")

LISTINGS = {  # command → (JSON key of the list, the table's headers)
    ("collections", "list"): ("collections", ["name", "documents", "dimension",
                                              "embedding", "metadata", "updated"]),
    ("documents", "list", "book"): ("documents", ["id", "text", "metadata"]),
    ("sources", "list", "--collection", "book"): (
        "sources", ["source", "origin", "state", "chunks", "sha256", "updated"]),
    ("jobs", "list"): ("jobs", ["job", "status", "collection", "files", "chunks", "created"]),
    ("keys", "list"): ("keys", ["id", "role", "tenant", "name", "created", "last used",
                                "revoked"]),
    ("search", "how do robots sense", "--collection", "book"): (
        "results", ["#", "score", "id", "text", "metadata"]),
}


@pytest.fixture(autouse=True)
def fake_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGLINE_DEFAULT_EMBEDDER", "fake")
    monkeypatch.setenv("RAGLINE_INGEST_CHUNK_TOKENS", "60")


def test_every_listing_has_json_and_fits_80_columns(tmp_path: Path) -> None:
    data = ["--data-dir", str(tmp_path / "data")]
    runner = CliRunner()
    ingested = runner.invoke(app, ["ingest", str(copy_book(tmp_path)), "--collection", "book",
                                   "--quiet", *data])
    assert ingested.exit_code == 0, ingested.output
    made = runner.invoke(app, ["keys", "create", "--role", "user", "--tenant", "alice",
                               "--name", "alice's laptop", *data])
    assert made.exit_code == 0, made.output
    for command, (key, headers) in LISTINGS.items():
        as_json = runner.invoke(app, [*command, "--json", *data])
        assert as_json.exit_code == 0, (command, as_json.output)
        listed = json.loads(as_json.stdout)[key]
        assert listed, command
        shown = runner.invoke(app, [*command, *data], env={"COLUMNS": "80"})
        assert shown.exit_code == 0, (command, shown.output)
        lines = shown.stdout.splitlines()
        assert max(len(line) for line in lines) <= 80, (command, shown.stdout)
        header = next(line for line in lines if line.split()[:1] == headers[0].split())
        for word in " ".join(headers).split():  # every header word whole, on one line
            assert f" {word} " in f" {header} ", (command, word, shown.stdout)
        if command[0] in ("jobs", "keys"):  # the ids people copy are whole
            first = listed[0]["job_id" if command[0] == "jobs" else "id"]
            assert any(line.startswith(first) for line in lines), (command, shown.stdout)
    # verify's findings table too (a chunk the store lost is one)
    chunk = json.loads(runner.invoke(app, ["documents", "list", "book", "--json", *data])
                       .stdout)["documents"][0]["id"]
    with Ragline(Settings(_env_file=None, data_dir=tmp_path / "data",  # type: ignore[call-arg]
                          default_embedder="fake")) as rl:
        info = rl.services.collections.get("book")
        assert rl.services.store.delete_ids(info.shard, "default", [chunk]) == 1
    found = runner.invoke(app, ["verify", *data], env={"COLUMNS": "80"})
    assert found.exit_code == 1 and "problem(s) left" in found.stdout, found.output
    lines = found.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, found.stdout
    header = next(line for line in lines if line.startswith("kind"))
    assert header.split() == ["kind", "collection", "tenant", "source", "count", "what",
                              "repaired"], found.stdout


def test_fit_widths_keeps_headers_and_ids_whole_where_it_can() -> None:
    job = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
    widths, gap = fit_widths(["job", "status", "collection", "files", "chunks", "created"],
                             [[job, "succeeded", "knowledge", "65/65", "1308",
                               "2026-11-29 07:10"]], 80)
    assert widths[0] == len(job) and widths[2] >= len("collection")
    assert sum(widths) + gap * 5 <= 80
    path = "module-1-foundations/chapter-1-sensing/02-broken-frontmatter"
    widths, gap = fit_widths(["source", "origin", "state", "chunks", "sha256", "updated"],
                             [[path, "directory", "ingested", "12", "a1b2c3d4e5f6",
                               "2026-11-29 07:10"]], 80)
    assert sum(widths) + gap * 5 <= 80 and widths[1:5] == [9, 8, 6, 12] and widths[5] >= 10
    widths, _ = fit_widths(["a", "b"], [["x" * 200, "y" * 200]], 40)  # nothing fits whole
    assert sum(widths) + 2 <= 40 and min(widths) >= 1
