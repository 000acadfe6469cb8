"""Concurrent searches are coalesced into store batches without changing any result."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragline.core.principal import Principal
from ragline.core.search_request import Mode, SearchRequest, SearchTarget
from ragline.core.types import ScoredRecord, StoreQuery
from ragline.facade import Ragline
from ragline.services.corpus.documents import DocumentInput
from ragline.testing.store_conformance import ranking
from tests.ingestion_support import fake_settings

WORDS = ["lidar", "camera", "imu", "encoder", "gripper", "planner", "map", "odometry",
         "servo", "torque", "wheel", "battery", "sonar", "radar", "kalman", "filter"]


@pytest.fixture
def rl(tmp_path: Path) -> Iterator[Ragline]:
    r = Ragline(fake_settings(tmp_path, search_max_wait_ms=20)).start()
    r.collections.create(r.owner(), "docs", embed={"provider": "fake"})
    rng = random.Random(7)  # varied texts: few exact score ties
    docs = [DocumentInput(" ".join(rng.choices(WORDS, k=rng.randint(2, 7))) + f" note {i}",
                          {"n": i}) for i in range(60)]
    r.documents.add(r.owner(), "docs", docs)
    r.documents.add(Principal.owner("other"), "docs", docs[:5])  # another tenant, same shard
    yield r
    r.close()


def queries() -> list[tuple[SearchRequest, SearchTarget]]:
    out = []
    modes: list[Mode] = ["dense", "sparse", "hybrid"]
    for i, mode in enumerate(modes * 6):
        out.append((SearchRequest(query=f"{WORDS[i % 8]} {WORDS[(i + 2) % 8]}", mode=mode,
                                  limit=5, fusion="rrf" if i % 2 else "dbsf"),
                    SearchTarget("docs", "other" if i % 7 == 0 else "default")))
    return out


def ids(hits: list[ScoredRecord]) -> list[tuple[float, str]]:
    return ranking(hits)


def test_concurrent_searches_share_store_calls_and_rank_as_alone(rl: Ragline) -> None:
    calls: list[int] = []
    real = rl.services.store.query_batch

    def counting(key: str, qs: list[StoreQuery]) -> list[list[ScoredRecord]]:
        calls.append(len(qs))
        return real(key, qs)

    rl.services.store.query_batch = counting  # type: ignore[assignment]
    alone = [rl.call_sync(rl.services.retrieval.search, *q) for q in queries()]
    calls.clear()
    items_before = rl.services.retrieval.batching_stats()["items"]

    async def together() -> list[Any]:
        return await asyncio.gather(*(rl.services.retrieval.search(*q) for q in queries()))

    batched = asyncio.run(together())
    assert [ids(r.hits) for r in batched] == [ids(r.hits) for r in alone]
    assert [r.mode for r in batched] == [q.mode for q, _ in queries()]
    assert sum(calls) == len(queries()) and len(calls) < len(queries())
    assert rl.services.retrieval.batching_stats()["items"] - items_before == len(queries())
    other = {h.id for (_, t), r in zip(queries(), batched, strict=True) if t.tenant == "other"
             for h in r.hits}
    mine = {h.id for (_, t), r in zip(queries(), batched, strict=True)
            if t.tenant == "default" for h in r.hits}
    assert other and mine and not other & mine  # tenants stay apart inside one batch


def test_one_failing_query_does_not_fail_its_batch_mates(rl: Ragline) -> None:
    real = rl.services.store.query_batch

    def poisoned(key: str, qs: list[StoreQuery]) -> list[list[ScoredRecord]]:
        if any(q.text == "poison" for q in qs):
            raise RuntimeError("this query breaks the store")
        return real(key, qs)

    rl.services.store.query_batch = poisoned  # type: ignore[assignment]
    good = queries()[:6]
    bad = (SearchRequest(query="poison", mode="sparse"), SearchTarget("docs", "default"))

    async def together() -> list[Any]:
        return await asyncio.gather(*(rl.services.retrieval.search(*q) for q in [*good, bad]),
                                    return_exceptions=True)

    res = asyncio.run(together())
    assert isinstance(res[-1], RuntimeError)
    search = rl.services.retrieval.search
    assert [ids(r.hits) for r in res[:-1]] == [ids(rl.call_sync(search, *q).hits) for q in good]


@pytest.mark.parametrize(("overrides", "held"), [
    ({}, False),  # the default: a lone query is embedded at once
    ({"embed_max_wait_ms": 1000}, False),  # a window holds only queries arriving mid-batch
    ({"embed_max_wait_ms": 1000, "embed_wait_when_idle": True}, True),  # the old policy
])
def test_the_embedding_settings_reach_the_search_batcher(
        tmp_path: Path, overrides: dict[str, Any], held: bool) -> None:
    with Ragline(fake_settings(tmp_path, embedding_cache_size=0, **overrides)) as r:
        batcher = r.services.embedders.batcher("fake")

        async def lone() -> int:
            task = asyncio.ensure_future(batcher.embed_one("a lone query"))
            for _ in range(5):  # loop turns only: no window could have ended
                await asyncio.sleep(0)
            sent = batcher.batches
            task.cancel()
            return sent

        assert r.call_sync(lone) == (0 if held else 1)
