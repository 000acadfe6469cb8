"""The client commands (collections, documents, search, ingest, jobs, keys, backup,
restore, eval) against a live ``ragline serve`` (``--url``), against the same server found
through the data directory it holds, and on a bare data directory; every ``--json``
output validated against the API's models."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ragline.api import schemas_out as api
from ragline.api.schemas import DocumentList, DocumentOut
from ragline.cli.main import app
from ragline.client import models as m
from tests.live_server import LiveServer

DOCS = [
    {"id": "b1", "text": "Bananas are yellow fruit.", "metadata": {"kind": "fruit"}},
    {"id": "c1", "text": "Cherries are small red fruit.", "metadata": {"kind": "fruit"}},
    {"id": "r1", "text": "Robots sense the world with lidar.", "metadata": {"kind": "tech"}},
]


@dataclass
class Place:
    """Where the commands act: the connection arguments, and what to expect."""

    name: str
    args: list[str]
    root: Path
    server_url: str | None


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, Path]]:
    root = tmp_path_factory.mktemp("cli-server")
    live = LiveServer(root / "data", env={"RAGLINE_AUTH": "on",
                                          "RAGLINE_INGEST_ALLOWED_ROOTS": json.dumps([str(root)])})
    try:
        live.wait_ready()
        yield live, root
    finally:
        live.stop()


def _place(kind: str, server: tuple[LiveServer, Path], tmp_path: Path) -> Place:
    live, root = server
    if kind == "url":
        key = (root / "data" / "admin-key.txt").read_text().strip()
        return Place(kind, ["--url", live.url, "--api-key", key], root, live.url)
    if kind == "held":  # no --url, no key: the lock names the server, admin-key.txt the key
        return Place(kind, ["--data-dir", str(root / "data")], root, live.url)
    return Place(kind, ["--data-dir", str(tmp_path / "bare")], tmp_path, None)


@pytest.fixture(params=["url", "held", "bare"])
def place(request: pytest.FixtureRequest, server: tuple[LiveServer, Path],
          tmp_path: Path) -> Place:
    return _place(request.param, server, tmp_path)


API_MODELS: dict[tuple[str, ...], type[Any]] = {
    # the API's own response models (ragline.api.schemas_out) for each command's --json
    ("collections", "create"): api.CollectionCreated, ("collections", "list"): api.CollectionList,
    ("collections", "show"): api.CollectionOut, ("collections", "delete"): api.CollectionDeleted,
    ("collections", "empty"): api.CollectionEmptied, ("documents", "add"): api.DocumentsAdded,
    ("documents", "list"): DocumentList, ("documents", "get"): DocumentOut,
    ("documents", "delete"): api.DocumentsDeleted, ("search",): api.SearchResults,
    ("ingest",): api.JobOut, ("jobs", "list"): api.JobList, ("jobs", "show"): api.JobOut,
    ("jobs", "wait"): api.JobOut, ("jobs", "rerun"): api.JobRerun,
    ("keys", "create"): api.KeyCreated, ("keys", "list"): api.KeyList,
    ("keys", "revoke"): api.KeyRevoked,
}


def run(place: Place, *args: str, code: int = 0, input: str | None = None) -> Any:
    """The command with the place's connection; ``--json`` output parsed and validated
    against the API's response model for the same operation."""
    result = CliRunner().invoke(app, [*args, *place.args], input=input)
    assert result.exit_code == code, (result.stdout, result.stderr)
    if "--json" in args and code == 0:
        body = json.loads(result.stdout.strip().splitlines()[-1])
        model = API_MODELS.get(tuple(args[:2])) or API_MODELS.get(tuple(args[:1]))
        if model is not None:
            model.model_validate(body)
        return body
    return result


def test_every_command(place: Place, tmp_path: Path) -> None:
    col = f"notes-{place.name}"
    made = m.Collection.model_validate(run(place, "collections", "create", col, "--embed",
                                           "local", "--metadata", '{"team": "a"}', "--json"))
    assert (made.name, made.metadata) == (col, {"team": "a"})
    assert made.embed and made.embed["provider"] == "local"
    listed = m.CollectionList.model_validate(run(place, "collections", "list", "--json"))
    assert col in [c.name for c in listed.collections] and listed.count >= 1
    table = run(place, "collections", "list").stdout
    assert col in table and (place.server_url or "bare") in " ".join(table.split())
    # documents
    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text("\n".join(json.dumps(d) for d in DOCS) + "\n")
    added = m.DocumentsAdded.model_validate(run(place, "documents", "add", col, "--file",
                                                str(jsonl), "--json"))
    assert added.ids == ["b1", "c1", "r1"]
    one = m.DocumentsAdded.model_validate(run(place, "documents", "add", col, "--text",
                                              "Kiwis are green.", "--id", "k1", "--metadata",
                                              '{"kind": "fruit"}', "--json"))
    assert one.ids == ["k1"]
    page = DocumentList.model_validate(run(place, "documents", "list", col, "--where",
                                           '{"kind": "fruit"}', "--limit", "2", "--json"))
    assert page.total == 3 and page.count == 2
    doc = m.Document.model_validate(run(place, "documents", "get", col, "r1", "--json"))
    assert doc.text == DOCS[2]["text"] and doc.metadata == {"kind": "tech"}
    assert m.Collection.model_validate(run(place, "collections", "show", col, "--json")).count == 4
    # search
    found = m.SearchResult.model_validate(run(place, "search", "yellow bananas", "--collection",
                                              col, "--limit", "2", "--json"))
    assert found.results[0].id == "b1" and len(found.results) == 2
    filtered = m.SearchResult.model_validate(run(place, "search", "yellow bananas",
                                                 "--collection", col, "--where",
                                                 '{"kind": "tech"}', "--json"))
    assert [h.id for h in filtered.results] == ["r1"]
    assert "b1" in run(place, "search", "yellow bananas", "--collection", col).stdout
    # deletes
    gone = m.DocumentsDeleted.model_validate(run(place, "documents", "delete", col, "--id",
                                                 "b1", "--json"))
    assert gone.count_deleted == 1
    gone = m.DocumentsDeleted.model_validate(run(place, "documents", "delete", col, "--where",
                                                 '{"kind": "fruit"}', "--json"))
    assert gone.count_deleted == 2
    emptied = m.DocumentsDeleted.model_validate(run(place, "collections", "empty", col, "--yes",
                                                    "--json"))
    assert emptied.count_deleted == 1
    assert run(place, "collections", "delete", col, "--json")["collection"] == col
    # errors and their exit codes
    missing = run(place, "collections", "show", col, code=3)
    assert "error:" in missing.stderr and col in missing.stderr
    bad = run(place, "documents", "list", "nope", "--where", "{oops", code=2)
    assert "not JSON" in " ".join(bad.stderr.split())
    run(place, "collections", "delete", "nope", input="n\n", code=1)  # declined: aborted


def test_ingest_jobs_and_eval(place: Place, tmp_path: Path) -> None:
    col = f"book-{place.name}"
    docs = place.root / f"docs-{place.name}"
    docs.mkdir(exist_ok=True)
    (docs / "robots.md").write_text("# Robots\n\nRobots sense the world with lidar and "
                                    "cameras.\n")
    (docs / "bananas.md").write_text("# Bananas\n\nBananas are yellow fruit.\n")
    job = m.Job.model_validate(run(place, "ingest", str(docs), "--collection", col, "--quiet",
                                   "--json"))
    assert job.status == "succeeded" and job.files_total == 2 and job.chunks_created >= 2
    jobs = m.JobList.model_validate(run(place, "jobs", "list", "--collection", col, "--json"))
    assert job.job_id in [j.job_id for j in jobs.jobs]
    shown = m.Job.model_validate(run(place, "jobs", "show", job.job_id, "--json"))
    assert shown.status == "succeeded" and shown.collection == col
    waited = m.Job.model_validate(run(place, "jobs", "wait", job.job_id, "--json"))
    assert waited.finished
    assert job.job_id in run(place, "jobs", "list").stdout
    run(place, "jobs", "show", "no-such-job", code=3)
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"question": "how do robots sense?",
                                     "expected": "robots.md"}) + "\n")
    report = run(place, "eval", "questions", str(questions), "--collection", col, "--json")
    assert report["metrics"]["questions"] == 1 and report["questions"][0]["rank"] == 1
    if place.server_url:  # a job of the server: re-run it there
        again = m.JobStarted.model_validate(run(place, "jobs", "rerun", job.job_id, "--json"))
        assert again.rerun_of == job.job_id


def test_keys(place: Place) -> None:
    made = m.CreatedKey.model_validate(run(place, "keys", "create", "--role", "user",
                                           "--tenant", f"t-{place.name}", "--json"))
    assert made.key.startswith("rl_") and made.tenant == f"t-{place.name}"
    keys = m.KeyList.model_validate(run(place, "keys", "list", "--json"))
    assert made.id in [k.id for k in keys.keys]
    assert made.key not in json.dumps(keys.model_dump())
    revoked = m.ApiKey.model_validate(run(place, "keys", "revoke", made.id, "--json"))
    assert revoked.revoked_at
    run(place, "keys", "revoke", "nope", code=3)
    if place.server_url:  # the new key is refused by the server at once
        out = CliRunner().invoke(app, ["collections", "list", "--url", place.server_url,
                                       "--api-key", made.key])
        assert out.exit_code == 2 and "error:" in out.stderr


def test_backup_and_restore(place: Place, tmp_path: Path) -> None:
    run(place, "collections", "create", f"kept-{place.name}", "--json")
    manifest = run(place, "backup", str(tmp_path / "bk"), "--json")
    assert f"kept-{place.name}" in manifest["collections"]
    restored = CliRunner().invoke(app, ["restore", str(tmp_path / "bk"), "--data-dir",
                                        str(tmp_path / "restored"), "--json"])
    assert restored.exit_code == 0, restored.stderr
    assert f"kept-{place.name}" in json.loads(restored.stdout)["collections"]
    listed = CliRunner().invoke(app, ["collections", "list", "--json", "--data-dir",
                                      str(tmp_path / "restored")])
    assert f"kept-{place.name}" in [c["name"] for c in json.loads(listed.stdout)["collections"]]


def test_upload_fallback_keeps_every_file_and_its_source_id(tmp_path: Path) -> None:
    """Issue 33: the fallback once uploaded by base name, so a book's README.md files
    replaced each other; each file now keeps the source id the server-side job gives it."""
    from tests.api.test_same_source_every_path import EXPECTED_IDS, make_tree

    allowed = make_tree(tmp_path / "allowed" / "tree")
    other = make_tree(tmp_path / "other" / "tree")
    (other / "skip.bin").write_bytes(b"\x00\x01")
    live = LiveServer(tmp_path / "data", env={
        "RAGLINE_AUTH": "on", "RAGLINE_INGEST_ALLOWED_ROOTS": json.dumps([str(allowed)])})
    data = ["--data-dir", str(tmp_path / "data")]
    try:
        live.wait_ready()
        result = CliRunner().invoke(app, ["ingest", str(other), "--collection", "up",
                                          "--quiet", "--json", *data])
        assert result.exit_code == 0, result.stderr
        out = json.loads(result.stdout.strip().splitlines()[-1])
        assert out["failed"] == 0 and len(out["files"]) == len(EXPECTED_IDS)
        assert sorted(f["sourceId"] for f in out["files"]) == EXPECTED_IDS
        assert "uploading each file with its path" in result.stderr
        assert "RAGLINE_INGEST_ALLOWED_ROOTS" in result.stderr  # the setting to change
        job = CliRunner().invoke(app, ["ingest", str(allowed), "--collection", "job",
                                       "--quiet", "--json", *data])
        assert job.exit_code == 0, job.stderr
        assert json.loads(job.stdout.strip().splitlines()[-1])["status"] == "succeeded"
        seen = {}
        for name in ("up", "job"):
            listed = CliRunner().invoke(app, ["sources", "list", "--collection", name,
                                              "--json", *data])
            assert listed.exit_code == 0, listed.stderr
            seen[name] = {s["source_id"]: s["chunk_count"]
                          for s in json.loads(listed.stdout)["sources"]}
        assert sorted(seen["up"]) == EXPECTED_IDS and seen["up"] == seen["job"]
    finally:
        live.stop()


def test_version_completion_and_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    import typer.completion

    from ragline import __version__

    version = subprocess.run([sys.executable, "-m", "ragline.cli.main", "--version"],
                             capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and version.stdout.strip() == f"ragline {__version__}"
    # Typer finds the shell from the parent processes, which under `make` is make itself:
    # the shell is fixed here so the test checks ragline's completion, not the test's parent.
    monkeypatch.setattr(typer.completion, "_get_shell_name", lambda: "bash")
    completion = CliRunner().invoke(app, ["--show-completion"], prog_name="ragline")
    assert completion.exit_code == 0, completion.output
    assert "complete -o default -F _ragline_completion ragline" in completion.stdout
    help_text = CliRunner().invoke(app, ["documents", "list", "--help"],
                                   env={"COLUMNS": "200"}).stdout
    flag_line = next(line for line in help_text.splitlines() if "--json" in line)
    assert "<bool>" not in flag_line  # a flag takes no value
    assert "<str>" in next(line for line in help_text.splitlines() if "--where" in line)


def test_unreachable_server_exit_code(tmp_path: Path) -> None:
    from ragline.testing.server import free_port

    out = CliRunner().invoke(app, ["collections", "list", "--url",
                                   f"http://127.0.0.1:{free_port()}"])
    assert out.exit_code == 1 and "could not be reached" in out.stderr


def test_a_server_bound_to_every_interface_is_dialled_on_the_loopback() -> None:
    from ragline.cli.target import reachable

    assert reachable("http://0.0.0.0:8000") == "http://127.0.0.1:8000"
    assert reachable("http://:::8000") == "http://[::1]:8000"
    assert reachable("http://[::]:8000") == "http://[::1]:8000"
    assert reachable("http://10.0.0.5:8000") == "http://10.0.0.5:8000"
    assert reachable(None) is None


def test_eval_beir(place: Place, tmp_path: Path) -> None:
    from tests.evaluation.test_beir import CORPUS, QRELS, QUERIES

    root = tmp_path / "tiny"
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(
        json.dumps({"_id": i, "title": t, "text": x}) + "\n" for i, t, x in CORPUS))
    (root / "queries.jsonl").write_text("".join(
        json.dumps({"_id": i, "text": t}) + "\n" for i, t in QUERIES))
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{q}\t{d}\t{s}\n" for q, d, s in QRELS))
    metrics = run(place, "eval", "beir", str(root), "--collection", f"beir-{place.name}",
                  "--mode", "sparse", "--json")
    assert metrics == {"ndcg@10": 1.0, "recall@100": 1.0, "mrr@10": 1.0, "queries": 3}
