"""``?service=ID`` routed to a *store* connection: a second store served by this server.

The connection is a real server store, chosen by ``--store`` like the app fixtures'
store (tests/conftest.py): the default run routes to **pgvector** on a real
PostgreSQL; ``make test-chroma`` (``--store=chroma,chroma-server``) routes to an
embedded Chroma directory and to a real ``chroma run`` server. The server routing
there runs in-process with auth on, so tenants and roles are real keys.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ragline.api.app import create_app
from ragline.facade import Ragline
from ragline.facade_routed import connection_schema
from tests.ingestion_support import fake_settings

# the store under test for each --store value (qdrant-edge: the default run)
ROUTED = {"qdrant-edge": "pgvector", "chroma": "chroma", "chroma-server": "chroma-server"}
V = {"a": [1.0, 0.0, 0.0, 0.0], "b": [0.0, 1.0, 0.0, 0.0], "c": [0.7, 0.7, 0.0, 0.0]}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "kind" in metafunc.fixturenames:
        stores = [s.strip() for s in str(metafunc.config.getoption("--store")).split(",")]
        metafunc.parametrize("kind", [ROUTED[s] for s in stores if s in ROUTED],
                             scope="module")


@pytest.fixture(scope="module")
def postgres_dsn() -> Iterator[str]:
    from ragline.testing.postgres import postgres_server

    with postgres_server() as dsn:
        yield dsn


def connection(kind: str, request: pytest.FixtureRequest, tmp: Path) -> dict[str, Any]:
    """The ``[connections.ID]`` entry of a fresh store of ``kind`` (empty: its own schema,
    database or directory)."""
    if kind == "pgvector":
        return {"provider": "pgvector", "options": {
            "dsn": request.getfixturevalue("postgres_dsn"),
            "db_schema": f"routed_{uuid.uuid4().hex[:8]}"}}
    pytest.importorskip("chromadb")
    if kind == "chroma":
        return {"provider": "chroma", "options": {"path": str(tmp / "chroma")}}
    host, port = request.getfixturevalue("chroma_address")
    return {"provider": "chroma", "options": {
        "host": host, "port": port, "database": f"r{uuid.uuid4().hex[:12]}"}}


@dataclass
class World:
    client: TestClient
    rl: Ragline
    keys: dict[str, str]
    kind: str

    def call(self, method: str, path: str, who: str = "admin", service: str | None = "second",
             tenant: str | None = None, **kw: Any) -> Any:
        headers = {"Authorization": f"Bearer {self.keys[who]}"}
        if tenant:
            headers["X-Ragline-Tenant"] = tenant
        params = dict(kw.pop("params", {}))
        if service:
            params["service"] = service
        return self.client.request(method, path, headers=headers, params=params, **kw)


def start(settings: Any) -> tuple[Ragline, TestClient]:
    rl = Ragline(settings).start()
    client = TestClient(create_app(ragline=rl), base_url="http://localhost")
    client.__enter__()
    return rl, client


def stop(rl: Ragline, client: TestClient) -> None:
    client.__exit__(None, None, None)
    rl.close()


@pytest.fixture(scope="module")
def world(kind: str, request: pytest.FixtureRequest,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp(f"routed-{kind}")
    settings = fake_settings(tmp, auth="on", connections={
        "second": connection(kind, request, tmp)})
    rl, client = start(settings)
    me = rl.owner()
    keys = {"admin": rl.keys.create(me, "admin", "default")[1],
            "alice": rl.keys.create(me, "user", "alice")[1],
            "bob": rl.keys.create(me, "user", "bob")[1]}
    try:
        yield World(client, rl, keys, kind)
    finally:
        stop(rl, client)


def docs(*names: str, **meta: Any) -> dict[str, Any]:
    return {"documents": [{"id": n, "text": f"the {n} note about robots",
                           "metadata": {"letter": n, **meta}, "embedding": V[n]}
                          for n in names]}


def test_collections_and_documents_live_in_the_connections_store(world: World) -> None:
    w = world
    made = w.call("POST", "/api/collections", json={"name": "notes",
                                                   "metadata": {"team": "x"}})
    assert made.status_code == 201, made.text
    assert made.json()["name"] == "notes" and made.json()["metadata"] == {"team": "x"}
    listed = w.call("GET", "/api/collections").json()
    assert [c["name"] for c in listed["collections"]] == ["notes"]
    # not this server's: the local store and catalog know nothing of it
    assert w.call("GET", "/api/collections/notes", service=None).status_code == 404
    assert w.call("GET", "/collections/notes", service="local").status_code == 404
    added = w.call("POST", "/api/collections/notes/documents", who="alice",
                   json=docs("a", "b", "c"))
    assert added.status_code == 200 and added.json()["ids"] == ["a", "b", "c"]
    # the records are in the connection's store, under the shard its own catalog names
    store = w.rl.services.connections.instance("second")
    routed = w.rl.route(w.rl.owner(), "second")
    assert routed is not None and routed is not w.rl
    info = routed.services.collections.get("notes")
    assert routed.services.store is store
    assert store.count(info.shard, "alice", None) == 3
    assert store.count(info.shard, "default", None) == 0
    got = w.call("GET", "/api/collections/notes/documents/b", who="alice")
    assert got.json() == {"id": "b", "text": "the b note about robots",
                          "metadata": {"letter": "b"}}
    assert w.call("GET", "/api/collections/notes", who="alice").json()["count"] == 3
    assert w.call("PUT", "/api/collections/notes/metadata", json={"metadata": {"v": 2}},
                  params={"merge": "true"}).json()["metadata"] == {"team": "x", "v": 2}


def test_search_with_a_filter_then_deletes(world: World) -> None:
    w = world
    w.call("POST", "/api/collections", json={"name": "found"})
    w.call("POST", "/api/collections/found/documents", who="alice", json=docs("a", "b"))
    w.call("POST", "/api/collections/found/documents", who="alice",
           json=docs("c", kind="other"))
    hits = w.call("POST", "/api/collections/found/search", who="alice",
                  json={"embedding": V["a"], "limit": 5, "mode": "dense"}).json()["results"]
    assert [h["id"] for h in hits] == ["a", "c", "b"]
    where = w.call("POST", "/collections/found/search", who="alice",
                   json={"embedding": V["a"], "limit": 5, "mode": "dense",
                         "where": {"kind": "other"}}).json()["results"]
    assert [h["id"] for h in where] == ["c"]
    values = w.call("GET", "/api/collections/found/metadata-values", who="alice",
                    params={"field": "letter"}).json()
    assert sorted(values["values"]) == ["a", "b", "c"]
    listed = w.call("GET", "/api/collections/found/documents", who="alice",
                    params={"where": '{"letter": "b"}'}).json()
    assert [d["id"] for d in listed["documents"]] == ["b"] and listed["total"] == 1
    gone = w.call("DELETE", "/api/collections/found/documents", who="alice", json={"ids": ["a"]})
    assert gone.json()["count_deleted"] == 1
    assert w.call("GET", "/api/collections/found/documents/a", who="alice").status_code == 404
    emptied = w.call("DELETE", "/api/collections/found/documents/all", who="alice")
    assert emptied.status_code == 200 and emptied.json()["count_deleted"] == 2
    assert w.call("GET", "/api/collections/found", who="alice").json()["count"] == 0
    assert w.call("GET", "/api/collections/found/sources", who="alice").json()["total"] == 0
    assert w.call("DELETE", "/api/collections/found").json()["status"] == "deleted"
    assert w.call("GET", "/api/collections/found").status_code == 404


def test_tenants_are_isolated_through_the_route(world: World) -> None:
    w = world
    w.call("POST", "/api/collections", json={"name": "shared"})
    w.call("POST", "/api/collections/shared/documents", who="alice", json=docs("a"))
    w.call("POST", "/api/collections/shared/documents", who="bob", json=docs("b"))
    # another tenant's record is a 404 there as here, and never in a list or a search
    assert w.call("GET", "/api/collections/shared/documents/a", who="bob").status_code == 404
    assert [d["id"] for d in w.call("GET", "/api/collections/shared/documents",
                                    who="bob").json()["documents"]] == ["b"]
    hits = w.call("POST", "/api/collections/shared/search", who="bob",
                  json={"embedding": V["a"], "limit": 5, "mode": "dense"}).json()["results"]
    assert [h["id"] for h in hits] == ["b"]
    assert w.call("DELETE", "/api/collections/shared/documents", who="bob",
                  json={"ids": ["a"]}).json()["count_deleted"] == 0
    # documents/all of a user empties that user's tenant only
    assert w.call("DELETE", "/api/collections/shared/documents/all",
                  who="bob").json()["count_deleted"] == 1
    assert w.call("GET", "/api/collections/shared/documents/a", who="alice").status_code == 200
    # an admin acts on the tenant it names; naming none empties every tenant's documents
    assert w.call("GET", "/api/collections/shared", tenant="alice").json()["count"] == 1
    w.call("POST", "/api/collections/shared/documents", who="bob", json=docs("b"))
    assert w.call("DELETE", "/api/collections/shared/documents/all").status_code == 200
    for who in ("alice", "bob"):
        assert w.call("GET", "/api/collections/shared", who=who).json()["count"] == 0
    # a collection limited to some tenants does not exist for the others
    w.call("POST", "/api/collections", json={"name": "alices", "metadata": {
        "tenants": ["alice"]}})
    assert w.call("GET", "/api/collections/alices", who="bob").status_code == 404
    assert "alices" not in [c["name"] for c in w.call("GET", "/api/collections",
                                                       who="bob").json()["collections"]]
    assert w.call("GET", "/api/collections/alices", who="alice").status_code == 200


def test_a_user_cannot_do_admin_work_there(world: World) -> None:
    w = world
    w.call("POST", "/api/collections", json={"name": "guarded"})
    assert w.call("POST", "/api/collections", who="alice",
                  json={"name": "mine"}).status_code == 403
    assert w.call("DELETE", "/api/collections/guarded", who="alice").status_code == 403
    assert w.call("PUT", "/api/collections/guarded/metadata", who="alice",
                  json={"metadata": {}}).status_code == 403
    assert w.call("GET", "/api/collections/mine").status_code == 404
    assert w.call("GET", "/api/collections/guarded").status_code == 200
    # and a user cannot borrow another tenant
    assert w.call("GET", "/api/collections/guarded", who="alice",
                  tenant="bob").status_code == 403


def test_capabilities_decide_the_search_modes(world: World) -> None:
    w = world
    w.call("POST", "/api/collections", json={"name": "modes"})
    w.call("POST", "/api/collections/modes/documents", who="alice", json=docs("a", "b"))
    sparse = w.call("POST", "/api/collections/modes/search", who="alice",
                    json={"query": "robots", "mode": "sparse", "limit": 5})
    if w.kind == "pgvector":  # BM25 in PostgreSQL
        assert sparse.status_code == 200, sparse.text
        assert {h["id"] for h in sparse.json()["results"]} == {"a", "b"}
    else:  # Chroma: no capability 'hybrid'
        assert sparse.status_code == 400
        assert "capability 'hybrid'" in sparse.json()["detail"]


def test_server_side_embedding_uses_this_servers_embedders(world: World) -> None:
    w = world
    made = w.call("POST", "/api/collections", json={"name": "embedded",
                                                   "embed": {"provider": "fake"}})
    assert made.status_code == 201 and made.json()["embed"]["provider"] == "fake"
    texts = {"documents": [{"id": "x", "text": "robots sense the world"},
                           {"id": "y", "text": "tables of numbers"}]}
    assert w.call("POST", "/api/collections/embedded/documents", who="alice",
                  json=texts).status_code == 200
    hits = w.call("POST", "/api/collections/embedded/search", who="alice",
                  json={"query": "robots sense", "mode": "dense", "limit": 1}).json()
    assert hits["results"][0]["id"] == "x"
    routed = w.rl.route(w.rl.owner(), "second")
    assert routed is not None and routed.services.embedders is w.rl.services.embedders


def test_unknown_and_unfit_connections(world: World) -> None:
    w = world
    unknown = w.call("GET", "/api/collections", service="nope")
    assert unknown.status_code == 404 and "local, second" in unknown.json()["detail"]
    r = w.call("POST", "/api/connections", json={
        "id": "vectors", "kind": "embedders", "provider": "fake", "options": {}})
    assert r.status_code == 201, r.text
    unfit = w.call("GET", "/api/collections", service="vectors")
    assert unfit.status_code == 400
    assert "only store connections" in unfit.json()["detail"]
    w.call("DELETE", "/api/connections/vectors")


def test_collections_survive_a_restart(kind: str, request: pytest.FixtureRequest,
                                       tmp_path: Path) -> None:
    settings = fake_settings(tmp_path, auth="off", connections={
        "second": connection(kind, request, tmp_path)})
    rl, client = start(settings)
    try:
        client.post("/api/collections", params={"service": "second"},
                    json={"name": "kept", "metadata": {"n": 1}})
        client.post("/api/collections/kept/documents", params={"service": "second"},
                    json=docs("a", "b"))
    finally:
        stop(rl, client)
    assert (tmp_path / "data" / "connections" / "second" / "catalog.sqlite3").is_file()
    rl, client = start(settings)
    try:
        listed = client.get("/api/collections", params={"service": "second"}).json()
        assert [c["name"] for c in listed["collections"]] == ["kept"]
        got = client.get("/api/collections/kept", params={"service": "second"}).json()
        assert got["metadata"] == {"n": 1} and got["count"] == 2
        assert client.get("/api/collections/kept").status_code == 404  # still not local
    finally:
        stop(rl, client)


def test_a_connection_added_over_the_api_is_routed_to(kind: str, request: pytest.FixtureRequest,
                                                      tmp_path: Path) -> None:
    if kind == "chroma":
        pytest.skip("a directory on the server is the config file's to name")
    settings = fake_settings(tmp_path, auth="off")
    rl, client = start(settings)
    try:
        body = {"id": "added", **connection(kind, request, tmp_path)}
        assert client.post("/api/connections", json=body).status_code == 201
        made = client.post("/api/collections", params={"service": "added"},
                           json={"name": "late"})
        assert made.status_code == 201, made.text
        assert [c["name"] for c in client.get("/api/collections", params={
            "service": "added"}).json()["collections"]] == ["late"]
        # deleting the connection stops its facade; the same id is then unknown
        assert client.delete("/api/connections/added").status_code == 200
        assert client.get("/api/collections", params={"service": "added"}).status_code == 404
    finally:
        stop(rl, client)


def test_with_the_postgres_catalog_a_connection_has_a_schema_of_its_own(
        kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    dsn = request.getfixturevalue("postgres_dsn")
    base = f"cat_{uuid.uuid4().hex[:8]}"
    settings = fake_settings(
        tmp_path, catalog="postgres", catalog_options={"dsn": dsn, "db_schema": base},
        store="pgvector", store_options={"dsn": dsn, "db_schema": f"{base}_v"},
        connections={"second": connection(kind, request, tmp_path)})
    if kind != "pgvector":  # processes share the catalog; Chroma is not "shared"
        rl, client = start(settings)
        try:
            r = client.get("/api/collections", params={"service": "second"})
            assert r.status_code == 400 and "catalog 'postgres'" in r.json()["detail"]
        finally:
            stop(rl, client)
        return
    for _ in range(2):  # the second round: another process's view, after a restart
        rl, client = start(settings)
        try:
            if client.get("/api/collections/pg", params={"service": "second"}).status_code \
                    == 404:
                client.post("/api/collections", params={"service": "second"},
                            json={"name": "pg"})
                client.post("/api/collections/pg/documents", params={"service": "second"},
                            json=docs("a"))
            assert client.get("/api/collections/pg", params={
                "service": "second"}).json()["count"] == 1
            assert client.get("/api/collections/pg").status_code == 404
        finally:
            stop(rl, client)
    import psycopg

    with psycopg.connect(dsn) as conn:
        schemas = {r[0] for r in conn.execute(
            "SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE %s",
            (f"{base}%",))}
    assert connection_schema(base, "second") in schemas and base in schemas


def test_connection_schema_names_are_unique_and_short() -> None:
    names = {connection_schema("ragline", cid) for cid in ("a-b", "a_b", "A_b", "a.b")}
    assert len(names) == 4
    long = connection_schema("x" * 40, "y" * 64)
    assert len(long) <= 63 and long.startswith("x" * 40 + "_c_")


def test_a_store_says_what_it_cannot_do(tmp_path: Path) -> None:
    """A plugin store with fewer capabilities, as a second store (an embedded Qdrant Edge
    directory that claims only 'collections'): each operation that needs more is a 400
    naming the capability, while what it can do works."""
    from ragline.providers.registry import registry
    from ragline.providers.stores.qdrant_edge.provider import QdrantEdgeStore

    class BareStore(QdrantEdgeStore):
        CAPABILITIES = ["collections", "persistence"]

    registry.register("stores", "bare", BareStore)
    try:
        settings = fake_settings(tmp_path, auth="off", connections={
            "bare": {"provider": "bare", "options": {"path": str(tmp_path / "bare")}}})
        rl, client = start(settings)
        try:
            def call(method: str, path: str, **kw: Any) -> Any:
                return client.request(method, path, params={"service": "bare",
                                                            **kw.pop("params", {})}, **kw)

            assert call("POST", "/api/collections", json={"name": "c"}).status_code == 201
            assert call("POST", "/api/collections/c/documents",
                        json=docs("a", "b")).status_code == 200
            assert call("GET", "/api/collections/c/documents/a").json()["id"] == "a"
            refused = {
                "search": call("POST", "/api/collections/c/search",
                               json={"embedding": V["a"], "mode": "dense"}),
                "facets": call("GET", "/api/collections/c/metadata-values",
                               params={"field": "letter"}),
                "metadata_filtering": call("GET", "/api/collections/c/documents",
                                           params={"where": '{"letter": "a"}'}),
            }
            for capability, r in refused.items():
                assert r.status_code == 400, (capability, r.text)
                assert f"no capability '{capability}'" in r.json()["detail"]
            delete = call("DELETE", "/api/collections/c/documents",
                          json={"where": {"letter": "a"}})
            assert delete.status_code == 400 and "metadata_filtering" in delete.text
            assert call("GET", "/api/collections/c").json()["count"] == 2  # nothing deleted
            # the same operations on the local store (all capabilities) work
            client.post("/collections", json={"name": "c"})
            client.post("/collections/c/documents", json=docs("a", "b"))
            assert client.get("/collections/c/metadata-values",
                              params={"field": "letter"}).status_code == 200
        finally:
            stop(rl, client)
    finally:
        registry.unregister("stores", "bare")
