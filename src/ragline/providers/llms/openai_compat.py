"""Any OpenAI-compatible ``/chat/completions`` server, through the official ``openai`` SDK.

One client serves OpenAI, Ollama, vLLM, llama.cpp's server and Gemini's
compatible endpoint: only ``base_url``, ``model`` and the key differ. The SDK's
own retries are off (``max_retries=0``): retries happen once, in
:mod:`ragline.providers.retry`, which retries only transient failures and honours
``Retry-After``. SDK errors become :class:`ProviderError` here, with the key
scrubbed from every message.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import httpx2
import openai
from pydantic import Field, SecretStr

from ragline.errors import ProviderError
from ragline.providers.base import Health, ProviderConfig, config_schema
from ragline.providers.llms.base import Message
from ragline.providers.response_cap import AsyncCappedTransport, CappedTransport
from ragline.providers.retry import Retrier, RetryPolicy

log = logging.getLogger(__name__)


class OpenAIChatConfig(ProviderConfig):
    base_url: str = Field(..., description="Up to, not including, /chat/completions "
                          "(e.g. http://localhost:11434/v1 for Ollama).")
    model: str = Field(..., description="Model name the server knows.")
    api_key: SecretStr | None = Field(None, description="Bearer key; local servers need none.")
    timeout: float = Field(120.0, gt=0, description="Seconds per request (whole answer).")
    connect_timeout: float = Field(5.0, gt=0)
    max_retries: int = Field(3, ge=0, description="Retries of transient failures only.")
    backoff_base: float = Field(0.5, ge=0)
    backoff_max: float = Field(30.0, ge=0)
    temperature: float = Field(0.0, ge=0, le=2)
    max_tokens: int = Field(512, ge=1, description="Default answer length cap.")
    json_mode: bool = Field(True, description="Send response_format=json_object for JSON "
                            "calls (turn off for servers that reject it).")
    max_response_bytes: int = Field(
        16 * 1024 * 1024, ge=1024, description="Largest answer read, in bytes (a whole "
        "streamed answer counted together); past it the call fails (502).")


class OpenAIChatModel:
    """Async client; safe to share between concurrent requests."""

    name: ClassVar[str] = "openai"
    kind: ClassVar[str] = "llm"
    Config: ClassVar[type[ProviderConfig]] = OpenAIChatConfig
    CAPABILITIES: ClassVar[list[str]] = ["chat", "stream", "json_mode", "remote"]

    def __init__(self, config: OpenAIChatConfig | None = None, **overrides: Any) -> None:
        self.config = config or OpenAIChatConfig(**overrides)
        c = self.config
        key = c.api_key.get_secret_value() if c.api_key else ""
        self._secret = key
        self._client = openai.AsyncOpenAI(
            base_url=c.base_url, api_key=key or "none", max_retries=0,
            timeout=httpx2.Timeout(c.timeout, connect=c.connect_timeout),
            http_client=openai.DefaultAsyncHttpxClient(  # answers read through the byte cap
                transport=AsyncCappedTransport(f"Chat endpoint {c.base_url}",
                                               c.max_response_bytes), trust_env=False),
        )
        self.retrier = Retrier(RetryPolicy(c.max_retries, c.backoff_base, c.backoff_max),
                               f"Chat request to {c.base_url}", scrub=self._scrub)

    def __repr__(self) -> str:
        return f"OpenAIChatModel(base_url={self.config.base_url!r}, model={self.model!r})"

    @property
    def model(self) -> str:
        return self.config.model

    def _scrub(self, text: str) -> str:
        return text.replace(self._secret, "***") if self._secret else text

    def _body(self, messages: list[Message], max_tokens: int | None) -> dict[str, Any]:
        return {"model": self.model, "messages": messages,
                "temperature": self.config.temperature,
                "max_tokens": max_tokens or self.config.max_tokens}

    async def complete(self, messages: list[Message], *, json_mode: bool = False,
                       max_tokens: int | None = None) -> str:
        body = self._body(messages, max_tokens)
        if json_mode and self.config.json_mode:
            body["response_format"] = {"type": "json_object"}
        resp = await self.retrier.acall(lambda: self._client.chat.completions.create(**body))
        try:
            return resp.choices[0].message.content or ""
        except (AttributeError, IndexError, TypeError):
            raise ProviderError(f"Malformed chat answer from {self.config.base_url}") from None

    async def stream(self, messages: list[Message], *, max_tokens: int | None = None,
                     temperature: float | None = None,
                     stop: list[str] | None = None) -> AsyncIterator[str]:
        body = self._body(messages, max_tokens)
        if temperature is not None:
            body["temperature"] = temperature
        if stop:
            body["stop"] = stop
        # Only opening the stream is retried: once tokens flowed, a retry would repeat them.
        chunks = await self.retrier.acall(
            lambda: self._client.chat.completions.create(stream=True, **body))
        try:
            async for chunk in chunks:
                if not chunk.choices:
                    continue
                delta = chunk.choices[0].delta.content
                if delta:
                    yield delta
        except (openai.APIError, httpx2.HTTPError) as exc:
            raise ProviderError(
                self._scrub(f"Chat stream from {self.config.base_url} broke: "
                            f"{type(exc).__name__}"), details={"transient": True}) from None

    async def aclose(self) -> None:
        await self._client.close()

    @classmethod
    def connection_schema(cls) -> dict[str, Any]:
        return config_schema(OpenAIChatConfig)

    def capabilities(self) -> list[str]:
        return list(self.CAPABILITIES)

    def health(self) -> Health:
        """``GET {base_url}/models`` (free on hosted APIs, unlike a completion): is the
        server reachable, does it accept the key, does it list the model?"""
        details: dict[str, Any] = {"base_url": self.config.base_url, "model": self.model}
        headers = {"Authorization": f"Bearer {self._secret}"} if self._secret else {}
        capped = CappedTransport(f"Chat endpoint {self.config.base_url}",
                                 self.config.max_response_bytes)
        try:
            with httpx2.Client(transport=capped, trust_env=False) as client:
                resp = client.get(self.config.base_url.rstrip("/") + "/models",
                                  headers=headers,
                                  timeout=httpx2.Timeout(10.0, connect=self.config.connect_timeout))
        except httpx2.HTTPError as exc:
            return Health.now("down", details, error=f"unreachable ({type(exc).__name__})")
        except ProviderError as exc:  # an answer over max_response_bytes
            return Health.now("down", details, error=self._scrub(exc.message))
        if resp.status_code in (401, 403):
            return Health.now("down", details, error=f"the API key was refused "
                                                     f"({resp.status_code})")
        if resp.status_code != 200:  # some servers have no /models: reachable is all we know
            return Health.now("degraded", details,
                              error=f"GET /models answered {resp.status_code}")
        try:
            listed = [m.get("id") for m in resp.json().get("data", [])]
        except (ValueError, AttributeError):
            listed = []
        details["model_listed"] = self.model in listed
        return Health.now("ok", details)
