"""GitHub webhook against a real local git remote: signatures, ping, push → searchable."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ragline.api.app import create_app
from ragline.facade import Ragline
from tests.api.helpers import local_client
from tests.ingestion_support import (
    BOOK,
    CODE,
    SENSING,
    edit_section,
    fake_of,
    fake_settings,
)

SECRET = "s3cret-webhook"
GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "Author", "GIT_AUTHOR_EMAIL": "a@example.com",
           "GIT_COMMITTER_NAME": "Author", "GIT_COMMITTER_EMAIL": "a@example.com",
           "GIT_CONFIG_GLOBAL": "/dev/null"}

pytestmark = [pytest.mark.skipif(shutil.which("git") is None, reason="needs git"),
              pytest.mark.usefixtures("few_payload_indexes")]


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, capture_output=True,
                          text=True, check=True)
    return done.stdout


class Repos:
    """A bare "GitHub" remote, an author's working copy and the server's clone."""

    def __init__(self, tmp: Path) -> None:
        self.remote, self.author, self.clone = tmp / "remote.git", tmp / "author", tmp / "clone"
        git("init", "--bare", "-b", "main", str(self.remote), cwd=tmp)
        git("clone", str(self.remote), str(self.author), cwd=tmp)
        git("checkout", "-b", "main", cwd=self.author)
        shutil.copytree(BOOK, self.author / "docs")
        (self.author / "README.md").write_text("repository readme, not ingested\n")
        git("add", "-A", cwd=self.author)
        git("commit", "-m", "book", cwd=self.author)
        git("push", "origin", "main", cwd=self.author)
        git("clone", str(self.remote), str(self.clone), cwd=tmp)

    def commit_and_push(self, message: str) -> None:
        git("add", "-A", cwd=self.author)
        git("commit", "-m", message, cwd=self.author)
        git("push", "origin", "main", cwd=self.author)


def sign(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def push_payload(modified: list[str] = (), removed: list[str] = (),  # type: ignore[assignment]
                 ref: str = "refs/heads/main") -> bytes:
    commit = {"id": "abc", "added": [], "modified": list(modified), "removed": list(removed)}
    return json.dumps({"ref": ref, "forced": False, "commits": [commit]}).encode()


def post(client: TestClient, body: bytes, event: str = "push",
         signature: str | None = "auto") -> Any:
    headers = {"X-GitHub-Event": event, "Content-Type": "application/json"}
    if signature == "auto":
        headers["X-Hub-Signature-256"] = sign(body)
    elif signature is not None:
        headers["X-Hub-Signature-256"] = signature
    return client.post("/ingestion/webhook/github", content=body, headers=headers)


@pytest.fixture
def repos(tmp_path: Path) -> Repos:
    return Repos(tmp_path)


@pytest.fixture
def client(tmp_path: Path, repos: Repos) -> Iterator[TestClient]:
    settings = fake_settings(tmp_path, github_webhook_secret=SECRET,
                             github_repo_path=repos.clone, github_docs_path="docs")
    with local_client(create_app(settings)) as c:
        yield c


def rl_of(client: TestClient) -> Ragline:
    rl: Ragline = client.app.state.ragline  # type: ignore[attr-defined]
    return rl


def test_signatures_ping_and_ignored_pushes(client: TestClient) -> None:
    body = push_payload([f"docs/{SENSING}"])
    r = post(client, body, signature=None)
    assert r.status_code == 401 and "Missing X-Hub-Signature-256" in r.json()["message"]
    r = post(client, body, signature=sign(body, "wrong-secret"))
    assert r.status_code == 401 and r.json()["message"] == "Invalid webhook signature"
    r = post(client, body + b" ", signature=sign(body))  # body changed after signing
    assert r.status_code == 401
    r = post(client, b'{"zen": "Keep it logically awesome."}', event="ping")
    assert r.status_code == 200 and r.json() == {"status": "pong"}
    r = post(client, push_payload([f"docs/{SENSING}"], ref="refs/heads/feature"))
    assert r.status_code == 202 and r.json()["status"] == "ignored"
    r = post(client, push_payload(["README.md"]))
    assert r.status_code == 202 and r.json()["status"] == "ignored"
    assert rl_of(client).services.jobs.recent() == []


def test_webhook_without_a_secret_is_503(tmp_path: Path) -> None:
    with local_client(create_app(fake_settings(tmp_path))) as c:
        r = post(c, push_payload(["docs/x.md"]))
        assert r.status_code == 503 and "RAGLINE_GITHUB_WEBHOOK_SECRET" in r.json()["message"]


def test_push_pulls_and_reindexes_only_the_changed_lesson(client: TestClient,
                                                          repos: Repos) -> None:
    first = client.post("/ingestion/trigger", json={"path": str(repos.clone / "docs")})
    rl = rl_of(client)
    rl.ingestion.wait(rl.owner(), first.json()["job_id"], timeout=60)
    fake = fake_of(rl)
    texts = fake.texts_embedded
    edit_section(repos.author / "docs" / SENSING, "Cameras",
                 "Quasarcam sensors watch the zephyr horizon at night.")
    (repos.author / "docs" / CODE).unlink()
    repos.commit_and_push("edit a lesson, drop another")
    r = post(client, push_payload([f"docs/{SENSING}"], [f"docs/{CODE}"]))
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["status"] == "queued" and body["paths"] == [SENSING, CODE]
    job = rl.ingestion.wait(rl.owner(), body["job_id"], timeout=60)
    assert job.status == "succeeded" and job.trigger == "webhook"
    c = job.counters
    assert (c["files_seen"], c["files_changed"], c["files_deleted"]) == (1, 1, 1)
    assert c["texts_embedded"] == fake.texts_embedded - texts == c["chunks_created"] >= 1
    assert "Quasarcam" in (repos.clone / "docs" / SENSING).read_text()  # really pulled
    hits = client.post("/search", json={"query": "Quasarcam zephyr horizon", "limit": 3,
                                        "mode": "sparse"}).json()["results"]
    assert hits and "Quasarcam" in hits[0]["text"]
    assert hits[0]["metadata"]["source_path"] == SENSING
    lesson = client.get(f"/lesson/{CODE.rsplit('.', 1)[0]}")
    assert lesson.status_code == 404


def test_failed_pull_is_reported(client: TestClient, repos: Repos) -> None:
    shutil.rmtree(repos.remote)  # the clone's origin is gone
    r = post(client, push_payload([f"docs/{SENSING}"]))
    assert r.status_code == 500 and "git pull" in r.json()["message"]
