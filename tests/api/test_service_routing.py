"""Named connections and ``?service=`` routing, against a second real ragline server.

The second server is a real ``ragline serve`` subprocess with its own data directory
and auth on (its first admin key is the connection's key); the acme plugin is on
its PYTHONPATH, so it also shows a third-party plugin loading in a real server.
The first server runs in-process with auth on, so tenants and roles are real keys.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient

from ragline.api.app import create_app
from ragline.api.routing import forwarded_path
from ragline.core.types import Record, SearchMode, StoreQuery
from ragline.errors import ConfigError, InvalidInput
from ragline.facade import Ragline
from ragline.providers.registry import registry
from ragline.providers.remote.store import RemoteRaglineStore
from ragline.settings import load_settings
from ragline.testing.provider_conformance import ProviderContract
from ragline.testing.server import free_port
from tests.ingestion_support import fake_settings
from tests.live_server import LiveServer

PLUGINS = Path(__file__).resolve().parents[1] / "fixtures" / "plugins"
V = [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.7, 0.7, 0.0, 0.0]]


class Remote:
    def __init__(self, url: str, key: str) -> None:
        self.url, self.key = url, key

    def call(self, method: str, path: str, tenant: str | None = None,
             **kw: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.key}"}
        if tenant:
            headers["X-Ragline-Tenant"] = tenant
        return httpx.request(method, self.url + path, headers=headers, timeout=30, **kw)


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Remote]:
    data = tmp_path_factory.mktemp("remote") / "data"
    path = os.pathsep.join(p for p in (str(PLUGINS), os.environ.get("PYTHONPATH")) if p)
    srv = LiveServer(data, env={"RAGLINE_AUTH": "on", "PYTHONPATH": path})
    try:
        srv.wait_ready(120)
        yield Remote(srv.url, (data / "admin-key.txt").read_text().strip())
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def local(remote: Remote, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    tmp = tmp_path_factory.mktemp("local")
    settings = fake_settings(tmp, auth="on", connections={
        "remote": {"provider": "ragline-remote",
                   "options": {"base_url": remote.url, "api_key": remote.key}}})
    rl = Ragline(settings).start()
    me = rl.owner()
    admin = rl.keys.create(me, "admin", "default")[1]
    alice = rl.keys.create(me, "user", "alice")[1]
    bob = rl.keys.create(me, "user", "bob")[1]
    with TestClient(create_app(ragline=rl), base_url="http://localhost") as client:
        yield client, {"admin": admin, "alice": alice, "bob": bob}
    rl.close()


def as_(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_connections_are_listed_without_secrets(local: Any, remote: Remote) -> None:
    client, keys = local
    r = client.get("/api/connections", headers=as_(keys["admin"]))
    assert r.status_code == 200 and remote.key not in r.text
    by_id = {c["id"]: c for c in r.json()["connections"]}
    assert list(by_id) == ["local", "remote"]
    assert by_id["local"]["source"] == "builtin" and by_id["local"]["provider"] == "qdrant-edge"
    rem = by_id["remote"]
    assert rem["source"] == "config" and rem["provider"] == "ragline-remote"
    assert rem["options"]["base_url"] == remote.url and "api_key" not in rem["options"]
    assert rem["secrets_set"] == ["api_key"] and "passthrough" in rem["capabilities"]
    # a user sees which services exist, not how they are configured
    user_view = client.get("/api/connections", headers=as_(keys["alice"])).json()
    assert [set(c) for c in user_view["connections"]] == [
        {"id", "kind", "provider", "source", "capabilities"}] * 2


def test_health_of_each_connection(local: Any, remote: Remote) -> None:
    client, keys = local
    rem = client.get("/api/connections/remote/health", headers=as_(keys["admin"])).json()
    assert rem["id"] == "remote" and rem["status"] == "ok" and rem["error"] is None
    assert rem["details"]["key_accepted"] is True
    assert isinstance(rem["details"]["collection_count"], int)
    assert rem["details"]["storage_bytes"] > 0 and rem["details"]["latency_ms"] > 0
    loc = client.get("/api/connections/local/health", headers=as_(keys["admin"])).json()
    assert loc["status"] == "ok" and loc["details"]["engine"] == "qdrant-edge"
    assert "collection_count" in loc["details"] and "storage_bytes" in loc["details"]
    missing = client.get("/api/connections/nope/health", headers=as_(keys["admin"]))
    assert missing.status_code == 404 and "local, remote" in missing.json()["detail"]


def test_collection_and_document_operations_route_to_the_named_service(
        local: Any, remote: Remote) -> None:
    client, keys = local
    h = as_(keys["admin"])
    q = {"service": "remote"}
    r = client.post("/api/collections", params=q, headers=h,
                    json={"name": "routed", "metadata": {"display_name": "R"}})
    assert r.status_code == 201 and r.json()["name"] == "routed"
    assert remote.call("GET", "/collections/routed").json()["metadata"] == {"display_name": "R"}
    assert client.get("/collections/routed", headers=h).status_code == 404  # not created here
    docs = [{"id": f"d{i}", "text": f"doc {i}", "embedding": v,
             "metadata": {"chapter": i, "tags": ["t"]}} for i, v in enumerate(V)]
    r = client.post("/api/collections/routed/documents", params=q, headers=h,
                    json={"documents": docs})
    assert r.status_code == 200 and r.json()["count"] == 3
    listed = client.get("/api/collections/routed/documents", headers=h,
                        params={**q, "where": json.dumps({"chapter": {"$gte": 1}})}).json()
    assert sorted(d["id"] for d in listed["documents"]) == ["d1", "d2"]
    assert client.get("/api/collections/routed/documents/d0", params=q,
                      headers=h).json()["text"] == "doc 0"
    odd = "a b/c?d%e"  # spaces, slashes, ? and % survive the hop
    client.post("/api/collections/routed/documents", params=q, headers=h,
                json={"documents": [{"id": odd, "text": "odd", "embedding": V[1]}]})
    got = client.get("/api/collections/routed/documents/a%20b/c%3Fd%25e", params=q,
                     headers=h)
    assert got.status_code == 200 and got.json()["id"] == odd
    client.request("DELETE", "/api/collections/routed/documents", params=q, headers=h,
                   json={"ids": [odd]})
    values = client.get("/api/collections/routed/metadata-values", headers=h,
                        params={**q, "field": "chapter"}).json()
    assert values["values"] == [0, 1, 2]
    hits = client.post("/api/collections/routed/search", params=q, headers=h,
                       json={"embedding": V[0], "limit": 2}).json()["results"]
    assert [x["id"] for x in hits] == ["d0", "d2"]
    sources = client.get("/api/collections/routed/sources", params=q, headers=h)
    assert sources.status_code == 200
    assert sources.json() == remote.call("GET", "/collections/routed/sources").json()
    # the un-prefixed routes route too
    assert client.get("/collections/routed", params=q, headers=h).json()["count"] == 3
    merged = client.put("/api/collections/routed/metadata", headers=h,
                        params={**q, "merge": "true"}, json={"metadata": {"x": 1}}).json()
    assert merged["metadata"] == {"display_name": "R", "x": 1}
    # spec 000's scenario: empty through the middleware, the service's own answer back
    direct_shape = {"status", "collection", "count_deleted"}
    r = client.delete("/api/collections/routed/documents/all", params=q, headers=h)
    assert r.status_code == 200 and r.json() == {"status": "emptied", "collection": "routed",
                                                 "count_deleted": 3}
    assert set(r.json()) == direct_shape
    after = remote.call("GET", "/collections/routed").json()
    assert after["count"] == 0 and after["metadata"] == {"display_name": "R", "x": 1}
    r = client.delete("/api/collections/routed", params=q, headers=h)
    assert r.status_code == 200
    assert remote.call("GET", "/collections/routed").status_code == 404


def test_errors_pass_through_unchanged(local: Any, remote: Remote) -> None:
    client, keys = local
    h = as_(keys["admin"])
    for method, path, body in [("GET", "/collections/nope", None),
                               ("POST", "/collections", {"name": ""}),
                               ("POST", "/collections/nope/search", {"limit": 1})]:
        via = client.request(method, "/api" + path, params={"service": "remote"}, headers=h,
                             json=body)
        direct = remote.call(method, path, json=body)
        assert via.status_code == direct.status_code >= 400, (path, via.text)
        assert via.json() == direct.json()
        assert via.headers["content-type"] == direct.headers["content-type"]


@pytest.mark.parametrize("path", [
    "/api/collections/kb/documents/%2e%2e",  # ".." the HTTP client would not normalise
    "/api/collections/kb/documents/%2E%2e/%2e%2E/keys",
    "/api/collections/kb/documents/.%2e/x",
    "/collections/kb/documents/a/%2e/b",
    "/api/collections/kb/documents/a%2Fb",  # a separator hidden in a segment
    "/api/collections/kb/documents/a%5cb",
    "/api/collections/kb/documents/a\\b",
])
def test_service_passes_through_only_the_authorised_path(local: Any, path: str) -> None:
    """Issue 32: ``..`` in a forwarded path made the connected server run another route
    than the one authorised here; such paths are refused before anything is sent."""
    client, keys = local
    for key in (keys["admin"], keys["alice"]):
        r = client.get(path, params={"service": "remote"}, headers=as_(key))
        assert r.status_code == 400, r.text
        assert "not passed through" in r.json()["message"]
    # the same path without ?service= is served here as before: the rule is the hop's
    assert client.get(path, headers=as_(keys["admin"])).status_code != 400


def test_forwarded_path_is_the_routed_path_re_encoded() -> None:
    assert forwarded_path("/api/collections/r/documents/a%20b/c%3Fd%25e",
                          "/api/collections/r/documents/a b/c?d%e") \
        == "/api/collections/r/documents/a%20b/c%3Fd%25e"
    assert forwarded_path("/collections/r/documents/caf%C3%A9:1@x",
                          "/collections/r/documents/café:1@x") \
        == "/collections/r/documents/caf%C3%A9:1@x"
    for raw in ("/collections/r/documents/..", "/collections/r/documents/./x",
                "/collections/r/../../keys"):
        with pytest.raises(InvalidInput):
            forwarded_path(raw, raw)
    with pytest.raises(InvalidInput):  # the raw path must be the one that was routed
        forwarded_path("/collections/r/documents/a", "/collections/r/documents/b")


def test_unknown_service_is_a_404_listing_the_known_ones(local: Any) -> None:
    client, keys = local
    r = client.get("/api/collections", params={"service": "elsewhere"},
                   headers=as_(keys["admin"]))
    assert r.status_code == 404 and r.json()["error"] == "connection_not_found"
    assert "known: local, remote" in r.json()["detail"]
    here = client.get("/api/collections", params={"service": "local"},
                      headers=as_(keys["admin"]))
    assert here.status_code == 200 and "collections" in here.json()
    assert client.get("/api/collections", params={"service": "remote"}).status_code == 401


def test_callers_tenant_and_role_apply_on_both_sides(local: Any, remote: Remote) -> None:
    client, keys = local
    q = {"service": "remote"}
    assert client.post("/api/collections", params=q, headers=as_(keys["admin"]),
                       json={"name": "shared"}).status_code == 201
    # a user cannot do an admin's work there either, though the connection's key is admin
    denied = client.post("/api/collections", params=q, headers=as_(keys["alice"]),
                         json={"name": "mine"})
    assert denied.status_code == 403 and denied.json()["error"] == "forbidden"
    assert remote.call("GET", "/collections/mine").status_code == 404
    for who, vec in (("alice", V[0]), ("bob", V[1])):
        r = client.post("/api/collections/shared/documents", params=q, headers=as_(keys[who]),
                        json={"documents": [{"id": who, "text": who, "embedding": vec}]})
        assert r.status_code == 200, r.text
    seen = client.get("/api/collections/shared/documents", params=q,
                      headers=as_(keys["alice"])).json()
    assert [d["id"] for d in seen["documents"]] == ["alice"]
    # on the other server the records are in the callers' tenants
    assert [d["id"] for d in remote.call("GET", "/collections/shared/documents",
                                          tenant="bob").json()["documents"]] == ["bob"]
    emptied = client.delete("/api/collections/shared/documents/all", params=q,
                            headers=as_(keys["alice"])).json()
    assert emptied["count_deleted"] == 1  # alice's only
    assert remote.call("GET", "/collections/shared", tenant="bob").json()["count"] == 1
    assert remote.call("GET", "/collections/shared", tenant="alice").json()["count"] == 0


def test_admin_adds_tests_and_deletes_connections(local: Any, remote: Remote) -> None:
    client, keys = local
    h = as_(keys["admin"])
    good = {"provider": "ragline-remote", "options": {"base_url": remote.url,
                                                      "api_key": remote.key}}
    tried = client.post("/api/connections/test", headers=h, json=good)
    assert tried.status_code == 200 and tried.json()["status"] == "ok"
    assert remote.key not in tried.text
    dead = {"provider": "ragline-remote",
            "options": {"base_url": f"http://127.0.0.1:{free_port()}", "timeout": 2}}
    down = client.post("/api/connections/test", headers=h, json=dead).json()
    assert down["status"] == "down" and "unreachable" in down["error"]
    bad = client.post("/api/connections/test", headers=h,
                      json={"provider": "ragline-remote", "options": {"base_url": "nope",
                                                                      "api_key": "sk-LEAK"}})
    assert bad.status_code == 400 and "'base_url'" in bad.json()["detail"]
    assert "sk-LEAK" not in bad.text
    assert client.get("/api/connections", headers=h).json()["count"] == 2  # nothing saved
    r = client.post("/api/connections", headers=h, json={"id": "second", **good})
    assert r.status_code == 201 and remote.key not in r.text
    assert r.json()["source"] == "api" and r.json()["secrets_set"] == ["api_key"]
    assert remote.key not in client.get("/api/connections", headers=h).text
    assert client.get("/api/collections", params={"service": "second"},
                      headers=h).status_code == 200
    assert client.get("/api/connections/second/health", headers=h).json()["status"] == "ok"
    again = client.post("/api/connections", headers=h, json={"id": "second", **good})
    assert again.status_code == 409
    for body in ({"id": "remote", **good}, {"id": "local", **good}):
        assert client.post("/api/connections", headers=h, json=body).status_code == 400
    missing = client.post("/api/connections", headers=h,
                          json={"id": "x", "provider": "ragline-remote", "options": {}})
    assert missing.status_code == 400 and "'base_url'" in missing.json()["detail"]
    on_disk = client.post("/api/connections", headers=h, json={
        "id": "disk", "provider": "qdrant-edge", "options": {"path": "/tmp/elsewhere"}})
    assert on_disk.status_code == 400 and "'options.path'" in on_disk.json()["detail"]
    user = client.post("/api/connections", headers=as_(keys["alice"]),
                       json={"id": "mine", **good})
    assert user.status_code == 403
    assert client.delete("/api/connections/second", headers=h).json()["status"] == "deleted"
    assert client.get("/api/collections", params={"service": "second"},
                      headers=h).status_code == 404
    assert client.delete("/api/connections/remote", headers=h).status_code == 400


def test_an_unreachable_service_is_a_502(tmp_path: Path) -> None:
    settings = fake_settings(tmp_path, auth="off", connections={
        "gone": {"provider": "ragline-remote",
                 "options": {"base_url": f"http://127.0.0.1:{free_port()}", "timeout": 2}}})
    with TestClient(create_app(settings), base_url="http://localhost") as client:
        r = client.get("/api/collections", params={"service": "gone"})
        assert r.status_code == 502 and r.json()["error"] == "provider_error"
        assert "could not be reached" in r.json()["detail"]


def test_connections_from_the_config_file(tmp_path: Path, remote: Remote) -> None:
    toml = tmp_path / "ragline.toml"
    toml.write_text(f'data_dir = "{tmp_path / "data"}"\nauth = "off"\n'
                    f'[connections.staging]\nprovider = "ragline-remote"\n'
                    f'[connections.staging.options]\nbase_url = "{remote.url}"\n'
                    f'api_key = "{remote.key}"\n')
    settings = load_settings(toml)
    assert settings.connections["staging"]["options"]["base_url"] == remote.url
    with Ragline(settings) as rl:
        assert [c["id"] for c in rl.connections.all(rl.owner())] == ["local", "staging"]
    toml.write_text(f'data_dir = "{tmp_path / "data"}"\n[connections.staging]\n'
                    f'provider = "ragline-remote"\n[connections.staging.options]\n'
                    f'base_url = "{remote.url}"\ntimeout = -5\n')
    with pytest.raises(ConfigError, match=r"connections\.staging.*'timeout'"):
        Ragline(load_settings(toml)).start()


def test_a_plugin_on_the_path_loads_in_a_real_server(remote: Remote) -> None:
    body = remote.call("GET", "/api/providers").json()
    assert "acme-hash" in [p["name"] for p in body["embedders"]]
    assert {e["name"] for e in body["errors"]} == {"acme-broken", "acme-not-a-provider"}


def test_one_ragline_remote_connection_is_a_store_and_a_service(
        remote: Remote, tmp_path: Path) -> None:
    """The object a ``ragline-remote`` connection builds is the store itself: what it
    writes as a store, ``?service=`` requests see on the other server (its shards are
    collections there), what they write it reads back, and its health has the server's
    details."""
    options = {"base_url": remote.url, "api_key": remote.key, "collection_prefix": "both-"}
    settings = fake_settings(tmp_path, auth="off", connections={
        "both": {"provider": "ragline-remote", "options": options}})
    rl = Ragline(settings).start()
    try:
        store = rl.services.connections.instance("both")
        assert isinstance(store, RemoteRaglineStore)
        assert store.http_target().base_url == remote.url
        q = {"service": "both"}
        with TestClient(create_app(ragline=rl), base_url="http://localhost") as client:
            store.create_shard("k1", 4)
            store.upsert("k1", [Record("a", "alpha", {"n": 1}, np.array(V[0]), "default")])
            names = [c["name"] for c in client.get("/api/collections", params=q)
                     .json()["collections"]]
            assert "both-k1" in names and "both-k1" not in [
                c["name"] for c in client.get("/api/collections").json()["collections"]]
            got = client.get("/api/collections/both-k1/documents/a", params=q).json()
            assert got["text"] == "alpha" and got["metadata"] == {"n": 1}
            r = client.post("/api/collections/both-k1/documents", params=q, json={
                "documents": [{"id": "b", "text": "beta", "embedding": V[1]}]})
            assert r.status_code == 200 and r.json()["count"] == 1
            assert [x.text for x in store.get("k1", "default", ["a", "b"])] == ["alpha", "beta"]
            hits = store.query_batch("k1", [StoreQuery(
                vector=np.array(V[1], dtype=np.float32), text="", limit=1,
                mode=SearchMode.DENSE, tenant="default")])
            assert [h.id for h in hits[0]] == ["b"]
            health = client.get("/api/connections/both/health").json()
            assert health["status"] == "ok" and health["details"]["key_accepted"] is True
            assert health["details"]["collection_count"] >= 1
            assert health["details"]["url"] == remote.url and remote.key not in str(health)
            store.drop_shard("k1")
            assert client.get("/api/collections/both-k1", params=q).status_code == 404
    finally:
        rl.close()


class TestRaglineRemoteConnection(ProviderContract):
    """A ``ragline-remote`` connection meets the provider contract with the server's
    details in its health (the store conformance suite runs in
    tests/providers/stores/test_ragline_remote.py)."""

    KIND = "stores"

    @pytest.fixture
    def provider(self, remote: Remote) -> Any:
        return registry.build("stores", "ragline-remote", {"base_url": remote.url,
                                                           "api_key": remote.key})

    @pytest.fixture
    def broken(self) -> Any:
        return registry.build("stores", "ragline-remote",
                              {"base_url": f"http://127.0.0.1:{free_port()}", "timeout": 2,
                               "retries": 1})

    def check_health_details(self, provider: Any, details: dict[str, Any]) -> None:
        assert isinstance(details["collection_count"], int)
        assert details["storage_bytes"] > 0 and details["key_accepted"] is True
        assert "passthrough" in provider.capabilities()

    def test_a_refused_key_is_degraded(self, remote: Remote) -> None:
        wrong = registry.build("stores", "ragline-remote", {"base_url": remote.url,
                                                            "api_key": "rl_000000000000_nope"})
        health = wrong.health()
        assert health.status == "degraded" and health.error == "the API key was refused"
        assert health.details["key_accepted"] is False

    def test_credentials_in_the_url_stay_out_of_health(self) -> None:
        dead = registry.build("stores", "ragline-remote", {
            "base_url": f"http://user:pw-SECRET@127.0.0.1:{free_port()}", "retries": 1})
        health = dead.health()
        assert health.status == "down" and "unreachable" in (health.error or "")
        assert "pw-SECRET" not in health.model_dump_json()
