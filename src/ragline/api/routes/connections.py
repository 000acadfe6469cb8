"""Providers and named connections: schemas, listing, health, add/test/delete (issue 13)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query

from ragline.api.deps import RL, Caller
from ragline.api.schemas import ConnectionCreate, ConnectionTest

router = APIRouter(tags=["providers"])


@router.get("/api/providers")
def providers(rl: RL, caller: Caller) -> dict[str, Any]:
    """Every provider by kind with capabilities and config schema; plugins that did not
    load (``errors``) or were not allowed (``skipped``), with the reason."""
    return rl.providers()


@router.get("/api/providers/{name}/schema")
def provider_schema(name: str, rl: RL, caller: Caller,
                    kind: str | None = Query(None, description="stores, embedders, "
                                             "rerankers, llms or tools")) -> dict[str, Any]:
    """The provider's config schema (secrets ``writeOnly``); one entry per kind that has a
    provider of this name (``openai`` is an embedder and a chat model)."""
    found = rl.provider_schema(name, kind)
    return {**found[0], "kinds": [f["kind"] for f in found], "providers": found}


@router.get("/api/connections")
def list_connections(rl: RL, caller: Caller) -> dict[str, Any]:
    items = rl.list_connections(caller)
    return {"connections": items, "count": len(items)}


@router.post("/api/connections", status_code=201)
def add_connection(body: ConnectionCreate, rl: RL, caller: Caller) -> dict[str, Any]:
    return {"status": "created",
            **rl.add_connection(caller, body.id, body.provider, body.options, body.kind)}


@router.post("/api/connections/test")
def test_connection(body: ConnectionTest, rl: RL, caller: Caller) -> dict[str, Any]:
    """Validate the config and try it (its health check); nothing is saved."""
    return rl.test_connection(caller, body.provider, body.options, body.kind)


@router.get("/api/connections/{cid}/health")
def connection_health(cid: str, rl: RL, caller: Caller) -> dict[str, Any]:
    return rl.connection_health(caller, cid)


@router.delete("/api/connections/{cid}")
def delete_connection(cid: str, rl: RL, caller: Caller) -> dict[str, Any]:
    rl.delete_connection(caller, cid)
    return {"status": "deleted", "id": cid}
