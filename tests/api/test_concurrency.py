"""Many concurrent requests against the real server: all answered, none blocked."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from tests.live_server import LiveServer

DIM = 24


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    srv = LiveServer(tmp_path_factory.mktemp("conc") / "data")
    srv.wait_ready()
    yield srv
    srv.stop()


def test_concurrent_searches_and_writes(server: LiveServer) -> None:
    url = server.url
    httpx.post(f"{url}/collections", json={"name": "c"}).raise_for_status()
    mat = np.random.default_rng(3).normal(size=(500, DIM))
    docs = [{"id": f"d{i}", "text": "t", "metadata": {"g": i % 5},
             "embedding": mat[i].tolist()} for i in range(500)]
    httpx.post(f"{url}/collections/c/documents", json={"documents": docs},
               timeout=60).raise_for_status()

    async def run() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=url, timeout=60) as c:
            tasks = []
            for i in range(100):
                if i % 10 == 0:
                    tasks.append(c.post("/collections/c/documents", json={"documents": [
                        {"id": f"new{i}", "text": "n", "metadata": {"g": 9},
                         "embedding": mat[i].tolist()}]}))
                else:
                    tasks.append(c.post("/collections/c/search", json={
                        "embedding": mat[i].tolist(), "limit": 1, "where": {"g": i % 5}}))
            return await asyncio.gather(*tasks)

    responses = asyncio.run(run())
    assert all(r.status_code == 200 for r in responses)
    for i, r in enumerate(responses):
        if i % 10:
            assert r.json()["results"][0]["id"] == f"d{i}"
    total = httpx.get(f"{url}/collections/c/documents", params={"where": '{"g":9}'}).json()
    assert total["total"] == 10


def test_health_answers_while_a_large_upsert_runs(server: LiveServer, tmp_path: Path) -> None:
    url = server.url
    httpx.post(f"{url}/collections", json={"name": "big"}).raise_for_status()
    vecs = np.random.default_rng(4).normal(size=(8000, DIM)).round(3)
    body = {"documents": [{"id": str(i), "text": "x" * 50, "embedding": vecs[i].tolist()}
                          for i in range(8000)]}

    async def run() -> tuple[float, float]:
        async with httpx.AsyncClient(base_url=url, timeout=120) as c:
            big = asyncio.create_task(c.post("/collections/big/documents", json=body))
            await asyncio.sleep(0.3)
            t0 = time.perf_counter()
            r = await c.get("/collections")
            health_s = time.perf_counter() - t0
            assert r.status_code == 200
            t1 = time.perf_counter()
            resp = await big
            assert resp.status_code == 200
            return health_s, time.perf_counter() - t1

    health_s, rest_s = asyncio.run(run())
    # the listing is answered while the upsert is still being processed
    assert health_s < 1.0, (health_s, rest_s)
