"""Who serves a ``?service=`` request is decided in one place (issue 35 item 6): the
route class of the collection, document, source and collection-search routers
(``api/routing.ServiceRoute``), in FastAPI's own order — a body that is not JSON is
refused here first, the caller is authenticated before any connection is named, and a
body this server's schema would refuse still goes to the other server."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import APIRouter
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from ragline.api import routes
from ragline.api.app import create_app
from ragline.api.routing import ServiceRoute
from ragline.testing.server import free_port
from tests.ingestion_support import fake_settings

JSON = {"content-type": "application/json"}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    """A server with one connection to a ragline server that does not answer: a request
    that is passed through gets 502, one answered here anything else."""
    gone = {"provider": "ragline-remote",
            "options": {"base_url": f"http://127.0.0.1:{free_port()}", "timeout": 2}}
    settings = fake_settings(tmp_path, auth="off", connections={"gone": gone})
    with TestClient(create_app(settings), base_url="http://localhost") as c:
        yield c


def test_every_collection_route_is_routed_by_the_route_class(client: TestClient) -> None:
    routers = [router for info in pkgutil.iter_modules(routes.__path__)
               for router in vars(importlib.import_module(f"{routes.__name__}.{info.name}"))
               .values() if isinstance(router, APIRouter)]
    collection_routes = [r for router in routers for r in router.routes
                         if isinstance(r, APIRoute) and r.path.startswith("/collections")]
    assert len(collection_routes) >= 15
    assert all(isinstance(r, ServiceRoute) for r in collection_routes)
    for path, ops in client.get("/openapi.json").json()["paths"].items():
        for op in ops.values():
            names = [p["name"] for p in op.get("parameters", [])]
            assert ("service" in names) == path.startswith("/collections"), path


def test_a_body_that_is_not_json_is_refused_here_before_routing(client: TestClient) -> None:
    r = client.post("/api/collections/kb/documents", params={"service": "gone"},
                    content=b'{"documents": [', headers=JSON)
    assert r.status_code == 400, r.text
    assert "JSON" in r.text or "json" in r.text


def test_a_body_this_schema_refuses_still_goes_to_the_other_server(
        client: TestClient) -> None:
    r = client.post("/api/collections/kb/documents", params={"service": "gone"},
                    json={"documents": "not a list"})
    assert r.status_code == 502 and r.json()["error"] == "provider_error"
    here = client.post("/api/collections/kb/documents", json={"documents": "not a list"})
    assert here.status_code == 400  # without ?service= this server validates it


def test_without_a_key_no_connection_is_named(tmp_path: Path) -> None:
    with TestClient(create_app(fake_settings(tmp_path, auth="on")),
                    base_url="http://localhost") as c:
        r = c.get("/api/collections", params={"service": "nope"})
        assert r.status_code == 401 and "nope" not in r.text
