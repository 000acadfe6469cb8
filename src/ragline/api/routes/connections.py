"""Providers and named connections: schemas, listing, health, add/test/delete (issue 13)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query

from ragline.api.deps import RL, Caller
from ragline.api.schemas import ConnectionCreate, ConnectionTest
from ragline.api.schemas_ops import (
    ConnectionCreated,
    ConnectionDeleted,
    ConnectionHealth,
    ConnectionList,
    ProviderHealth,
    ProviderSchemaOut,
    ProvidersOut,
)
from ragline.api.schemas_out import ok

router = APIRouter(tags=["providers"])


@router.get("/api/providers", responses=ok(ProvidersOut))
def providers(rl: RL, caller: Caller) -> dict[str, Any]:
    """Every provider by kind with capabilities and config schema; plugins that did not
    load (``errors``) or were not allowed (``skipped``), with the reason."""
    return rl.connections.providers()


@router.get("/api/providers/{name}/schema", responses=ok(ProviderSchemaOut))
def provider_schema(name: str, rl: RL, caller: Caller,
                    kind: str | None = Query(None, description="stores, embedders, "
                                             "rerankers, llms or tools")) -> dict[str, Any]:
    """The provider's config schema (secrets ``writeOnly``); one entry per kind that has a
    provider of this name (``openai`` is an embedder and a chat model)."""
    found = rl.connections.provider_schema(name, kind)
    return {**found[0], "kinds": [f["kind"] for f in found], "providers": found}


@router.get("/api/connections", responses=ok(ConnectionList))
def list_connections(rl: RL, caller: Caller) -> dict[str, Any]:
    """Every connection id (``local`` first); admins also see options, never secrets."""
    items = rl.connections.all(caller)
    return {"connections": items, "count": len(items)}


@router.post("/api/connections", status_code=201, responses=ok(ConnectionCreated, 201))
def add_connection(body: ConnectionCreate, rl: RL, caller: Caller) -> dict[str, Any]:
    """Add a named connection (admin); its config is validated (400 names the field) and
    its secrets stored, never returned."""
    return {"status": "created",
            **rl.connections.add(caller, body.id, body.provider, body.options, body.kind)}


@router.post("/api/connections/test", responses=ok(ProviderHealth))
def test_connection(body: ConnectionTest, rl: RL, caller: Caller) -> dict[str, Any]:
    """Validate the config and try it (its health check); nothing is saved."""
    return rl.connections.test(caller, body.provider, body.options, body.kind)


@router.get("/api/connections/{cid}/health", responses=ok(ConnectionHealth))
def connection_health(cid: str, rl: RL, caller: Caller) -> dict[str, Any]:
    """The connection's health: status, timestamp, details (latency_ms, collection count,
    storage size, model...) and error; 404 lists the known ids."""
    return rl.connections.health(caller, cid)


@router.delete("/api/connections/{cid}", responses=ok(ConnectionDeleted))
def delete_connection(cid: str, rl: RL, caller: Caller) -> dict[str, Any]:
    """Remove a connection added over the API (admin); config-file ones and local: 400."""
    rl.connections.delete(caller, cid)
    return {"status": "deleted", "id": cid}
