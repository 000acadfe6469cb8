"""The chat-model conformance suite against a real llama.cpp server (SmolLM2), through
the registry like the server builds it (``make test-llm``)."""

from __future__ import annotations

from typing import Any

import pytest

from ragline.providers.registry import registry
from ragline.testing.llama_server import MODEL_ALIAS
from ragline.testing.llm_conformance import LLMConformance
from ragline.testing.server import free_port


class TestOpenAICompatibleOnLlamaCpp(LLMConformance):
    @pytest.fixture
    def provider(self, llama_url: str) -> Any:
        return registry.build("llms", "openai", {"base_url": llama_url, "model": MODEL_ALIAS,
                                                 "max_tokens": 48})

    @pytest.fixture
    def broken(self) -> Any:
        return registry.build("llms", "openai", {"base_url": f"http://127.0.0.1:{free_port()}/v1",
                                                 "model": MODEL_ALIAS, "max_retries": 0})
