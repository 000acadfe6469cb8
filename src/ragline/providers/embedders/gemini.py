"""Gemini's native embedding API, with spec 001's task types.

Spec 001 embeds documents with ``taskType: "RETRIEVAL_DOCUMENT"`` and queries with
``taskType: "RETRIEVAL_QUERY"``; Gemini's OpenAI-compatible ``/embeddings`` has no
such field, so this provider speaks the native API:
``POST {base_url}/models/{model}:batchEmbedContents`` with ``x-goog-api-key`` and
``{"requests": [{"model", "content": {"parts": [{"text"}]}, "taskType"}]}``, answered
by ``{"embeddings": [{"values": [...]}]}``. Everything else (batching, the dimension
learnt from the first answer, retries of transient failures, the key kept out of
messages) is the OpenAI-compatible provider's, which this one extends.
"""

from __future__ import annotations

from typing import Any, ClassVar

import httpx2
import numpy as np
import numpy.typing as npt
from pydantic import Field, SecretStr

from ragline.errors import ProviderError
from ragline.providers.base import ProviderConfig, config_schema
from ragline.providers.embedders.base import InputType
from ragline.providers.embedders.openai_compat import (
    RETRY_STATUS,
    OpenAIEmbedder,
    OpenAIEmbedderConfig,
)
from ragline.providers.embedders.util import check_inputs, l2_normalise
from ragline.providers.response_cap import CappedTransport

TASK_TYPES: dict[str, str] = {"query": "RETRIEVAL_QUERY", "document": "RETRIEVAL_DOCUMENT"}
"""Spec 001's task type per input type."""


class GeminiEmbedderConfig(OpenAIEmbedderConfig):
    base_url: str = Field("https://generativelanguage.googleapis.com/v1beta",
                          description="Up to, not including, /models/...")
    model: str = "text-embedding-004"
    api_key: SecretStr | None = Field(None, description="Sent as x-goog-api-key.")
    batch_size: int = Field(100, ge=1, le=100, description="Texts per batchEmbedContents "
                            "call (the API takes at most 100).")
    max_input_tokens: int = Field(2048, ge=1)


class GeminiEmbedder(OpenAIEmbedder):
    name: ClassVar[str] = "gemini"
    Config: ClassVar[type[ProviderConfig]] = GeminiEmbedderConfig

    def __init__(self, config: GeminiEmbedderConfig | None = None, *,
                 transport: httpx2.BaseTransport | None = None, **overrides: Any) -> None:
        config = config or GeminiEmbedderConfig(**overrides)
        super().__init__(config)
        self._key = config.api_key  # never the OpenAI key of the environment
        self._http = httpx2.Client(  # every answer read through the byte cap
            timeout=config.timeout, trust_env=False,
            transport=CappedTransport(f"Embedding endpoint {self._base}",
                                      config.response_cap(), transport))

    def close(self) -> None:
        self._http.close()
        super().close()

    @property
    def connection_id(self) -> str:
        return "gemini:" + super().connection_id.split(":", 1)[1]

    def embed(self, texts: list[str], input_type: InputType = "document"
              ) -> npt.NDArray[np.float32]:
        check_inputs(texts, input_type)
        task = TASK_TYPES["query" if input_type == "query" else "document"]
        prefix = self.config.query_prefix if input_type == "query" else self.config.document_prefix
        bs = self.config.batch_size
        rows = [self._embed_task([prefix + t for t in texts[i:i + bs]], task)
                for i in range(0, len(texts), bs)]
        if not rows:
            return np.zeros((0, self._dimension or 0), dtype=np.float32)
        return np.vstack(rows)

    def _embed_batch(self, texts: list[str], retries: int | None = None
                     ) -> npt.NDArray[np.float32]:
        return self._embed_task(texts, TASK_TYPES["query"], retries)  # health, probes

    def _embed_task(self, texts: list[str], task: str, retries: int | None = None
                    ) -> npt.NDArray[np.float32]:
        model = self.model if self.model.startswith("models/") else f"models/{self.model}"
        body: dict[str, list[dict[str, Any]]] = {"requests": [
            {"model": model, "content": {"parts": [{"text": t}]}, "taskType": task}
            for t in texts]}
        if self.config.send_dimensions and self.config.dimension:
            for r in body["requests"]:
                r["outputDimensionality"] = self.config.dimension
        payload = self.retrier.call(lambda: self._send(f"/{model}:batchEmbedContents", body),
                                    retries)
        try:
            vecs = np.asarray([e["values"] for e in payload["embeddings"]], dtype=np.float32)
        except (KeyError, TypeError, ValueError) as exc:
            raise ProviderError(f"Malformed embeddings response from {self._base}: "
                                f"{type(exc).__name__}") from None
        if vecs.ndim != 2 or vecs.shape[0] != len(texts):
            raise ProviderError(f"Embedding endpoint returned {len(vecs)} vectors for "
                                f"{len(texts)} inputs")
        if self._dimension is None:
            self._dimension = int(vecs.shape[1])
        elif vecs.shape[1] != self._dimension:
            raise ProviderError(f"Embedding dimension {vecs.shape[1]} from {self.model}, "
                                f"expected {self._dimension}")
        return l2_normalise(vecs)

    def _send(self, path: str, body: dict[str, Any]) -> Any:
        headers = {"x-goog-api-key": self._key.get_secret_value()} if self._key else {}
        resp = self._http.post(self._base + path, json=body, headers=headers)
        if resp.status_code in RETRY_STATUS:  # a transport-level failure for the retrier
            raise httpx2.RemoteProtocolError(f"HTTP {resp.status_code}")
        if resp.status_code >= 400:
            raise ProviderError(f"Embedding request to {self._base} failed (HTTP "
                                f"{resp.status_code}: {self._scrub(resp.text[:300])})",
                                details={"status": resp.status_code, "transient": False})
        try:
            return resp.json()
        except ValueError:
            raise ProviderError(f"Non-JSON answer from {self._base}{path}") from None

    @classmethod
    def connection_schema(cls) -> dict[str, Any]:
        return config_schema(GeminiEmbedderConfig)
