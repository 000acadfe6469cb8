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
import json
import logging
import subprocess
import threading
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import parse_qs

from ragline.catalog.tables import DeliveryRows
from ragline.core.text import find_unstorable
from ragline.errors import AuthenticationError, InvalidInput, RaglineError, ServiceUnavailable
from ragline.settings import Settings, child_process_env

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
    env = child_process_env(GIT_TERMINAL_PROMPT="0")
    with _pull_lock:
        try:
            done = subprocess.run(
                ["git", "-C", str(repo), "pull", "--ff-only"], capture_output=True, text=True,
                timeout=GIT_TIMEOUT_S, env=env, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.error("git pull in %s failed: %s", repo, exc)
            raise RaglineError("git pull of the configured clone failed (see the server "
                               "log)") from exc
    if done.returncode != 0:
        log.error("git pull in %s failed: %s", repo, (done.stderr or done.stdout).strip())
        raise RaglineError("git pull of the configured clone failed (see the server log)")
    return done.stdout.strip()


class WebhookService:
    """Decodes, verifies and acts on a delivery; jobs go through the one submission path."""

    def __init__(self, settings: Settings, submit: Callable[..., Any],
                 deliveries: DeliveryRows | None = None) -> None:
        self.settings = settings
        self.submit = submit  # IngestionService.submit
        self.deliveries = deliveries

    def _keys(self, delivery_id: str | None, body: bytes) -> list[str]:
        """What a delivery is remembered by: the signed body's SHA-256 (a replay with a
        new, empty or missing delivery id is the same body; issue 32) and its id."""
        keys = ["sha256:" + hashlib.sha256(body).hexdigest()]
        if delivery_id and delivery_id.strip():
            keys.append(delivery_id.strip()[:200])
        return keys

    def first_delivery(self, delivery_id: str | None, body: bytes) -> bool:
        """False for a body or a delivery id already handled within
        ``webhook_dedup_window_s`` (checked after the signature, so unsigned requests
        cannot burn either; issues 10 and 32). Both are recorded."""
        if self.deliveries is None:
            return True
        window = self.settings.webhook_dedup_window_s
        fresh = [self.deliveries.first_time(key, window) for key in self._keys(delivery_id, body)]
        return all(fresh)

    def secret(self) -> str:
        secret = self.settings.github_webhook_secret
        if secret is None or not secret.get_secret_value():
            raise ServiceUnavailable(
                "GitHub webhook is not configured: set RAGLINE_GITHUB_WEBHOOK_SECRET "
                "(and RAGLINE_GITHUB_REPO_PATH to the local clone)")
        return secret.get_secret_value()

    def collection(self) -> str | None:
        s = self.settings
        return s.github_collection or s.default_collection

    def handle(self, tenant: str, headers: Mapping[str, str],
               body: bytes) -> tuple[int, dict[str, Any]]:
        """A delivery as received: ``(status, body)``. Blocking (git): use a worker thread.

        The signature is checked over the raw bytes before anything is decoded.
        """
        verify_signature(self.secret(), body, headers.get("x-hub-signature-256"))
        delivery = headers.get("x-github-delivery")
        if not self.first_delivery(delivery, body):  # a replay: answer, do nothing
            return 200, {"status": "duplicate", "duplicate": True, "delivery": delivery}
        try:
            return self._handle_event(tenant, headers, body)
        except Exception:  # let GitHub's redelivery of a failed delivery run again
            if self.deliveries is not None:
                for key in self._keys(delivery, body):
                    self.deliveries.forget(key)
            raise

    def _handle_event(self, tenant: str, headers: Mapping[str, str],
                      body: bytes) -> tuple[int, dict[str, Any]]:
        event = headers.get("x-github-event", "")
        if event == "ping":
            return 200, {"status": "pong"}
        if event != "push":
            return 202, {"status": "ignored", "reason": f"event '{event}' is not handled"}
        form = headers.get("content-type", "").startswith("application/x-www-form-urlencoded")
        try:
            if form:  # strict: percent-encoded bytes that are not UTF-8 are refused too
                fields = parse_qs(body.decode(), errors="strict")
                payload = json.loads(fields.get("payload", [""])[0])
            else:
                payload = json.loads(body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise InvalidInput("webhook body is not valid JSON") from exc
        if not isinstance(payload, dict):
            raise InvalidInput("webhook body must be a JSON object")
        # A JSON body met the request guard's text check; a form's `payload=` did not.
        bad = find_unstorable(payload, "payload" if form else "")
        if bad is not None:
            raise InvalidInput(f"Invalid request: {bad[0]} holds {bad[1]}, which cannot be "
                               "stored; send valid Unicode text without NUL characters")
        return 202, self.handle_push(tenant, payload)

    def handle_push(self, tenant: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Blocking (runs git): call it from a worker thread."""
        from ragline.services.ingestion.ingestion import IngestSource

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
            raise ServiceUnavailable("RAGLINE_GITHUB_REPO_PATH is not a git clone")
        pulled = git_pull(repo)
        root = repo / s.github_docs_path if s.github_docs_path.strip("/") else repo
        repo_paths = changed_paths(payload)
        restrict = None if repo_paths is None else under_docs(repo_paths, s.github_docs_path)
        if restrict is not None and not restrict:
            return {"status": "ignored", "reason": "the push changed no file under "
                    f"'{s.github_docs_path or '.'}'", "git": pulled}
        outcome = self.submit(tenant, IngestSource(
            "directory", self.collection(), path=str(root), paths=restrict, trigger="webhook"),
            local=True)  # the clone is the operator's configuration, not a client's path
        job = outcome.job
        return {"status": "queued", "job_id": job.id, "collection": job.collection,
                "paths": restrict, "git": pulled}
