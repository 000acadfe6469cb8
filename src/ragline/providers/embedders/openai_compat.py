"""Any OpenAI-compatible ``/embeddings`` endpoint (OpenAI, Ollama, vLLM, Gemini, TEI...).

Why one provider for all of them: they speak the same wire format
(``POST {base_url}/embeddings`` with ``{"model", "input": [...]}`` answering
``{"data": [{"index", "embedding"}]}``). Transient failures (429, 5xx, connection
errors, timeouts) are retried with exponential backoff, honouring ``Retry-After``, by
the shared :mod:`ragline.providers.retry` layer over the official ``openai`` SDK client;
anything else fails at once as :class:`ProviderError` (HTTP 502 to our callers).
The API key is a ``SecretStr``: never logged, never in a repr or an error.
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
import time
from typing import Any, ClassVar

import httpx2
import numpy as np
import numpy.typing as npt
import openai
from pydantic import Field, SecretStr

from ragline.errors import ProviderError
from ragline.providers.base import Health, ProviderConfig, config_schema
from ragline.providers.embedders.base import InputType
from ragline.providers.embedders.util import check_inputs, l2_normalise
from ragline.providers.response_cap import CappedTransport
from ragline.providers.retry import RETRY_STATUS, Retrier, RetryPolicy, retry_after_seconds
from ragline.settings import openai_api_key_from_env

__all__ = ["RETRY_STATUS", "OpenAIEmbedder", "OpenAIEmbedderConfig", "retry_after_seconds"]

log = logging.getLogger(__name__)



class OpenAIEmbedderConfig(ProviderConfig):
    base_url: str = Field(
        "https://api.openai.com/v1", description="Up to, not including, /embeddings."
    )
    model: str = "text-embedding-3-small"
    api_key: SecretStr | None = Field(
        None, description="Default: env RAGLINE_OPENAI_API_KEY, then OPENAI_API_KEY."
    )
    dimension: int | None = Field(None, ge=1, description="Learnt from the first call if unset.")
    send_dimensions: bool = Field(False, description="Send 'dimensions' (text-embedding-3 only).")
    timeout: float = Field(30.0, gt=0)
    max_retries: int = Field(5, ge=0)
    backoff_base: float = Field(0.5, ge=0, description="Seconds; doubled per retry.")
    backoff_max: float = Field(30.0, ge=0, description="Cap on one wait, Retry-After included.")
    batch_size: int = Field(128, ge=1, le=2048)
    max_input_tokens: int = Field(8191, ge=1)
    query_prefix: str = Field("", description="E.g. 'search_query: ' for nomic-embed-text.")
    document_prefix: str = ""
    max_response_bytes: int | None = Field(
        None, ge=1024, description="Largest answer read, in bytes; past it the call fails "
        "(502) with nothing more read. Default: 1 MiB + 128 KiB per text of a batch "
        "(batch_size), room for 4,096-d vectors written as JSON.")

    def response_cap(self) -> int:
        """:attr:`max_response_bytes`, or the default it documents."""
        return self.max_response_bytes or (1 << 20) + self.batch_size * (128 << 10)


class OpenAIEmbedder:
    """Sync httpx client (thread-safe, pooled); one instance per endpoint."""

    name: ClassVar[str] = "openai"
    kind: ClassVar[str] = "embedder"
    Config: ClassVar[type[ProviderConfig]] = OpenAIEmbedderConfig
    CAPABILITIES: ClassVar[list[str]] = ["embeddings", "remote"]

    def __init__(
        self,
        config: OpenAIEmbedderConfig | None = None,
        *,
        transport: httpx2.BaseTransport | None = None,
        **overrides: Any,
    ) -> None:
        self.config = config or OpenAIEmbedderConfig(**overrides)
        key = self.config.api_key
        if key is None:
            env = openai_api_key_from_env()
            key = SecretStr(env) if env else None
        self._key = key
        self._base = self.config.base_url.rstrip("/")
        # The official SDK sends the requests (same client as the chat provider); its own
        # retries are off: ragline.providers.retry retries transient failures only.
        # ``transport`` (tests) is an httpx transport of the SDK's HTTP library. Every
        # answer is read through the byte cap (providers/response_cap.py).
        capped = CappedTransport(f"Embedding endpoint {self._base}",
                                 self.config.response_cap(), transport)
        self._sdk = openai.OpenAI(
            # No key (local servers): a placeholder, which they ignore; the SDK needs one.
            base_url=self._base, api_key=(key.get_secret_value() if key else "") or "none",
            max_retries=0, timeout=self.config.timeout,
            http_client=openai.DefaultHttpxClient(transport=capped, trust_env=False))
        self.retrier = Retrier(
            RetryPolicy(self.config.max_retries, self.config.backoff_base,
                        self.config.backoff_max),
            f"Embedding request to {self._base}/embeddings", scrub=self._scrub)
        self.retrier.sleep = lambda wait: self.sleep(wait)
        self._dimension = self.config.dimension
        self._dim_lock = threading.Lock()
        self.sleep = time.sleep  # replaceable in tests

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(base_url={self._base!r}, model={self.model!r})"

    def close(self) -> None:
        self._sdk.close()

    # -- protocol --------------------------------------------------------------
    @property
    def model(self) -> str:
        return self.config.model

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            with self._dim_lock:
                if self._dimension is None:
                    self.embed(["dimension probe"], "query")
        assert self._dimension is not None
        return self._dimension

    @property
    def max_input_tokens(self) -> int:
        return self.config.max_input_tokens

    @property
    def connection_id(self) -> str:
        """Endpoint plus a one-way digest of the key: same endpoint, other account, other id."""
        secret = self._key.get_secret_value() if self._key else ""
        digest = hashlib.sha256(f"{self._base}\n{secret}".encode()).hexdigest()[:16]
        return f"openai:{digest}"

    def count_tokens(self, text: str) -> int:
        """An estimate (no tokenizer for an arbitrary remote model): ~4 bytes a token.

        Rounded up so chunk budgets err on the short side.
        """
        return max(1, math.ceil(len(text.encode("utf-8")) / 4))

    def embed(
        self, texts: list[str], input_type: InputType = "document"
    ) -> npt.NDArray[np.float32]:
        check_inputs(texts, input_type)
        prefix = self.config.query_prefix if input_type == "query" else self.config.document_prefix
        rows: list[npt.NDArray[np.float32]] = []
        bs = self.config.batch_size
        for start in range(0, len(texts), bs):
            rows.append(self._embed_batch([prefix + t for t in texts[start : start + bs]]))
        if not rows:
            return np.zeros((0, self._dimension or 0), dtype=np.float32)
        return np.vstack(rows)

    # -- wire --------------------------------------------------------------------
    def _embed_batch(
        self, texts: list[str], retries: int | None = None
    ) -> npt.NDArray[np.float32]:
        body: dict[str, Any] = {"model": self.model, "input": texts}
        if self.config.send_dimensions and self.config.dimension:
            body["dimensions"] = self.config.dimension
        payload = self._post("/embeddings", body, retries)
        try:
            data = sorted(payload["data"], key=lambda d: int(d["index"]))
            vecs = np.asarray([d["embedding"] for d in data], dtype=np.float32)
        except (KeyError, TypeError, ValueError) as exc:
            raise ProviderError(f"Malformed embeddings response from {self._base}: {exc}") from None
        if vecs.ndim != 2 or vecs.shape[0] != len(texts):
            raise ProviderError(
                f"Embedding endpoint returned {vecs.shape[0] if vecs.ndim else 0} vectors "
                f"for {len(texts)} inputs"
            )
        if self._dimension is None:
            self._dimension = int(vecs.shape[1])
        elif vecs.shape[1] != self._dimension:
            raise ProviderError(
                f"Embedding dimension {vecs.shape[1]} from {self.model}, expected {self._dimension}"
            )
        return l2_normalise(vecs)

    def _scrub(self, text: str) -> str:
        """Error bodies sometimes echo the key; never let it into a message or log."""
        secret = self._key.get_secret_value() if self._key else ""
        return text.replace(secret, "***") if secret else text

    def _post(self, path: str, body: dict[str, Any], retries: int | None = None) -> Any:
        url = self._base + path
        resp: httpx2.Response = self.retrier.call(
            lambda: self._sdk.post(path, body=body, cast_to=httpx2.Response), retries)
        try:
            return resp.json()
        except ValueError:
            raise ProviderError(f"Non-JSON answer from {url}") from None

    @classmethod
    def connection_schema(cls) -> dict[str, Any]:
        return config_schema(OpenAIEmbedderConfig)

    def capabilities(self) -> list[str]:
        return list(self.CAPABILITIES)

    def health(self) -> Health:
        """One tiny embedding call, no retries: is the endpoint usable right now?"""
        details: dict[str, Any] = {"base_url": self._base, "model": self.model}
        try:
            self._embed_batch(["health check"], retries=0)
            details["dimension"] = self._dimension
            return Health.now("ok", details)
        except Exception as exc:
            return Health.now("down", details, error=self._scrub(str(exc)))
