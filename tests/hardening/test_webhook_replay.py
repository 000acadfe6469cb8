"""Webhook deliveries are de-duplicated by X-GitHub-Delivery (issue 10) and by the signed
body's hash, whatever the delivery id (issue 32). A delivery sent form-encoded
(``payload=<JSON>``, GitHub's other content type) meets the same text check as a JSON
body: a NUL or lone surrogate anywhere in it is a 400 naming the field, before git runs
or a job is queued (issue 32)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

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


@pytest.fixture
def pulls(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The repositories ``git pull`` ran in, in order."""
    import ragline.services.ingestion.webhook as service

    seen: list[Path] = []
    real_pull = service.git_pull

    def counting_pull(repo: Path) -> str:
        seen.append(repo)
        return real_pull(repo)

    monkeypatch.setattr(service, "git_pull", counting_pull)
    return seen


def test_replayed_delivery_answers_duplicate_and_does_nothing(
    client: TestClient, settings: Any, pulls: list[Path]
) -> None:
    body = push_payload([f"docs/{SENSING}"])
    first = deliver(client, body, "d-1", sign(body))
    assert first.status_code == 202 and first.json()["status"] == "queued", first.text
    rl: Ragline = client.app.state.ragline  # type: ignore[attr-defined]
    for _ in range(3):
        again = deliver(client, body, "d-1", sign(body))
        assert again.status_code == 200
        assert again.json() == {"status": "duplicate", "duplicate": True, "delivery": "d-1"}
    assert len(pulls) == 1 and len(rl.ingestion.jobs(rl.owner())) == 1
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
    assert len(rl.ingestion.jobs(rl.owner())) == 1


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


# -- form-encoded deliveries: text valid or refused ------------------------------------------
def deliver_as(c: TestClient, body: bytes, content_type: str, delivery: str) -> Any:
    return c.post("/ingestion/webhook/github", content=body, headers={
        "X-GitHub-Event": "push", "Content-Type": content_type,
        "X-GitHub-Delivery": delivery, "X-Hub-Signature-256": sign(body)})


def form(payload_json: str) -> bytes:
    return urlencode({"payload": payload_json}).encode()


@pytest.mark.parametrize("bad,what", [
    ("docs/a\\u0000b.md", "a NUL character"),
    ("docs/\\ud800.md", "a lone surrogate (U+D800)"),
])
def test_a_form_encoded_payload_with_bad_text_is_400_naming_the_field(
    client: TestClient, pulls: list[Path], bad: str, what: str
) -> None:
    rl: Ragline = client.app.state.ragline  # type: ignore[attr-defined]
    payload = push_payload([f"docs/{SENSING}"]).decode().replace(
        f'"docs/{SENSING}"', f'"docs/{SENSING}", "{bad}"')
    r = deliver_as(client, form(payload), "application/x-www-form-urlencoded", "d-bad")
    assert r.status_code == 400, r.text
    message = r.json()["message"]
    assert f"'payload.commits.0.modified.1' holds {what}, which cannot be stored" in message
    assert "\x00" not in r.text and pulls == [] and rl.ingestion.jobs(rl.owner()) == []
    # the same payload sent as JSON is refused the same way by the request guard
    r = deliver_as(client, json.dumps(json.loads(payload)).encode(), "application/json", "d-j")
    assert r.status_code == 400 and "commits.0.modified.1" in r.json()["message"]
    assert pulls == [] and rl.ingestion.jobs(rl.owner()) == []


def test_percent_encoded_bytes_that_are_not_utf8_are_refused(
    client: TestClient, pulls: list[Path]
) -> None:
    body = b"payload=" + quote(b'{"ref": "refs/heads/\xed\xa0\x80"}', safe="").encode()
    r = deliver_as(client, body, "application/x-www-form-urlencoded", "d-cesu")
    assert r.status_code == 400 and "not valid JSON" in r.json()["message"]
    assert pulls == []


def test_a_valid_form_encoded_push_is_still_queued(
    client: TestClient, pulls: list[Path]
) -> None:
    body = form(push_payload([f"docs/{SENSING}"]).decode())
    r = deliver_as(client, body, "application/x-www-form-urlencoded", "d-ok")
    assert r.status_code == 202 and r.json()["status"] == "queued", r.text
    assert len(pulls) == 1
