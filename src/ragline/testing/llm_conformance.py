"""Conformance suite every chat-model (LLM) provider runs (see :mod:`provider_conformance`).

What the answer services rely on: ``complete`` returns the whole text,
``json_mode`` returns something that parses as a JSON object, ``stream`` yields
text deltas whose concatenation is the answer.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from ragline.testing.provider_conformance import ProviderContract

MESSAGES = [{"role": "system", "content": "You answer briefly."},
            {"role": "user", "content": "Say hello to the robots."}]


class LLMConformance(ProviderContract):
    KIND: ClassVar[str] = "llms"

    def test_identity(self, provider: Any) -> None:
        assert isinstance(provider.model, str) and provider.model

    async def test_complete_returns_text(self, provider: Any) -> None:
        text = await provider.complete(MESSAGES, max_tokens=32)
        assert isinstance(text, str) and text.strip()

    async def test_json_mode_returns_a_json_object(self, provider: Any) -> None:
        messages = [{"role": "system", "content": 'Reply with a JSON object {"answer": ...}.'},
                    MESSAGES[1]]
        text = await provider.complete(messages, json_mode=True, max_tokens=64)
        start, end = text.find("{"), text.rfind("}")
        assert start >= 0 and end > start, text
        assert isinstance(json.loads(text[start:end + 1]), dict)

    async def test_stream_yields_text_deltas(self, provider: Any) -> None:
        deltas = [d async for d in provider.stream(MESSAGES, max_tokens=32)]
        assert deltas and all(isinstance(d, str) for d in deltas)
        assert "".join(deltas).strip()

    def check_health_details(self, provider: Any, details: dict[str, Any]) -> None:
        assert details["model"] == provider.model
