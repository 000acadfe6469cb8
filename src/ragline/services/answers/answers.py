"""Wiring of the answer services (issue 11): the chat model slot, the tools, chat and
checklists over the one search pipeline. Built by ``Ragline.start()`` and kept on
``Services``; the answers door (``ragline.doors.answers``) calls them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ragline.catalog.tables import ConversationRows
from ragline.errors import LLMNotConfigured, RaglineError
from ragline.providers.llms.base import ChatModel
from ragline.providers.registry import registry
from ragline.services.answers.chat import ChatConfig, ChatService
from ragline.services.answers.checklists import ChecklistService
from ragline.services.connections.connections import ConnectionService
from ragline.services.corpus.collections import CollectionService
from ragline.services.corpus.embedders import EmbedderPool
from ragline.services.search.search_retriever import SearchRetriever
from ragline.services.search.searching import SearchService
from ragline.services.tools.base import Tool
from ragline.settings import Settings

log = logging.getLogger(__name__)

LLM_SETTINGS_HELP = ("No chat model is configured: set RAGLINE_LLM_BASE_URL and "
                     "RAGLINE_LLM_MODEL (and RAGLINE_LLM_API_KEY if the server needs one)")


def load_tools() -> dict[str, Tool]:
    """Every tool registered under the ``ragline.tools`` entry points, by name; a tool
    with a ``Config`` (web search) needs a connection and is built from one instead."""
    tools: dict[str, Tool] = {}
    for name in registry.names("tools"):
        cls = registry.get("tools", name)
        if getattr(cls, "Config", None) is not None:
            continue
        tools[getattr(cls, "name", name)] = cls()
    return tools


class ChatModelSlot:
    """The configured chat model, built on first use (so a server without one starts and
    serves everything else); ``LLMNotConfigured`` (503) naming the settings if none.

    ``override`` is a model object handed to ``Ragline(..., llm=...)`` by library users and
    tests (the scripted model); configuration alone can only name registered providers."""

    def __init__(self, settings: Settings, override: ChatModel | None = None) -> None:
        self.settings = settings
        self._model = override

    def __call__(self) -> ChatModel:
        if self._model is None:
            s = self.settings
            if not s.llm_base_url or not s.llm_model:
                raise LLMNotConfigured(LLM_SETTINGS_HELP)
            # the one way providers are built: registry class + its own validated config
            config: dict[str, Any] = {
                "base_url": s.llm_base_url, "model": s.llm_model, "api_key": s.llm_api_key,
                "timeout": s.llm_timeout_s, "max_retries": s.llm_max_retries,
                "max_tokens": s.llm_max_tokens, "json_mode": s.llm_json_mode}
            if s.llm_max_response_bytes is not None:  # else the provider's own default
                config["max_response_bytes"] = s.llm_max_response_bytes
            self._model = registry.build("llms", s.llm_provider, config)
        return self._model

    @property
    def configured(self) -> bool:
        return self._model is not None or bool(self.settings.llm_base_url
                                               and self.settings.llm_model)


class ToolBox:
    """The registered tools, loaded on first use, plus those an admin configured as
    connections of kind ``tools`` (``search_engine``), looked up on every turn so a
    connection added or deleted over the API counts from the next turn on."""

    def __init__(self, connections: ConnectionService | None = None) -> None:
        self._tools: dict[str, Tool] | None = None
        self.connections = connections

    def __call__(self) -> dict[str, Tool]:
        if self._tools is None:
            self._tools = load_tools()
        tools = dict(self._tools)
        if self.connections is not None:
            for conn in self.connections.all():
                if conn.kind != "tools":
                    continue
                try:
                    tool = self.connections.instance(conn.id)
                except RaglineError as exc:
                    log.warning("tool connection %s unusable: %s", conn.id, exc.message)
                    continue
                tools[tool.name] = tool
        return tools


@dataclass
class AnswerServices:
    llm: ChatModelSlot
    tools: ToolBox
    conversations: ConversationRows
    retriever: SearchRetriever
    chat: ChatService
    checklists: ChecklistService


def build_answers(settings: Settings, conversations: ConversationRows,
                  collections: CollectionService,
                  embedders: EmbedderPool, search: SearchService,
                  llm: ChatModel | None = None,
                  connections: ConnectionService | None = None) -> AnswerServices:
    s = settings

    def collection_metadata(name: str) -> Mapping[str, Any]:
        return collections.get(name).metadata

    slot = ChatModelSlot(s, llm)
    tools = ToolBox(connections)
    retriever = SearchRetriever(search, collections, embedders)
    config = ChatConfig(
        assistant_name=s.assistant_name, relevance_threshold=s.rag_relevance_threshold,
        context_limit=s.chat_context_limit, num_candidates=s.chat_num_candidates,
        allow_private_urls=s.allow_private_urls, default_collection=s.default_collection,
        max_tokens=s.llm_max_tokens, prompt_profile=s.prompt_profile)
    return AnswerServices(
        llm=slot, tools=tools, conversations=conversations, retriever=retriever,
        chat=ChatService(slot, retriever, conversations, tools, collection_metadata, config),
        checklists=ChecklistService(slot, retriever, collection_metadata, s.assistant_name,
                                    s.checklist_top_k))
