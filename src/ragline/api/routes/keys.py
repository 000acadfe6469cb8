"""API keys (admins): create (the key is shown once), list (never the secret), revoke."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from ragline.api.deps import RL, Caller
from ragline.api.schemas_out import KeyCreated, KeyList, KeyRevoked, ok

router = APIRouter(prefix="/api/keys", tags=["keys"])


class KeyCreate(BaseModel):
    role: Literal["admin", "user"] = Field(description="admin: every tenant and the control "
                                           "plane; user: its own tenant's records only.")
    tenant: str = Field(description="The tenant the key acts in.")
    name: str = Field("", max_length=200, description="A label for people.")

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"role": "user", "tenant": "alice", "name": "alice's laptop"}]})


@router.post("", status_code=201, responses=ok(KeyCreated, 201, "The key; its secret is "
                                                       "shown this once."))
def create_key(body: KeyCreate, rl: RL, caller: Caller) -> dict[str, Any]:
    """Create an API key (admin keys); the secret is in this response only."""
    rec, key = rl.keys.create(caller, body.role, body.tenant, body.name)
    return {**asdict(rec), "key": key}


@router.get("", responses=ok(KeyList))
def list_keys(rl: RL, caller: Caller) -> dict[str, Any]:
    """API keys without their secrets (admin keys)."""
    keys = [asdict(k) for k in rl.keys.all(caller)]
    return {"keys": keys, "count": len(keys)}


@router.delete("/{key_id}", responses=ok(KeyRevoked))
def revoke_key(key_id: str, rl: RL, caller: Caller) -> dict[str, Any]:
    """Revoke a key at once (admin keys); later requests with it answer 401."""
    return {"status": "revoked", **asdict(rl.keys.revoke(caller, key_id))}
