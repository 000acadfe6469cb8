"""Client for a remote ragline server: the "remote ragline" reranker provider (spec 000).

Reranking is an optional improvement on results the caller already has, so
:meth:`RaglineClient.rerank` degrades gracefully: when the server has no
cross-encoder, cannot be reached, times out or answers an error, it logs a
warning and returns the documents unchanged. It never raises, so a reranking
outage can never turn into a search outage.

Whether the server has a cross-encoder is learnt from ``GET /health`` (the
``cross_encoder`` field) and cached for ``health_ttl`` seconds so that each
rerank costs one request, not two. A failed health check is remembered for
``failure_ttl`` seconds (default 5), so while the server is down each query
pays for one failed connection every few seconds rather than one (with
retries, or a full timeout) per query, and a server that comes back is used
again soon after.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import httpx
from pydantic import Field, SecretStr
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from ragline.providers.base import Health, ProviderConfig

log = logging.getLogger("ragline.client")


def _is_retryable(exc: BaseException) -> bool:
    """Connection failures and 5xx answers may be transient; timeouts and 4xx are not.

    A timed-out rerank is retried by nobody: the caller is waiting, and a slow
    server only gets slower with more load.
    """
    if isinstance(exc, httpx.TimeoutException):
        return False
    if isinstance(exc, httpx.TransportError):
        return True
    return isinstance(exc, httpx.HTTPStatusError) and exc.response.status_code >= 500


class RaglineClientConfig(ProviderConfig):
    base_url: str = Field(description="Root URL of the ragline server, e.g. http://host:8000")
    api_key: SecretStr | None = None
    timeout: float = Field(10.0, gt=0, description="Seconds per HTTP request.")
    retries: int = Field(3, ge=1, description="Attempts per request (1 = no retry).")
    health_ttl: float = Field(30.0, ge=0, description="Seconds a health answer is trusted.")
    failure_ttl: float = Field(5.0, ge=0, description="Seconds a failed health check is trusted.")


class RaglineClient:
    """Talks to ``/health`` and ``/rerank`` of a ragline server over HTTP."""

    name: ClassVar[str] = "ragline-remote"
    kind: ClassVar[str] = "reranker"
    Config: ClassVar[type[ProviderConfig]] = RaglineClientConfig
    CAPABILITIES: ClassVar[list[str]] = ["rerank"]

    def __init__(
        self,
        base_url: str | RaglineClientConfig,
        api_key: str | None = None,
        timeout: float = 10,
        retries: int = 3,
        health_ttl: float = 30,
        *,
        failure_ttl: float = 5,
        backoff: float = 0.2,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """Plain arguments for library users, or a config as the registry passes it."""
        if isinstance(base_url, RaglineClientConfig):
            cfg = base_url
            base_url, timeout, retries = cfg.base_url, cfg.timeout, cfg.retries
            health_ttl, failure_ttl = cfg.health_ttl, cfg.failure_ttl
            api_key = cfg.api_key.get_secret_value() if cfg.api_key else None
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.retries = max(1, retries)
        self.health_ttl = health_ttl
        self.failure_ttl = failure_ttl
        self.backoff = backoff
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(
            base_url=self.base_url, timeout=timeout, headers=headers, transport=transport
        )
        self._health: tuple[float, dict[str, Any] | str] | None = None  # (when, body or error)
        self._health_lock = threading.Lock()

    # --- plumbing -------------------------------------------------------------

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request with retries; raises the last httpx error when all attempts fail."""
        retrying = Retrying(
            stop=stop_after_attempt(self.retries),
            wait=wait_exponential(multiplier=self.backoff, max=2.0),
            retry=retry_if_exception(_is_retryable),
            reraise=True,
        )
        for attempt in retrying:
            with attempt:
                response = self._http.request(method, path, **kwargs)
                response.raise_for_status()
        return response

    def health_check(self, *, refresh: bool = False) -> dict[str, Any]:
        """``GET /health``, cached (answers ``health_ttl`` s, failures ``failure_ttl`` s).

        Raises on failure, including a remembered one.
        """
        with self._health_lock:
            cached = self._health
        if cached and not refresh:
            age, value = time.monotonic() - cached[0], cached[1]
            if isinstance(value, dict) and age < self.health_ttl:
                return value
            if isinstance(value, str) and age < self.failure_ttl:
                raise ConnectionError(f"health check failed {age:.1f} s ago: {value}")
        try:
            body = self._request("GET", "/health").json()
            if not isinstance(body, dict):
                raise ValueError("health answer is not a JSON object")
        except Exception as exc:
            with self._health_lock:
                self._health = (time.monotonic(), _why(exc))
            raise
        with self._health_lock:
            self._health = (time.monotonic(), body)
        return body

    # --- reranking ------------------------------------------------------------

    def rerank(
        self, query: str, documents: Sequence[Mapping[str, Any]], top_k: int | None = None
    ) -> list[dict[str, Any]]:
        """Rerank with the server's cross-encoder; on any failure return ``documents`` as given.

        Returned documents are copies of the originals with all their fields,
        plus ``score``/``rerank_score`` (the cross-encoder score) and
        ``original_rank`` (1-based input position), in reranked order.
        """
        originals: list[Any] = list(documents)
        if not originals:
            return originals
        try:
            health = self.health_check()
        except Exception as exc:
            log.warning("rerank skipped: ragline at %s unreachable (%s)", self.base_url, _why(exc))
            return originals
        if not health.get("cross_encoder"):
            log.warning("rerank skipped: ragline at %s has no cross-encoder loaded", self.base_url)
            return originals
        payload: dict[str, Any] = {
            "query": query,
            "documents": [
                {"id": _doc_id(doc, i), "text": _doc_text(doc)} for i, doc in enumerate(originals)
            ],
        }
        if top_k is not None:
            payload["top_k"] = top_k
        try:
            body = self._request("POST", "/rerank", json=payload).json()
            return [_merge(originals, item) for item in body["reranked"]]
        except Exception as exc:
            log.warning("rerank failed at %s, keeping original order: %s", self.base_url, _why(exc))
            return originals

    # --- provider surface -----------------------------------------------------

    @classmethod
    def connection_schema(cls) -> dict[str, Any]:
        return RaglineClientConfig.model_json_schema()

    def capabilities(self) -> list[str]:
        return list(self.CAPABILITIES)

    def health(self) -> Health:
        try:
            body = self.health_check(refresh=True)
        except Exception as exc:
            return Health.now("down", error=_why(exc))
        details = {"url": self.base_url, "cross_encoder": body.get("cross_encoder")}
        return Health.now("ok" if body.get("cross_encoder") else "degraded", details=details)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> RaglineClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _doc_id(doc: Mapping[str, Any], index: int) -> str | int:
    """The document's id, or ``doc-<index>`` so the server always gets one (spec 000)."""
    value = doc.get("id")
    return value if isinstance(value, str | int) and value != "" else f"doc-{index}"


def _doc_text(doc: Mapping[str, Any]) -> str:
    for key in ("text", "content", "document", "pageContent"):
        if isinstance(doc.get(key), str):
            return str(doc[key])
    return ""


def _merge(originals: list[Any], item: Mapping[str, Any]) -> dict[str, Any]:
    """Put the server's score onto the original document, found by its input position."""
    rank = int(item["original_rank"])
    if not 1 <= rank <= len(originals):
        raise ValueError(f"server returned original_rank {rank} for {len(originals)} documents")
    score = float(item["score"])
    return {**originals[rank - 1], "score": score, "rerank_score": score, "original_rank": rank}


def _why(exc: BaseException) -> str:
    """A one-line reason for logs; includes the server's message for HTTP errors."""
    if isinstance(exc, httpx.HTTPStatusError):
        detail = exc.response.text[:300]
        return f"HTTP {exc.response.status_code}: {detail}"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
