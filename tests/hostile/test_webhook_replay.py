"""Webhook replays with changed delivery ids are queued once (issue 32, item 7).

DEPENDS ON h32a (issue 32 inputs: webhook replay de-duplicated by the signed body's
hash); on a branch without it this test fails (the replays are queued again).

Before: the same signed push body with a new, empty or missing ``X-GitHub-Delivery``
was queued again, 6 times of 6. Now a replay of the same signed body within the window
answers ``200 {"duplicate": true}`` whatever its delivery id, and only the first
delivery becomes a job.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import httpx
import pytest

from tests.api.test_ingestion_webhook import SECRET, Repos, push_payload, sign
from tests.hostile.conftest import Server, start_server
from tests.ingestion_support import SENSING

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


@pytest.fixture(scope="module")
def webhook_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("webhook")
    repos = Repos(tmp)
    srv = start_server(tmp, env={"RAGLINE_GITHUB_WEBHOOK_SECRET": SECRET,
                                 "RAGLINE_GITHUB_REPO_PATH": str(repos.clone),
                                 "RAGLINE_GITHUB_DOCS_PATH": "docs"})
    try:
        yield srv
    finally:
        srv.live.stop()


def _deliver(server: Server, body: bytes, delivery: str | None) -> httpx.Response:
    headers = {"X-GitHub-Event": "push", "Content-Type": "application/json",
               "X-Hub-Signature-256": sign(body)}
    if delivery is not None:
        headers["X-GitHub-Delivery"] = delivery
    return httpx.post(server.url + "/ingestion/webhook/github", content=body,
                      headers=headers, timeout=60)


def test_replays_with_new_empty_or_missing_delivery_ids_are_queued_once(
    webhook_server: Server,
) -> None:
    server = webhook_server
    body = push_payload([f"docs/{SENSING}"])
    first = _deliver(server, body, "delivery-1")
    assert first.status_code == 202 and first.json()["status"] == "queued", first.text
    for delivery in ("delivery-2", "", None, "delivery-3", "delivery-1", "x" * 64):
        again = _deliver(server, body, delivery)
        assert again.status_code == 200, (delivery, again.text)
        assert again.json()["duplicate"] is True, (delivery, again.text)
    jobs = httpx.get(server.url + "/ingestion/status", headers=server.admin, timeout=30).json()
    assert jobs["count"] == 1, jobs
    # a different signed body (a new push) is still handled
    other = push_payload([f"docs/{SENSING}"], ref="refs/heads/main") + b" "
    assert _deliver(server, other, "delivery-4").status_code == 202
