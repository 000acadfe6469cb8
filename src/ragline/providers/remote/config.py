"""The connection to another ragline server, shared by the store, the reranker and
``?service=`` routing.

One config serves every use of ``ragline-remote``: as the store of a data directory
(``RAGLINE_STORE``), as a reranker, and as a named connection that ``?service=ID``
passes collection requests through to unchanged (:func:`http_target`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator

from ragline.client import Client, RetryPolicy
from ragline.providers.base import ProviderConfig, config_schema


class RemoteRaglineConfig(ProviderConfig):
    base_url: str = Field(description="Root URL of the other ragline server, e.g. "
                          "http://rag2:8000")
    api_key: SecretStr | None = Field(
        None, description="An admin key of that server. The store acts in every tenant "
        "(X-Ragline-Tenant); ?service= requests carry the caller's tenant and, for user "
        "callers, X-Ragline-Role: user, so that server applies the caller's tenant and "
        "role, not the key's.")
    timeout: float = Field(30.0, gt=0, le=600, description="Seconds per HTTP request (store "
                           "and reranker calls, and each forwarded ?service= request).")
    verify_tls: bool = Field(True, description="Verify the server's TLS certificate.")
    retries: int = Field(3, ge=1, description="Attempts per store/reranker request (1 = no "
                         "retry); forwarded ?service= requests are sent once.")
    backoff: float = Field(0.2, ge=0, description="First retry wait in seconds (doubles).")
    health_ttl: float = Field(30.0, ge=0, description="Reranker: seconds a health answer "
                              "is trusted.")
    failure_ttl: float = Field(5.0, ge=0, description="Reranker: seconds a failed health "
                               "check is trusted (while the server is down, each query pays "
                               "for one failed connection every few seconds, not one per "
                               "query).")
    collection_prefix: str = Field("shard-", description="Store: prefix of the remote "
                                   "collections that hold this store's shards.")

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        url = value.strip().rstrip("/")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError("must be an http:// or https:// URL")
        return url


@dataclass(frozen=True)
class HttpTarget:
    """Where and how ``?service=`` routing forwards: base URL, the headers that
    authenticate, timeout, TLS verification."""

    base_url: str
    headers: dict[str, str] = field(repr=False)
    timeout: float
    verify: bool = True


def http_target(cfg: RemoteRaglineConfig) -> HttpTarget:
    headers = {}
    if cfg.api_key is not None:
        headers["Authorization"] = f"Bearer {cfg.api_key.get_secret_value()}"
    return HttpTarget(cfg.base_url, headers, cfg.timeout, cfg.verify_tls)


def client_for(cfg: RemoteRaglineConfig) -> Client:
    return Client(cfg.base_url, api_key=cfg.api_key.get_secret_value() if cfg.api_key else None,
                  timeout=cfg.timeout, verify=cfg.verify_tls,
                  retry=RetryPolicy(attempts=cfg.retries, backoff=cfg.backoff,
                                    max_backoff=max(cfg.backoff, 2.0)))


def schema() -> dict[str, Any]:
    """JSON Schema of the config, the key marked write-only (it is never returned)."""
    return config_schema(RemoteRaglineConfig)


def safe_url(url: str) -> str:
    """``url`` without user info (``http://user:pass@host`` → ``http://host``), for health
    details and messages."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]).geturl()
