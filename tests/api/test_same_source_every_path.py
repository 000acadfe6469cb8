"""Issue 33 item 3: ingestion never loses or renames a file, whichever path it takes.

A tree with same-named files in different folders (``a/README.md``, ``b/README.md``,
``a/x/README.md``) is ingested through each path a user can take: the library (a
directory), the server-side trigger, the GitHub webhook, and the upload route with each
file's path (what ``ragline ingest`` sends when the server may not read the
directory; the CLI itself is walked against a real server in
``tests/cli/test_ingest_fallback_sources.py``). Every path gives the same sources,
with the same ids and chunk counts; a path that cannot keep that promise refuses.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ragline.api.app import create_app
from ragline.errors import InvalidInput
from ragline.facade import IngestSource, Job, Ragline
from tests.api.helpers import local_client
from tests.api.test_ingestion_webhook import SECRET, git, post, push_payload
from tests.ingestion_support import fake_settings

pytestmark = pytest.mark.usefixtures("few_payload_indexes")

SECTION = ("## {title} part {n}\n\n" + "The {title} robot reads its {n} sensors and "
           "writes a calibrated report for the operator. " * 6 + "\n\n")


def readme(title: str, sections: int) -> str:
    body = "".join(SECTION.format(title=title, n=i) for i in range(sections))
    return f"---\ntitle: {title}\n---\n\n# {title}\n\n{body}"


TREE = {
    "a/README.md": readme("Alpha", 3),
    "b/README.md": readme("Beta", 1),
    "a/x/README.md": readme("Alpha X", 5),
    "guide.md": readme("Guide", 2),
}
EXPECTED_IDS = ["a/README", "a/x/README", "b/README", "guide"]


def make_tree(root: Path) -> Path:
    for rel, text in TREE.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def sources(c: TestClient, collection: str = "book") -> dict[str, tuple[str, int]]:
    """source id → (source path, chunk count), as ``GET /collections/{c}/sources`` shows."""
    r = c.get(f"/collections/{collection}/sources")
    assert r.status_code == 200, r.text
    return {s["source_id"]: (s["source_path"], s["chunk_count"]) for s in r.json()["sources"]}


def stored_chunks(c: TestClient, collection: str = "book") -> dict[str, int]:
    """Chunks per ``parent_doc_id`` as the documents listing shows them (what search sees)."""
    r = c.get(f"/collections/{collection}/documents", params={"limit": 1000})
    assert r.status_code == 200, r.text
    counts: dict[str, int] = {}
    for d in r.json()["documents"]:
        pid = d["metadata"]["parent_doc_id"]
        counts[pid] = counts.get(pid, 0) + 1
    return counts


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return make_tree(tmp_path / "tree")


def app_client(tmp_path: Path, **overrides: Any) -> TestClient:
    return local_client(create_app(fake_settings(tmp_path, **overrides)))


def via_library(tmp_path: Path, tree: Path) -> tuple[dict[str, tuple[str, int]], dict[str, int]]:
    with Ragline(fake_settings(tmp_path / "lib")) as rl:
        rl.ingestion.submit(rl.owner(), IngestSource("directory", "book", path=str(tree)),
                            wait=True)
    with app_client(tmp_path / "lib") as c:  # read back over HTTP like the others
        return sources(c), stored_chunks(c)


def via_trigger(tmp_path: Path, tree: Path) -> tuple[dict[str, tuple[str, int]], dict[str, int]]:
    with app_client(tmp_path / "trigger", ingest_allowed_roots=[tree]) as c:
        r = c.post("/ingestion/trigger", json={"path": str(tree), "collection": "book"})
        assert r.status_code == 202, r.text
        job = wait_job(c, r.json()["job_id"])
        assert job.status == "succeeded", job.error
        return sources(c), stored_chunks(c)


def via_upload(tmp_path: Path, tree: Path) -> tuple[dict[str, tuple[str, int]], dict[str, int]]:
    with app_client(tmp_path / "upload") as c:
        for file in sorted(p for p in tree.rglob("*.md")):
            rel = file.relative_to(tree).as_posix()
            r = c.post("/api/rag/ingest/upload", params={"collection": "book", "path": rel},
                       files={"documentFile": (file.name, file.read_bytes())})
            assert r.status_code == 201, r.text
            assert r.json()["sourceId"] == rel.removesuffix(".md")
        return sources(c), stored_chunks(c)


def via_webhook(tmp_path: Path, tree: Path) -> tuple[dict[str, tuple[str, int]], dict[str, int]]:
    remote, author, clone = tmp_path / "remote.git", tmp_path / "author", tmp_path / "clone"
    git("init", "--bare", "-b", "main", str(remote), cwd=tmp_path)
    git("clone", str(remote), str(author), cwd=tmp_path)
    git("checkout", "-b", "main", cwd=author)
    (author / "docs").mkdir()
    git("commit", "--allow-empty", "-m", "start", cwd=author)
    git("push", "origin", "main", cwd=author)
    git("clone", str(remote), str(clone), cwd=tmp_path)
    shutil.copytree(tree, author / "docs", dirs_exist_ok=True)
    git("add", "-A", cwd=author)
    git("commit", "-m", "the tree", cwd=author)
    git("push", "origin", "main", cwd=author)
    with app_client(tmp_path / "hook", github_webhook_secret=SECRET, github_repo_path=clone,
                    github_docs_path="docs", default_collection="book") as c:
        r = post(c, push_payload([f"docs/{rel}" for rel in TREE]))
        assert r.status_code == 202, r.text
        job = wait_job(c, r.json()["job_id"])
        assert job.status == "succeeded", job.error
        return sources(c), stored_chunks(c)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_every_path_gives_the_same_sources(tmp_path: Path, tree: Path) -> None:
    library = via_library(tmp_path, tree)
    src, chunks = library
    assert sorted(src) == EXPECTED_IDS  # no README replaced another
    assert {sid: path for sid, (path, _) in src.items()} == {
        rel.removesuffix(".md"): rel for rel in TREE}
    assert chunks == {sid: n for sid, (_, n) in src.items()}
    assert chunks["a/x/README"] > chunks["b/README"] >= 1  # different files, not copies
    for path, got in (("trigger", via_trigger(tmp_path, tree)),
                      ("upload with path", via_upload(tmp_path, tree)),
                      ("webhook", via_webhook(tmp_path, tree))):
        assert got == library, path


def test_upload_without_a_path_keeps_the_upload_id(tmp_path: Path, tree: Path) -> None:
    with app_client(tmp_path) as c:
        data = (tree / "guide.md").read_bytes()
        r = c.post("/api/rag/ingest/upload", files={"documentFile": ("guide.md", data)})
        assert r.status_code == 201 and r.json()["sourceId"] == "upload/guide.md"


@pytest.mark.parametrize("bad", ["../escape.md", "/etc/x.md", "a/../../x.md", "C:/x.md"])
def test_an_upload_path_outside_the_root_is_refused(tmp_path: Path, bad: str) -> None:
    with app_client(tmp_path) as c:
        r = c.post("/api/rag/ingest/upload", params={"path": bad},
                   files={"documentFile": ("x.md", b"# X\n\ntext\n")})
        assert r.status_code == 400 and "'path' must be a relative path" in r.json()["message"]
        r = c.post("/api/rag/ingest/upload", params={"path": "a/x.txt"},
                   files={"documentFile": ("x.md", b"# X\n\ntext\n")})
        assert r.status_code == 400 and "same extension" in r.json()["message"]
        assert c.get("/collections/book/sources").status_code == 404  # nothing written


def test_a_large_upload_with_a_path_keeps_its_source_id_as_a_job(tmp_path: Path,
                                                                  tree: Path) -> None:
    with app_client(tmp_path, ingest_sync_max_bytes=16) as c:
        r = c.post("/api/rag/ingest/upload", params={"path": "a/x/README.md"},
                   files={"documentFile": ("README.md", (tree / "a/x/README.md").read_bytes())})
        assert r.status_code == 202, r.text
        job = wait_job(c, r.json()["job_id"])
        assert job.result["sourceId"] == "a/x/README"
        assert list(sources(c)) == ["a/x/README"]


def test_two_files_with_one_source_id_are_refused_naming_the_setting(
        tmp_path: Path, tree: Path) -> None:
    (tree / "a" / "README.mdx").write_text("# Alpha again\n\nother text\n")
    with Ragline(fake_settings(tmp_path)) as rl, pytest.raises(InvalidInput) as caught:
        rl.ingestion.submit(rl.owner(), IngestSource("directory", "book", path=str(tree)),
                            wait=True)
    assert "RAGLINE_INGEST_PATTERNS" in caught.value.message
    assert "a/README.mdx and a/README.md" in caught.value.message
    with app_client(tmp_path) as c:  # over HTTP: 400 before a job exists
        r = c.post("/ingestion/trigger", json={"path": str(tree), "collection": "book"})
        assert r.status_code == 400 and "RAGLINE_INGEST_PATTERNS" in r.json()["message"]
        assert c.get("/ingestion/status").json()["jobs"] == []


def test_the_refusal_outside_the_roots_names_the_setting(tmp_path: Path,
                                                         tree: Path) -> None:
    with app_client(tmp_path, ingest_allowed_roots=[tmp_path / "elsewhere"]) as c:
        r = c.post("/ingestion/trigger", json={"path": str(tree), "collection": "book"})
        assert r.status_code == 400
        assert "RAGLINE_INGEST_ALLOWED_ROOTS" in r.json()["message"]


def wait_job(c: TestClient, job_id: str) -> Job:
    rl: Ragline = c.app.state.ragline  # type: ignore[attr-defined]
    return rl.ingestion.wait(rl.owner(), job_id, 60)
