"""Webhook deliveries are de-duplicated by X-GitHub-Delivery (issue 10) and by the signed
body's hash, whatever the delivery id (issue 32)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ragline.api.app import create_app
from ragline.facade import Ragline
from tests.api.test_ingestion_webhook import SECRET, Repos, push_payload, sign
from tests.ingestion_support import SENSING, fake_settings


def deliver(c: TestClient, body: bytes, delivery: str | None,
            signature: str | None = None) -> Any:
    headers = {"X-GitHub-Event": "push", "Content-Type": "application/json",
               "X-Hub-Signature-256": signature or sign(body)}
    if delivery is not None:
        headers["X-GitHub-Delivery"] = delivery
    return c.post("/ingestion/webhook/github", content=body, headers=headers)


@pytest.fixture
def settings(tmp_path: Path) -> Any:
    repos = Repos(tmp_path)
    return fake_settings(tmp_path, github_webhook_secret=SECRET,
                         github_repo_path=repos.clone, github_docs_path="docs")


@pytest.fixture
def client(settings: Any) -> Iterator[TestClient]:
    with TestClient(create_app(settings), base_url="http://localhost") as c:
        yield c


def test_replayed_delivery_answers_duplicate_and_does_nothing(
    client: TestClient, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    pulls: list[Path] = []
    import ragline.services.webhook as service

    real_pull = service.git_pull
    def counting_pull(repo: Path) -> str:
        pulls.append(repo)
        return real_pull(repo)

    monkeypatch.setattr(service, "git_pull", counting_pull)
    body = push_payload([f"docs/{SENSING}"])
    first = deliver(client, body, "d-1", sign(body))
    assert first.status_code == 202 and first.json()["status"] == "queued", first.text
    rl: Ragline = client.app.state.ragline  # type: ignore[attr-defined]
    for _ in range(3):
        again = deliver(client, body, "d-1", sign(body))
        assert again.status_code == 200
        assert again.json() == {"status": "duplicate", "duplicate": True, "delivery": "d-1"}
    assert len(pulls) == 1 and len(rl.jobs(rl.owner())) == 1
    # a bad signature with a known id is still 401, not "duplicate"
    assert deliver(client, body, "d-1", "sha256=00").status_code == 401
    # another delivery id with another body is handled
    other = push_payload([f"docs/{SENSING}"], removed=["docs/gone.md"])
    assert deliver(client, other, "d-2", sign(other)).status_code == 202
    assert len(pulls) == 2


@pytest.mark.parametrize("delivery", ["d-new", "", None, "d-1 "])
def test_the_same_signed_body_with_any_delivery_id_is_a_duplicate(
    client: TestClient, delivery: str | None
) -> None:
    rl: Ragline = client.app.state.ragline  # type: ignore[attr-defined]
    body = push_payload([f"docs/{SENSING}"])
    assert deliver(client, body, "d-1").status_code == 202
    for n in range(6):  # issue 32: 6 of 6 such replays were queued again
        again = deliver(client, body, f"{delivery}{n}" if delivery else delivery)
        assert again.status_code == 200, again.text
        assert again.json()["duplicate"] is True and again.json()["status"] == "duplicate"
    assert len(rl.jobs(rl.owner())) == 1


def test_delivery_ids_survive_a_restart_and_expire_after_the_window(settings: Any) -> None:
    with Ragline(settings) as rl:
        deliveries = rl.services.webhook.deliveries
        assert deliveries is not None
        assert deliveries.first_time("x", 60) and not deliveries.first_time("x", 60)
    with Ragline(settings) as rl:
        deliveries = rl.services.webhook.deliveries
        assert deliveries is not None
        assert not deliveries.first_time("x", 60)  # persisted in the catalog
        assert deliveries.first_time("x", 0)  # outside a zero window: handled again
