"""Bounded queues and bodies (issue 10): the job queue, concurrent uploads, the webhook."""

from __future__ import annotations

import threading
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ragline.api.app import create_app
from ragline.errors import TooManyRequests
from ragline.facade import Ragline
from tests.ingestion_support import fake_settings


def test_full_job_queue_is_429_with_retry_after(tmp_path: Path) -> None:
    rl = Ragline(fake_settings(tmp_path, job_queue_max=2, job_workers=1,
                               ingest_sync_max_bytes=16)).start()
    release = threading.Event()
    ingest = rl.services.ingest
    real = ingest.ingest_text

    def slow(*args: Any, **kwargs: Any) -> Any:
        release.wait(20)
        return real(*args, **kwargs)

    ingest.ingest_text = slow  # type: ignore[method-assign]
    try:
        with TestClient(create_app(ragline=rl), base_url="http://localhost") as c:
            text = {"text": "Grippers close two fingers on an object. " * 3}
            first = [c.post("/api/rag/ingest/text", json=text) for _ in range(2)]
            assert [r.status_code for r in first] == [202, 202]
            r = c.post("/api/rag/ingest/text", json=text)
            assert r.status_code == 429 and r.headers["retry-after"] == "10"
            assert "job_queue_max" in r.json()["message"]
            assert len(rl.ingestion.jobs(rl.owner(), 10)) == 2  # the refused one left no job behind
            release.set()
            for resp in first:
                job = rl.ingestion.wait(rl.owner(), resp.json()["job_id"], 30)
                assert job.status == "succeeded"
            assert c.post("/api/rag/ingest/text", json=text).status_code == 202
    finally:
        release.set()
        rl.close()


def test_concurrent_uploads_are_bounded(tmp_path: Path) -> None:
    rl = Ragline(fake_settings(tmp_path, max_concurrent_uploads=2)).start()
    try:
        with TestClient(create_app(ragline=rl), base_url="http://localhost",
                        headers={"X-API-Key": "k"}) as c:
            files = {"documentFile": ("a.txt", b"Grippers close two fingers.", "text/plain")}
            with ExitStack() as held:
                for _ in range(2):
                    held.enter_context(rl.ingestion.upload_slot())
                r = c.post("/api/rag/ingest/upload", files=files)
                assert r.status_code == 429 and "max_concurrent_uploads" in r.json()["message"]
                assert int(r.headers["retry-after"]) >= 1
                with pytest.raises(TooManyRequests):
                    held.enter_context(rl.ingestion.upload_slot())
            r = c.post("/api/rag/ingest/upload", files=files)
            assert r.status_code == 201, r.text
    finally:
        rl.close()


def test_webhook_body_limit_is_checked_before_the_signature(tmp_path: Path) -> None:
    s = fake_settings(tmp_path, webhook_max_bytes=2048, github_webhook_secret="s3cret")
    with TestClient(create_app(s), base_url="http://localhost") as c:
        headers = {"x-github-event": "push", "x-hub-signature-256": "sha256=00",
                   "content-type": "application/json"}
        big = b'{"ref": "' + b"x" * 5000 + b'"}'
        r = c.post("/ingestion/webhook/github", content=big, headers=headers)
        assert r.status_code == 413 and "webhook_max_bytes" in r.json()["message"]

        def chunks() -> Any:  # no Content-Length: counted while reading
            for _ in range(10):
                yield b" " * 1000

        r = c.post("/ingestion/webhook/github", content=chunks(), headers=headers)
        assert r.status_code == 413 and "webhook_max_bytes" in r.json()["message"]
        r = c.post("/ingestion/webhook/github", content=b'{"ref": "x"}', headers=headers)
        assert r.status_code == 401  # a small body reaches the signature check


def test_upload_body_counted_while_reading(tmp_path: Path) -> None:
    s = fake_settings(tmp_path, max_upload_bytes=4096)
    with TestClient(create_app(s), base_url="http://localhost",
                    headers={"X-API-Key": "k"}) as c:
        boundary = b"b0undary"

        def body() -> Any:
            yield (b"--" + boundary + b'\r\nContent-Disposition: form-data; name="documentFile";'
                   b' filename="a.txt"\r\nContent-Type: text/plain\r\n\r\n')
            for _ in range(100):
                yield b"x" * 1000
            yield b"\r\n--" + boundary + b"--\r\n"

        r = c.post("/api/rag/ingest/upload", content=body(),
                   headers={"content-type": "multipart/form-data; boundary=b0undary"})
        assert r.status_code == 413 and "max_upload_bytes" in r.json()["message"]
