"""The ``Ragline`` facade's answer block (issue 11): chat, conversations, checklists and
spec 003's library API.

Part of the facade, kept in its own module so the facade stays readable: ``Ragline``
inherits it, routes and library users call these methods on a ``Ragline``. Nothing
here touches the store or the catalog's tables directly; it wires services.

Library example (executed by ``tests/answers/test_readme_example.py``)::

    rl = Ragline(Settings(data_dir=..., llm_base_url=..., llm_model=...))
    rl.collections.create("runbooks")
    rl.store_batch("runbooks", [{"text": "...", "metadata": {"tags": ["cpu"]}}])
    checklist = rl.process({"title": "High CPU", "labels": {"component": "cpu"}},
                           collection="runbooks")
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ragline.catalog.conversations import ConversationTable
from ragline.core.filters import Limits, parse_where
from ragline.errors import InvalidInput, LLMNotConfigured
from ragline.providers.llms.base import ChatModel
from ragline.providers.registry import registry
from ragline.services.chat import ChatConfig, ChatRequest, ChatService, PreparedTurn
from ragline.services.checklists import (
    Checklist,
    ChecklistService,
    EnrichedContext,
    checklist_json,
    context_query,
)
from ragline.services.checklists import format_prompt as _format_prompt
from ragline.services.documents import DocumentInput
from ragline.services.rag_context import Hit
from ragline.services.retrieval import Mode, SearchQuery
from ragline.services.search_retriever import SearchRetriever
from ragline.services.tools.base import Tool

if TYPE_CHECKING:
    from ragline.catalog.sqlite import Catalog
    from ragline.services.collections import CollectionService
    from ragline.services.documents import DocumentService
    from ragline.services.embedders import EmbedderPool
    from ragline.services.retrieval import RetrievalService
    from ragline.settings import Settings

log = logging.getLogger(__name__)

LLM_SETTINGS_HELP = ("No chat model is configured: set RAGLINE_LLM_BASE_URL and "
                     "RAGLINE_LLM_MODEL (and RAGLINE_LLM_API_KEY if the server needs one)")


def load_tools() -> dict[str, Tool]:
    """Every tool registered under the ``ragline.tools`` entry points, by name."""
    tools: dict[str, Tool] = {}
    for name in registry.names("tools"):
        cls = registry.get("tools", name)
        tools[getattr(cls, "name", name)] = cls()
    return tools


class AnswersAPI:
    settings: Settings
    catalog: Catalog
    collections: CollectionService
    documents: DocumentService
    embedders: EmbedderPool
    retrieval: RetrievalService

    @property
    def tenant(self) -> str:  # overridden by Ragline
        raise NotImplementedError

    # -- wiring -----------------------------------------------------------------------
    def _init_answers(self, llm: ChatModel | None = None) -> None:
        s = self.settings
        self._llm: ChatModel | None = llm
        self.conversations = ConversationTable(self.catalog)
        limits = Limits(s.filter_max_depth, s.filter_max_conditions, s.filter_max_in_values)
        self.retriever = SearchRetriever(self.retrieval, self.collections, self.embedders, limits)
        self._blocking_retriever = SearchRetriever(self.retrieval, self.collections,
                                                   self.embedders, limits, blocking=True)
        self._tools: dict[str, Tool] | None = None
        config = ChatConfig(
            assistant_name=s.assistant_name, relevance_threshold=s.rag_relevance_threshold,
            context_limit=s.chat_context_limit, num_candidates=s.chat_num_candidates,
            allow_private_urls=s.allow_private_urls, default_collection=s.default_collection,
            max_tokens=s.llm_max_tokens)
        self.chat_service = ChatService(self.llm, self.retriever, self.conversations,
                                        self.tools, self._collection_metadata, config)
        self.checklist_service = ChecklistService(
            self.llm, self.retriever, self._collection_metadata, s.assistant_name,
            s.checklist_top_k)
        self._library_checklists = ChecklistService(
            self.llm, self._blocking_retriever, self._collection_metadata, s.assistant_name,
            s.checklist_top_k)

    def _collection_metadata(self, name: str) -> Mapping[str, Any]:
        return self.collections.get(name).metadata

    def llm(self) -> ChatModel:
        """The configured chat model, built on first use; 503 naming the settings if none."""
        if self._llm is None:
            s = self.settings
            if not s.llm_base_url or not s.llm_model:
                raise LLMNotConfigured(LLM_SETTINGS_HELP)
            cls = registry.get("llms", s.llm_provider)
            self._llm = cls(cls.Config(
                base_url=s.llm_base_url, model=s.llm_model, api_key=s.llm_api_key,
                timeout=s.llm_timeout_s, max_retries=s.llm_max_retries,
                max_tokens=s.llm_max_tokens, json_mode=s.llm_json_mode))
        return self._llm

    def llm_configured(self) -> bool:
        return self._llm is not None or bool(self.settings.llm_base_url
                                             and self.settings.llm_model)

    def tools(self) -> dict[str, Tool]:
        if self._tools is None:
            self._tools = load_tools()
        return self._tools

    # -- chat and conversations (HTTP) ---------------------------------------------------
    async def chat_turn(self, tenant: str, message: str, *, conversation_id: str | None = None,
                        collection: str | None = None) -> PreparedTurn:
        """A prepared turn (retrieval, tool decision and tool done); stream it with
        ``events()`` or finish it with ``run()``."""
        return await self.chat_service.prepare(ChatRequest(tenant, message, conversation_id,
                                                           collection))

    async def chat(self, tenant: str, message: str, *, conversation_id: str | None = None,
                   collection: str | None = None) -> dict[str, Any]:
        turn = await self.chat_turn(tenant, message, conversation_id=conversation_id,
                                    collection=collection)
        return await turn.run()

    def get_conversation(self, tenant: str, conversation_id: str) -> dict[str, Any]:
        return self.conversations.get(tenant, conversation_id).as_dict()

    def delete_conversation(self, tenant: str, conversation_id: str) -> None:
        self.conversations.delete(tenant, conversation_id)

    async def checklist(self, tenant: str, context: Mapping[str, Any], *,
                        collection: str | None = None, top_k: int | None = None
                        ) -> dict[str, Any]:
        self.llm()  # 503 naming the settings comes before any other complaint
        ctx = EnrichedContext.model_validate(context)
        name = self._collection_or_default(collection)
        result = await self.checklist_service.process(tenant, name, ctx, top_k)
        return checklist_json(result)

    def _collection_or_default(self, collection: str | None) -> str:
        name = collection or self.settings.default_collection
        if not name:
            raise InvalidInput("No collection given and no default collection configured "
                               "(set RAGLINE_DEFAULT_COLLECTION or pass 'collection')")
        return name

    # -- library API (spec 003's services), synchronous ------------------------------
    def embed_text(self, text: str, *, collection: str | None = None) -> list[float]:
        """The query embedding of ``text`` with the collection's embedder."""
        return self.embed_texts([text], collection=collection)[0]

    def embed_texts(self, texts: list[str], *, collection: str | None = None,
                    input_type: str = "query") -> list[list[float]]:
        info = self.collections.get(self._collection_or_default(collection))
        if not self.embedders.known(info.embedding_provider):
            raise InvalidInput(f"Collection '{info.name}' has no embedding provider")
        assert info.embedding_provider is not None
        emb = self.embedders.get(info.embedding_provider, info.embedding_model)
        vecs = emb.embed(list(texts), "query" if input_type == "query" else "document")
        return np.asarray(vecs, dtype=np.float32).tolist()

    def embed_context(self, context: Mapping[str, Any], *,
                      collection: str | None = None) -> list[float]:
        """An alert (EnrichedContext) formatted as a query, embedded."""
        return self.embed_text(context_query(EnrichedContext.model_validate(context)),
                               collection=collection)

    def store_chunk(self, collection: str, chunk: Mapping[str, Any], *,
              tenant: str | None = None) -> str:
        return self.store_batch(collection, [chunk], tenant=tenant)[0]

    def store_batch(self, collection: str, chunks: list[Mapping[str, Any]], *,
                    tenant: str | None = None) -> list[str]:
        """All chunks or none (one validated store write)."""
        docs = [DocumentInput(str(c.get("text", "")), dict(c.get("metadata") or {}),
                              c.get("embedding"), c.get("id")) for c in chunks]
        return self.documents.add(collection, docs, tenant or self.tenant)

    def find_similar(self, embedding: list[float], k: int = 5, *,
                     collection: str | None = None, tenant: str | None = None
                     ) -> list[dict[str, Any]]:
        """Top ``k`` chunks by cosine similarity, each with its ``score``."""
        q = SearchQuery(collection=self._collection_or_default(collection),
                        tenant=tenant or self.tenant, embedding=[float(x) for x in embedding],
                        mode="dense", limit=k)
        return [{"id": h.id, "text": h.text, "metadata": h.metadata, "score": h.score}
                for h in self.retrieval.search_sync(q).hits]

    def search(self, collection: str, query: str, *, where: dict[str, Any] | None = None,
               limit: int = 10, mode: Mode | None = None, tenant: str | None = None,
               boost: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Plain search (hybrid by default) in the caller's tenant."""
        s = self.settings
        node = parse_where(where, Limits(s.filter_max_depth, s.filter_max_conditions,
                                         s.filter_max_in_values))
        q = SearchQuery(collection=collection, tenant=tenant or self.tenant, query=query,
                        where=node, limit=limit, mode=mode, boost=boost)
        return [{"id": h.id, "text": h.text, "metadata": h.metadata, "score": h.score}
                for h in self.retrieval.search_sync(q).hits]

    def retrieve(self, context: Mapping[str, Any], k: int = 5, *,
                 collection: str | None = None, tenant: str | None = None) -> list[Hit]:
        """Runbook chunks for an alert, with tag and shape boosts."""
        ctx = EnrichedContext.model_validate(context)
        return asyncio.run(self._library_checklists.retrieve(
            tenant or self.tenant, self._collection_or_default(collection), ctx, k))

    def format_prompt(self, context: Mapping[str, Any], chunks: list[Hit], *,
                      collection: str | None = None) -> str:
        ctx = EnrichedContext.model_validate(context)
        return _format_prompt(self._library_checklists.prompts(collection), ctx, chunks)

    def generate_checklist(self, context: Mapping[str, Any], chunks: list[Hit], *,
                           collection: str | None = None) -> Checklist:
        ctx = EnrichedContext.model_validate(context)
        return asyncio.run(self._library_checklists.generate(ctx, chunks, collection))

    def process(self, context: Mapping[str, Any], top_k: int = 5, *,
                collection: str | None = None, tenant: str | None = None) -> Checklist:
        """Spec 003 ``RagPipelineService.process``: retrieve ``top_k`` chunks, generate."""
        ctx = EnrichedContext.model_validate(context)
        return asyncio.run(self._library_checklists.process(
            tenant or self.tenant, self._collection_or_default(collection), ctx, top_k))
