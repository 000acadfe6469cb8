"""Large bulk writes do not stall the server (issue 32, item 8), against a real server.

Before: 4 concurrent 61 MB ``POST /collections/{name}/documents`` held ``/health`` up to
15.3 s: the bodies were parsed on the event loop and the writes took every worker
thread. Now a large body is joined, parsed and checked on a worker thread and at most
half the worker threads serve large bodies at once, so ``/health`` keeps a p99 under
500 ms, and every write is stored.
"""

from __future__ import annotations

import json
import random
import threading
from typing import Any

import httpx

from tests.hostile.conftest import HealthProbe, Server

WRITERS = 4
TARGET_BYTES = 60_000_000


def _body() -> bytes:
    """About 60 MB: 384-d documents with text and metadata, as a bulk writer sends."""
    rnd = random.Random(32)
    docs: list[dict[str, Any]] = []
    size = 0
    while size < TARGET_BYTES:
        vector = [round(rnd.uniform(-1, 1), 6) for _ in range(384)]
        doc = {"id": f"d{len(docs)}", "text": f"document {len(docs)} " + "x" * 80,
               "embedding": vector, "metadata": {"i": len(docs), "tags": ["bulk"]}}
        size += len(json.dumps(doc)) + 2
        docs.append(doc)
    return json.dumps({"documents": docs}).encode()


def test_concurrent_60_mb_bulk_writes_keep_health_responsive(server: Server) -> None:
    for i in range(WRITERS):
        r = httpx.post(server.url + "/collections", headers=server.admin,
                       json={"name": f"bulk{i}"}, timeout=30)
        assert r.status_code == 201, r.text
    body = _body()
    assert len(body) >= TARGET_BYTES
    count = body.count(b'"id"')
    answers: dict[int, httpx.Response] = {}

    def write(i: int) -> None:
        answers[i] = httpx.post(
            server.url + f"/collections/bulk{i}/documents", content=body, timeout=600,
            headers={**server.admin, "Content-Type": "application/json"})

    writers = [threading.Thread(target=write, args=(i,)) for i in range(WRITERS)]
    with HealthProbe(server.url) as probe:
        for w in writers:
            w.start()
        for w in writers:
            w.join(600)
    print(f"\n/health during the attack: {probe.summary()}")
    probe.assert_responsive()
    for i in range(WRITERS):
        assert answers[i].status_code == 200, answers[i].text[:300]
        assert answers[i].json()["count"] == count
        got = httpx.get(server.url + f"/collections/bulk{i}", headers=server.admin, timeout=30)
        assert got.json()["count"] == count
