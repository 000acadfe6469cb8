"""GitHub push webhook: verify, pull the local clone, queue an incremental job.

The signature is checked over the raw body before anything is parsed or run
(HMAC-SHA256, constant-time compare). A push to the configured branch runs
``git pull --ff-only`` in the configured clone (serialised: two deliveries must
not race on ``.git/index.lock``) and queues an incremental job restricted to
the files the push touched, mapped from repository paths to paths under the
ingested sub-directory. When the payload cannot list every change (GitHub
sends at most 20 commits; forced pushes rewrite history) the job scans the
whole tree instead, which costs only hashing thanks to the incremental state.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import subprocess
import threading
from pathlib import Path, PurePosixPath
from typing import Any

from ragline.catalog.deliveries import Deliveries
from ragline.errors import AuthenticationError, InvalidInput, RaglineError, ServiceUnavailable
from ragline.services.jobs import JobService
from ragline.settings import Settings

log = logging.getLogger(__name__)

PAYLOAD_COMMIT_LIMIT = 20
"""GitHub truncates ``commits`` of a push payload to this many."""
GIT_TIMEOUT_S = 120
_pull_lock = threading.Lock()


def verify_signature(secret: str, body: bytes, header: str | None) -> None:
    """Raise :class:`AuthenticationError` unless ``header`` signs ``body`` with ``secret``."""
    if not header:
        raise AuthenticationError("Missing X-Hub-Signature-256 header")
    algo, _, signature = header.partition("=")
    if algo != "sha256" or not signature:
        raise AuthenticationError("Malformed X-Hub-Signature-256 header (expected sha256=<hex>)")
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, signature.strip().lower()):
        raise AuthenticationError("Invalid webhook signature")


def changed_paths(payload: dict[str, Any]) -> list[str] | None:
    """Repository paths added, modified or removed by a push; None when not knowable."""
    commits = payload.get("commits")
    if not isinstance(commits, list) or payload.get("forced"):
        return None
    if len(commits) >= PAYLOAD_COMMIT_LIMIT:
        return None
    paths: dict[str, None] = {}
    for commit in commits:
        if not isinstance(commit, dict):
            return None
        for key in ("added", "modified", "removed"):
            for path in commit.get(key) or []:
                if isinstance(path, str):
                    paths[path] = None
    return list(paths)


def under_docs(paths: list[str], docs_path: str) -> list[str]:
    """Repository paths → paths relative to the ingested sub-directory (others dropped)."""
    prefix = PurePosixPath(docs_path.strip("/")) if docs_path.strip("/") else None
    out = []
    for p in paths:
        posix = PurePosixPath(p)
        if prefix is None:
            out.append(str(posix))
        elif posix.is_relative_to(prefix):
            out.append(str(posix.relative_to(prefix)))
    return out


def git_pull(repo: Path) -> str:
    """``git -C repo pull --ff-only``; raises with git's own message when it fails."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    with _pull_lock:
        try:
            done = subprocess.run(
                ["git", "-C", str(repo), "pull", "--ff-only"], capture_output=True, text=True,
                timeout=GIT_TIMEOUT_S, env=env, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.error("git pull in %s failed: %s", repo, exc)
            raise RaglineError(f"git pull failed: {type(exc).__name__}") from exc
    if done.returncode != 0:  # git's message names the remote, not the clone's path
        log.error("git pull in %s failed: %s", repo, (done.stderr or done.stdout).strip())
        raise RaglineError(f"git pull failed: {(done.stderr or done.stdout).strip()}")
    return done.stdout.strip()


class WebhookService:
    def __init__(self, settings: Settings, jobs: JobService, tenant: str,
                 deliveries: Deliveries | None = None) -> None:
        self.settings = settings
        self.jobs = jobs
        self.tenant = tenant
        self.deliveries = deliveries

    def first_delivery(self, delivery_id: str | None) -> bool:
        """False for a delivery id already handled within ``webhook_dedup_window_s``
        (call after the signature check, so unsigned requests cannot burn ids)."""
        if not delivery_id or self.deliveries is None:
            return True
        return self.deliveries.first_time(delivery_id.strip()[:200],
                                          self.settings.webhook_dedup_window_s)

    def handle_delivery(self, payload: dict[str, Any], delivery_id: str | None) -> dict[str, Any]:
        """:meth:`handle_push`; a failure forgets the delivery so GitHub's redelivery retries."""
        try:
            return self.handle_push(payload)
        except Exception:
            if delivery_id and self.deliveries is not None:
                self.deliveries.forget(delivery_id.strip()[:200])
            raise

    def secret(self) -> str:
        secret = self.settings.github_webhook_secret
        if secret is None or not secret.get_secret_value():
            raise ServiceUnavailable(
                "GitHub webhook is not configured: set RAGLINE_GITHUB_WEBHOOK_SECRET "
                "(and RAGLINE_GITHUB_REPO_PATH to the local clone)")
        return secret.get_secret_value()

    def collection(self) -> str:
        s = self.settings
        return s.github_collection or s.default_collection or "knowledge"

    def handle_push(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Blocking (runs git): call it from a worker thread."""
        s = self.settings
        branch_ref = f"refs/heads/{s.github_branch}"
        ref = payload.get("ref")
        if ref != branch_ref:
            return {"status": "ignored", "reason": f"push to {ref}, not {branch_ref}"}
        if s.github_repo_path is None:
            raise ServiceUnavailable("GitHub webhook has no clone to update: set "
                                     "RAGLINE_GITHUB_REPO_PATH")
        repo = Path(s.github_repo_path)
        if not (repo / ".git").exists():
            raise InvalidInput(f"RAGLINE_GITHUB_REPO_PATH {repo} is not a git clone")
        pulled = git_pull(repo)
        root = repo / s.github_docs_path if s.github_docs_path.strip("/") else repo
        repo_paths = changed_paths(payload)
        restrict = None if repo_paths is None else under_docs(repo_paths, s.github_docs_path)
        if restrict is not None and not restrict:
            return {"status": "ignored", "reason": "the push changed no file under "
                    f"'{s.github_docs_path or '.'}'", "git": pulled}
        job = self.jobs.submit_directory(self.collection(), self.tenant, str(root),
                                         "incremental", restrict=restrict, trigger="webhook")
        return {"status": "queued", "job_id": job.id, "collection": job.collection,
                "paths": restrict, "git": pulled}
