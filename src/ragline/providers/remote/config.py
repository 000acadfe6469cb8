"""The connection to a remote ragline server, shared by the store and the reranker."""

from __future__ import annotations

from typing import Any

from pydantic import Field, SecretStr

from ragline.client import Client, RetryPolicy
from ragline.providers.base import ProviderConfig


class RemoteRaglineConfig(ProviderConfig):
    base_url: str = Field(description="Root URL of the ragline server, e.g. http://host:8000")
    api_key: SecretStr | None = Field(None, description="An API key of that server (the "
                                      "store needs an admin key: it acts in every tenant).")
    timeout: float = Field(10.0, gt=0, description="Seconds per HTTP request.")
    retries: int = Field(3, ge=1, description="Attempts per request (1 = no retry).")
    backoff: float = Field(0.2, ge=0, description="First retry wait in seconds (doubles).")
    health_ttl: float = Field(30.0, ge=0, description="Seconds a health answer is trusted.")
    failure_ttl: float = Field(5.0, ge=0, description="Seconds a failed health check is "
                               "trusted (while the server is down, each query pays for one "
                               "failed connection every few seconds, not one per query).")
    collection_prefix: str = Field("shard-", description="Store: prefix of the remote "
                                   "collections that hold this store's shards.")


def client_for(cfg: RemoteRaglineConfig) -> Client:
    return Client(cfg.base_url, api_key=cfg.api_key.get_secret_value() if cfg.api_key else None,
                  timeout=cfg.timeout,
                  retry=RetryPolicy(attempts=cfg.retries, backoff=cfg.backoff,
                                    max_backoff=max(cfg.backoff, 2.0)))


def schema() -> dict[str, Any]:
    """JSON Schema of the config, the key marked write-only (it is never returned)."""
    out = RemoteRaglineConfig.model_json_schema()
    out["properties"]["api_key"]["writeOnly"] = True
    return out
