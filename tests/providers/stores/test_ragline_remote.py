"""The ragline-remote store against a second real ``ragline serve`` (auth on, admin key):
the whole store conformance suite, a local ``Ragline`` keeping its shards there, and a
dead port."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragline.errors import StoreUnavailable
from ragline.facade import DocumentInput, Ragline, SearchRequest
from ragline.providers.registry import registry
from ragline.providers.remote.config import RemoteRaglineConfig
from ragline.providers.remote.store import RemoteRaglineStore
from ragline.settings import Settings
from ragline.testing.server import free_port
from ragline.testing.store_conformance import StoreConformance
from tests.live_server import LiveServer


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    root = tmp_path_factory.mktemp("remote-store")
    server = LiveServer(root / "data", env={"RAGLINE_AUTH": "on"})
    try:
        server.wait_ready()
        yield server.url, (root / "data" / "admin-key.txt").read_text().strip()
    finally:
        server.stop()


def config(remote: tuple[str, str]) -> RemoteRaglineConfig:
    url, key = remote
    return RemoteRaglineConfig(base_url=url, api_key=key,  # type: ignore[arg-type]
                               collection_prefix=f"t{uuid.uuid4().hex[:8]}-")


class TestRemoteRaglineStore(StoreConformance):
    SEARCH_ONE_PER_ID = True  # the remote's search answers one hit per id

    @pytest.fixture
    def store(self, remote: tuple[str, str]) -> Iterator[RemoteRaglineStore]:
        s = RemoteRaglineStore(config(remote))
        yield s
        for k in s.shard_keys():
            s.drop_shard(k)
        s.close()


def test_a_local_ragline_keeps_its_shards_on_the_remote(
        remote: tuple[str, str], tmp_path: Path) -> None:
    cfg = config(remote)
    settings = Settings(_env_file=None, data_dir=tmp_path / "local",  # type: ignore[call-arg]
                        store="ragline-remote",
                        store_options=cfg.model_dump(mode="json") | {"api_key": remote[1]})
    with Ragline(settings) as rl:
        me = rl.owner()
        rl.collections.create(me, "notes")
        rl.documents.add(me, "notes", [
            DocumentInput("robots", {"k": "a"}, [1.0, 0.0, 0.0], "r"),
            DocumentInput("bananas", {"k": "b"}, [0.0, 1.0, 0.0], "b")])
        hits = rl.search.query_sync(me, SearchRequest(collection="notes", embedding=[0.9, 0.1, 0.0],
                                                limit=1)).hits
        assert [h.id for h in hits] == ["r"]
        assert rl.collections.get(me, "notes").count == 2
        assert rl.admin.health()["store"]["status"] == "ok"
    store = RemoteRaglineStore(cfg)
    try:
        assert len(store.shard_keys()) == 1  # the remote holds the local collection's shard
    finally:
        store.close()


def test_registered_with_a_write_only_key() -> None:
    cls = registry.get("stores", "ragline-remote")
    assert cls is RemoteRaglineStore
    schema = cls.connection_schema()
    assert schema["properties"]["api_key"]["writeOnly"] is True
    assert "secret" not in repr(cls.Config(base_url="http://x", api_key="secret"))


def test_a_dead_port_is_an_unavailable_store() -> None:
    store = RemoteRaglineStore(RemoteRaglineConfig(
        base_url=f"http://127.0.0.1:{free_port()}", retries=1))
    try:
        health = store.health()
        assert health.status == "down" and "could not be reached" in (health.error or "")
        with pytest.raises(StoreUnavailable):
            store.shard_keys()
    finally:
        store.close()
