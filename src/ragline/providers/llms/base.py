"""What the answer services need from a chat model.

Messages are OpenAI-style ``{"role", "content"}`` dicts because every server we
target (OpenAI, Ollama, vLLM, llama.cpp, Gemini's compatible endpoint) speaks that
format. ``json_mode`` asks for a JSON object where the server supports it; callers
still parse tolerantly, because small models and some servers ignore the request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, ClassVar, Protocol, runtime_checkable

from ragline.providers.base import Health, ProviderConfig

Message = dict[str, str]


@runtime_checkable
class ChatModel(Protocol):
    name: ClassVar[str]
    kind: ClassVar[str]
    Config: ClassVar[type[ProviderConfig]]

    @property
    def model(self) -> str: ...

    async def complete(self, messages: list[Message], *, json_mode: bool = False,
                       max_tokens: int | None = None) -> str:
        """The whole answer text."""
        ...

    def stream(self, messages: list[Message], *, max_tokens: int | None = None,
               temperature: float | None = None,
               stop: list[str] | None = None) -> AsyncIterator[str]:
        """The answer as text deltas, in order. ``temperature`` and ``stop`` (a client's
        own, from ``/v1/chat/completions``) override the model's configured ones; callers
        pass them only when set, so a model written before they existed still streams."""
        ...

    @classmethod
    def connection_schema(cls) -> dict[str, Any]: ...

    def capabilities(self) -> list[str]: ...

    def health(self) -> Health: ...
