"""Freed heap goes back to the OS after large work (issue 10): after large JSON bodies and
uploads, after refused oversized bodies, after ingestion jobs and after a shard is loaded
(its WAL replayed). The amounts are measured by benchmarks/bench_memory_large_requests.py;
here: that the trim really runs where it should, and only there."""

from __future__ import annotations

import ctypes.util
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ragline.api import middleware
from ragline.api.app import create_app
from ragline.facade import DocumentInput, IngestSource, Ragline
from ragline.observability import memory
from ragline.observability.memory import TRIM_AFTER_BYTES, release_freed_memory
from ragline.providers.stores.qdrant_edge import host as edge
from ragline.services.ingestion import jobs
from tests.ingestion_support import fake_settings


def anon_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1])
    raise AssertionError("no RssAnon")


@pytest.mark.skipif(not Path("/proc/self/status").exists() or ctypes.util.find_library("c")
                    is None, reason="needs Linux with glibc")
def test_release_gives_freed_heap_back() -> None:
    # 800 blocks of 64 KiB (under glibc's mmap threshold, so in the heap); freed, glibc
    # keeps them until trimmed
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    size = 64 * 1024
    blocks = [libc.malloc(size) for _ in range(800)]
    for b in blocks:
        ctypes.memset(b, 1, size)
    for b in blocks[:-1]:  # the last one stays: free() alone cannot cut the heap's top
        libc.free(b)
    before = anon_kb()
    assert release_freed_memory() is True
    assert anon_kb() < before - 30_000  # most of the ~50 MB returned
    libc.free(blocks[-1])


def test_no_trim_function_is_a_quiet_no_op(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "_libc", False)
    assert release_freed_memory() is False


@pytest.fixture
def trims(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    calls: list[str] = []
    monkeypatch.setattr(middleware, "release_freed_memory", lambda: calls.append("api"))
    monkeypatch.setattr(jobs, "release_freed_memory", lambda: calls.append("job"))
    monkeypatch.setattr(edge, "release_freed_memory", lambda: calls.append("shard"))
    monkeypatch.setattr(middleware, "TRIM_QUIET_S", 0.05)
    yield calls


def wait_for(trims: list[str], expected: list[str]) -> None:
    """A large JSON body's trim runs once bodies have stopped for TRIM_QUIET_S."""
    deadline = time.monotonic() + 10
    while trims != expected and time.monotonic() < deadline:
        time.sleep(0.01)
    assert trims == expected


def test_large_bodies_are_followed_by_a_trim_small_ones_are_not(
        tmp_path: Path, trims: list[str]) -> None:
    settings = fake_settings(tmp_path, max_request_bytes=4 * TRIM_AFTER_BYTES)
    with TestClient(create_app(settings), base_url="http://localhost",
                    headers={"X-API-Key": "k"}) as c:
        assert c.post("/collections", json={"name": "c"}).status_code == 201
        assert c.post("/collections", json={"name": "e", "embed": {"provider": "fake"}}
                      ).status_code == 201
        small = {"documents": [{"id": "a", "text": "small", "embedding": [0.1, 0.2]}]}
        assert c.post("/collections/c/documents", json=small).status_code == 200
        trims.clear()  # the first write opened (created) the shard
        assert c.post("/collections/c/documents", json=small).status_code == 200
        assert trims == []
        big = {"documents": [{"id": f"d{i}", "text": "x" * 1000, "embedding": [0.1, 0.2]}
                             for i in range(TRIM_AFTER_BYTES // 1000 + 10)]}
        assert len(json.dumps(big)) >= TRIM_AFTER_BYTES
        assert c.post("/collections/c/documents", json=big).status_code == 200
        wait_for(trims, ["api"])
        too_big = b'{"documents": [' + b" " * (4 * TRIM_AFTER_BYTES) + b"]}"
        r = c.post("/collections/c/documents", content=too_big,
                   headers={"content-type": "application/json"})
        assert r.status_code == 413  # refused on Content-Length: nothing read, no trim
        assert trims == ["api"]

        def chunked() -> Iterator[bytes]:  # no Content-Length: refused while reading
            for i in range(0, len(too_big), 65536):
                yield too_big[i:i + 65536]

        r = c.post("/collections/c/documents", content=chunked(),
                   headers={"content-type": "application/json"})
        assert r.status_code == 413
        assert trims == ["api", "api"]
        upload = {"documentFile": ("big.md", b"# Big\n\n" + b"words here. " * 50_000)}
        r = c.post("/api/rag/ingest/upload?collection=e", files=upload)
        assert r.status_code in (201, 202), r.text
        assert trims.count("api") == 3


def test_jobs_and_shard_loads_are_followed_by_a_trim(tmp_path: Path,
                                                     trims: list[str]) -> None:
    settings = fake_settings(tmp_path, ingest_sync_max_bytes=16)
    with Ragline(settings) as rl:
        me = rl.owner()
        rl.collections.create(me, "c")
        rl.documents.add(me, "c", [DocumentInput("a", {}, [0.1, 0.2], "a")])
        rl.collections.create(me, "e", embed={"provider": "fake"})
        out = rl.ingestion.submit(me, IngestSource("text", "e", text="Grippers close two fingers."))
        assert out.job is not None
        rl.ingestion.wait(me, out.job.id, 30)
    assert "job" in trims
    trims.clear()
    # a shard is loaded, and trimmed, in its host process: here, as a host does it
    shard = next(p for p in (tmp_path / "data").rglob("ragline_dim")).parent
    from ragline.providers.stores.qdrant_edge.config import QdrantEdgeConfig
    from ragline.providers.stores.qdrant_edge.generations import current

    gen = edge.open_generation("open", current(shard), int((shard / "ragline_dim").read_text()),
                               QdrantEdgeConfig(path=shard.parent))
    gen.close()
    assert trims == ["shard"]


def test_concurrent_large_bodies_trim_once_when_the_last_one_ends(trims: list[str]) -> None:
    """Under a stream of bulk writes a trim per request only returned pages the request
    in flight was about to fault back in (issue 18): the last large body out trims."""
    import anyio

    from ragline.api.middleware import GuardConfig, RequestGuard

    big = json.dumps({"documents": [{"text": "x" * TRIM_AFTER_BYTES}]}).encode()
    started, release = anyio.Event(), anyio.Event()
    order: list[str] = []

    async def app(scope: dict, receive: object, send: object) -> None:  # type: ignore[type-arg]
        order.append(f"in {scope['path']}")
        if scope["path"] == "/first":
            started.set()
            await release.wait()
        elif scope["path"] == "/second":
            await started.wait()
            assert trims == []  # the first one is still in flight
            release.set()
        order.append(f"out {scope['path']}")

    guard = RequestGuard(app, GuardConfig())  # type: ignore[arg-type]

    async def call(path: str) -> None:
        sent = [False]

        async def receive() -> dict:  # type: ignore[type-arg]
            if not sent[0]:
                sent[0] = True
                return {"type": "http.request", "body": big, "more_body": False}
            await anyio.sleep_forever()
            raise AssertionError

        async def send(message: Any) -> None:
            pass

        scope = {"type": "http", "method": "POST", "path": path, "headers": [
            (b"host", b"localhost"), (b"content-type", b"application/json"),
            (b"x-api-key", b"k")]}
        await guard(scope, receive, send)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(call, "/first")
            tg.start_soon(call, "/second")
        assert trims == []  # not at once: only after a quiet moment
        await anyio.sleep(0.3)
        await call("/third")  # a body right after a trim: its own trim, once quiet again
        await anyio.sleep(0.3)

    anyio.run(main)
    assert sorted(order) == ["in /first", "in /second", "in /third", "out /first",
                             "out /second", "out /third"]
    assert trims == ["api", "api"]  # one for the first two, one for the third


def test_a_stream_of_large_bodies_trims_once_after_it(trims: list[str]) -> None:
    """Bodies closer together than TRIM_QUIET_S: one trim, after the last."""
    import anyio

    from ragline.api.middleware import GuardConfig, RequestGuard

    big = json.dumps({"documents": [{"text": "x" * TRIM_AFTER_BYTES}]}).encode()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        pass

    guard = RequestGuard(app, GuardConfig())

    async def main() -> None:
        for _ in range(5):
            sent = [False]

            async def receive(sent: list[bool] = sent) -> Any:
                assert not sent[0]
                sent[0] = True
                return {"type": "http.request", "body": big, "more_body": False}

            scope = {"type": "http", "method": "POST", "path": "/x", "headers": [
                (b"host", b"localhost"), (b"content-type", b"application/json"),
                (b"x-api-key", b"k")]}
            await guard(scope, receive, None)  # type: ignore[arg-type]
            await anyio.sleep(0.01)
        assert trims == []
        await anyio.sleep(0.3)

    anyio.run(main)
    assert trims == ["api"]
