"""``ragline-remote`` reranker: another ragline server's cross-encoder (spec 000's
"remote ragline" reranker provider).

Reranking is an optional improvement on results the caller already has, so
:meth:`RemoteRagline.rerank` degrades gracefully: when the server has no
cross-encoder, cannot be reached, times out or answers an error, it logs a
warning and returns the documents unchanged. It never raises, so a reranking
outage can never turn into a search outage.

Whether the server has a cross-encoder is learnt from ``GET /health`` (the
``cross_encoder`` field) and cached for ``health_ttl`` seconds so that each
rerank costs one request, not two. A failed health check is remembered for
``failure_ttl`` seconds, so while the server is down each query pays for one
failed connection every few seconds rather than one (with retries, or a full
timeout) per query, and a server that comes back is used again soon after.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from ragline.client import models
from ragline.errors import RaglineError, ServiceUnavailable
from ragline.providers.base import Health, ProviderConfig
from ragline.providers.remote.config import RemoteRaglineConfig, client_for, schema

log = logging.getLogger(__name__)


class RemoteRaglineReranker:
    """Reranks through ``POST /rerank`` of a ragline server."""

    name: ClassVar[str] = "ragline-remote"
    kind: ClassVar[str] = "reranker"
    Config: ClassVar[type[ProviderConfig]] = RemoteRaglineConfig
    CAPABILITIES: ClassVar[list[str]] = ["rerank"]

    def __init__(self, config: RemoteRaglineConfig) -> None:
        self.config = config
        self.base_url = config.base_url.rstrip("/")
        self.client = client_for(config)
        self._health: tuple[float, models.Health | str] | None = None  # (when, answer/why)
        self._health_lock = threading.Lock()

    def health_check(self, *, refresh: bool = False) -> models.Health:
        """``GET /health``, cached (answers ``health_ttl`` s, failures ``failure_ttl`` s).
        Raises ``ServiceUnavailable`` on failure, including a remembered one."""
        with self._health_lock:
            cached = self._health
        if cached and not refresh:
            age, value = time.monotonic() - cached[0], cached[1]
            if isinstance(value, models.Health) and age < self.config.health_ttl:
                return value
            if isinstance(value, str) and age < self.config.failure_ttl:
                raise ServiceUnavailable(f"health check failed {age:.1f} s ago: {value}")
        try:
            answer = self.client.health()
        except RaglineError as exc:
            with self._health_lock:
                self._health = (time.monotonic(), _why(exc))
            raise
        with self._health_lock:
            self._health = (time.monotonic(), answer)
        return answer

    def rerank(self, query: str, documents: Sequence[Mapping[str, Any]],
               top_k: int | None = None) -> list[dict[str, Any]]:
        """Rerank with the server's cross-encoder; on any failure return ``documents`` as given.

        Returned documents are copies of the originals with all their fields, plus
        ``score``/``rerank_score`` (the cross-encoder score) and ``original_rank``
        (1-based input position), in reranked order, cut to ``top_k`` by the server.
        """
        originals: list[Any] = list(documents)
        if not originals:
            return originals
        try:
            health = self.health_check()
        except RaglineError as exc:
            log.warning("rerank skipped: ragline at %s unreachable (%s)", self.base_url,
                        _why(exc))
            return originals
        if not health.cross_encoder:
            log.warning("rerank skipped: ragline at %s has no cross-encoder loaded",
                        self.base_url)
            return originals
        sent = [{"id": _doc_id(doc, i), "text": _doc_text(doc)}
                for i, doc in enumerate(originals)]
        try:
            ranked = self.client.rerank(query, sent, top_k)
            return [_merge(originals, item) for item in ranked]
        except (RaglineError, ValueError) as exc:
            why = _why(exc) if isinstance(exc, RaglineError) else str(exc)
            log.warning("rerank failed at %s, keeping original order: %s", self.base_url, why)
            return originals

    @classmethod
    def connection_schema(cls) -> dict[str, Any]:
        return schema()

    def capabilities(self) -> list[str]:
        return list(self.CAPABILITIES)

    def health(self) -> Health:
        t0 = time.perf_counter()
        try:
            answer = self.health_check(refresh=True)
        except RaglineError as exc:
            return Health.now("down", {"url": self.base_url}, error=_why(exc))
        details = {"url": self.base_url, "cross_encoder": answer.cross_encoder,
                   "latency_ms": round((time.perf_counter() - t0) * 1000, 2)}
        return Health.now("ok" if answer.cross_encoder else "degraded", details=details)

    def health_info(self) -> dict[str, str]:
        """What ``GET /health`` of the server using this reranker shows under
        ``cross_encoder``."""
        return {"model": f"ragline-remote:{self.base_url}", "status": "remote"}

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> RemoteRaglineReranker:
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


def _merge(originals: list[Any], item: models.Reranked) -> dict[str, Any]:
    """Put the server's score onto the original document, found by its input position."""
    rank = item.original_rank
    if not 1 <= rank <= len(originals):
        raise ValueError(f"server returned original_rank {rank} for {len(originals)} documents")
    return {**originals[rank - 1], "score": item.score, "rerank_score": item.score,
            "original_rank": rank}


def _why(exc: RaglineError) -> str:
    """One line for the log: the status the server answered (when it answered) and its
    message."""
    status = exc.details.get("status")
    return f"HTTP {status}: {exc.message}" if status else exc.message
