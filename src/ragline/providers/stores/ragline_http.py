"""Another ragline server as a named connection: collection requests pass through over HTTP.

``?service=ID`` on a collection or document route, where ``ID`` is a connection
of this provider, forwards the request to the other server unchanged (method,
path, query, body) with the connection's API key and the caller's tenant and
role, and returns that server's status and body unchanged
(``ragline.services.routing``). This class only holds the validated config,
says where to send requests (:meth:`http_target`) and checks the server's
health; it is not a :class:`~ragline.providers.stores.base.VectorStore` and is
never the store of a data directory.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

import httpx
from pydantic import Field, SecretStr, field_validator

from ragline.providers.base import Health, ProviderConfig, config_schema


class RaglineHttpConfig(ProviderConfig):
    base_url: str = Field(description="Root URL of the other ragline server, e.g. "
                          "http://rag2:8000")
    api_key: SecretStr | None = Field(
        None, description="An admin key of that server: requests carry the caller's tenant "
        "(X-Ragline-Tenant) and, for user callers, X-Ragline-Role: user, so that server "
        "applies the caller's tenant and role, not the key's.")
    timeout: float = Field(30.0, gt=0, le=600, description="Seconds per forwarded request.")
    verify_tls: bool = Field(True, description="Verify the server's TLS certificate.")

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        url = value.strip().rstrip("/")
        if not url.startswith(("http://", "https://")) or len(url) < 10:
            raise ValueError("must be an http:// or https:// URL")
        return url


@dataclass(frozen=True)
class HttpTarget:
    """Where and how to forward: base URL, the headers that authenticate, timeout."""

    base_url: str
    headers: dict[str, str] = field(repr=False)
    timeout: float
    verify: bool = True


class RaglineHttpService:
    name: ClassVar[str] = "ragline-http"
    kind: ClassVar[str] = "store"
    Config: ClassVar[type[ProviderConfig]] = RaglineHttpConfig
    CAPABILITIES: ClassVar[list[str]] = ["collections", "search", "embeddings",
                                         "metadata_filtering", "passthrough"]

    def __init__(self, config: RaglineHttpConfig) -> None:
        self.config = config

    @classmethod
    def connection_schema(cls) -> dict[str, Any]:
        return config_schema(RaglineHttpConfig)

    def capabilities(self) -> list[str]:
        return list(self.CAPABILITIES)

    def http_target(self) -> HttpTarget:
        headers = {}
        if self.config.api_key is not None:
            headers["Authorization"] = f"Bearer {self.config.api_key.get_secret_value()}"
        return HttpTarget(self.config.base_url, headers, self.config.timeout,
                          self.config.verify_tls)

    def health(self) -> Health:
        """``GET /health`` of the other server (status, version, collection count, storage
        size, cross-encoder), and whether the key is accepted (``GET /info``)."""
        target = self.http_target()
        details: dict[str, Any] = {"url": target.base_url}
        started = time.perf_counter()
        try:
            with httpx.Client(base_url=target.base_url, timeout=min(target.timeout, 10),
                              verify=target.verify) as http:
                resp = http.get("/health")
                details["remote_latency_ms"] = round((time.perf_counter() - started) * 1000, 3)
                if resp.status_code != 200:
                    return Health.now("down", details,
                                      error=f"GET /health answered {resp.status_code}")
                body = resp.json()
                details.update(remote_status=body.get("status"), version=body.get("version"),
                               collection_count=body.get("collections"),
                               storage_bytes=body.get("storage_bytes"),
                               cross_encoder=body.get("cross_encoder"))
                auth = http.get("/info", headers=target.headers)
                details["key_accepted"] = auth.status_code == 200
        except httpx.HTTPError as exc:  # the kind of failure, never the URL's credentials
            return Health.now("down", details, error=f"unreachable ({type(exc).__name__})")
        except ValueError:
            return Health.now("down", details, error="GET /health did not answer JSON")
        if not details["key_accepted"]:
            return Health.now("degraded", details, error="the API key was refused")
        if details.get("remote_status") != "healthy":
            return Health.now("degraded", details)
        return Health.now("ok", details)

    def close(self) -> None:
        """Nothing held: every forwarded request uses the routing service's client."""
