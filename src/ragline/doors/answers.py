"""The answers door (``rl.answers``, issue 11): chat, conversations, the
OpenAI-compatible ``/v1`` turn, checklists, and the steps spec 003's library API is
made of (``ragline.library`` adapts them to spec 003's names).

The services are built by ``ragline.wiring`` (``services/answers/answers.py``); nothing here
touches the store or the catalog. Every use case takes the calling
:class:`~ragline.core.principal.Principal` first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ragline.core.principal import Principal
from ragline.doors.base import Door
from ragline.doors.collections import CollectionsDoor
from ragline.errors import CollectionNotFound, InvalidInput, ModelNotFound
from ragline.services.answers.chat import (
    MAX_MESSAGE_CHARS,
    AnswerOptions,
    ChatRequest,
    PreparedTurn,
)
from ragline.services.answers.checklists import (
    Checklist,
    EnrichedContext,
    checklist_json,
    context_query,
)
from ragline.services.answers.checklists import format_prompt as _format_prompt
from ragline.services.search.rag_context import Hit
from ragline.services.search.search_retriever import ScopedRetriever
from ragline.settings import Settings
from ragline.wiring import Services, SyncBridge

__all__ = ["COMPLETION_MODEL_PREFIX", "GENERAL_MODEL", "AnswerOptions", "AnswersDoor"]

GENERAL_MODEL = "ragline"
"""``/v1``'s model without a knowledge base: spec 001's general (or tool) path."""
COMPLETION_MODEL_PREFIX = "ragline/"
"""``/v1``'s model ids of collections: ``ragline/<collection>``."""


class AnswersDoor(Door):
    def __init__(self, services: Services, settings: Settings, bridge: SyncBridge,
                 collections: CollectionsDoor) -> None:
        super().__init__(services, settings)
        self._bridge = bridge
        self._collections = collections
        self._answers = services.answers

    def _name(self, caller: Principal, collection: str | None) -> str:
        """The one default-collection rule, then the caller's access check."""
        name = self._existing(collection)
        self._access.collection(caller, name)
        return name

    def _scoped(self, caller: Principal) -> ScopedRetriever:
        return ScopedRetriever(self._answers.retriever,
                               lambda name: self._access.collection(caller, name),
                               self._access.read_scope(caller))

    @property
    def llm_configured(self) -> bool:
        """Whether a chat model is set (MCP offers ``ask`` only then)."""
        return self._answers.llm.configured

    # -- chat and conversations (HTTP) ---------------------------------------------------
    async def chat_turn(self, caller: Principal, message: str, *,
                        conversation_id: str | None = None,
                        collection: str | None = None) -> PreparedTurn:
        """A prepared turn (retrieval, tool decision and tool done) in the caller's tenant;
        stream it with ``events()`` or finish it with ``run()``."""
        self._answers.llm()  # 503 naming the settings before any other complaint
        if collection:
            self._access.collection(caller, collection)
        elif not conversation_id and self._settings.default_collection:
            # the configured default: a missing one is a 404 naming the setting
            collection = self._name(caller, None)
        return await self._answers.chat.prepare(ChatRequest(
            caller.tenant, message, conversation_id, collection, self._scoped(caller)))

    async def chat(self, caller: Principal, message: str, *,
                   conversation_id: str | None = None,
                   collection: str | None = None) -> dict[str, Any]:
        turn = await self.chat_turn(caller, message, conversation_id=conversation_id,
                                    collection=collection)
        return await turn.run()

    def conversation(self, caller: Principal, conversation_id: str) -> dict[str, Any]:
        return self._answers.conversations.get(caller.tenant, conversation_id).as_dict()

    def delete_conversation(self, caller: Principal, conversation_id: str) -> None:
        self._answers.conversations.delete(caller.tenant, conversation_id)

    # -- the OpenAI-compatible surface (/v1, issue 40) ---------------------------------
    def completion_models(self, caller: Principal) -> list[tuple[str, str]]:
        """What ``GET /v1/models`` lists for this caller: ``(model id, created_at)`` for each
        collection the caller may read (``ragline/<collection>``, through the normal
        collection listing, so every access rule applies), then the general model
        ``ragline`` when a chat model is configured."""
        out = [(COMPLETION_MODEL_PREFIX + c.name, c.created_at)
               for c in self._collections.all(caller)]
        if self.llm_configured:
            out.append((GENERAL_MODEL, ""))
        return out

    async def completion_turn(self, caller: Principal, model: str, message: str,
                              history: list[str], options: AnswerOptions) -> PreparedTurn:
        """One stateless turn of ``POST /v1/chat/completions``: ``model`` names a collection
        (``ragline/<name>``, the caller's access checked like a chat turn's) or the
        general model (no knowledge base); ``history`` holds the earlier user messages."""
        self._answers.llm()  # 503 naming the settings before any other complaint
        general = model == GENERAL_MODEL
        collection = None
        if not general:
            name = model.removeprefix(COMPLETION_MODEL_PREFIX)
            if name == model or not name:
                raise ModelNotFound(f"The model '{model}' does not exist: GET /v1/models "
                                    "lists yours ('ragline/<collection>' or 'ragline')")
            try:
                collection = self._access.collection(caller, name).name
            except CollectionNotFound:
                raise ModelNotFound(f"The model '{model}' does not exist: no collection "
                                    f"'{name}' for this key (GET /v1/models)") from None
        if len(message.strip()) > MAX_MESSAGE_CHARS:
            raise InvalidInput(f"The last user message is longer than {MAX_MESSAGE_CHARS} "
                               "characters")
        return await self._answers.chat.prepare(ChatRequest(
            caller.tenant, message, None, collection, self._scoped(caller), history=history,
            general=general, options=options))

    # -- checklists (spec 003) -----------------------------------------------------------
    async def checklist(self, caller: Principal, context: Mapping[str, Any], *,
                        collection: str | None = None, top_k: int | None = None
                        ) -> dict[str, Any]:
        """``POST /api/checklists``: retrieve runbook chunks for an alert, generate."""
        self._answers.llm()
        ctx = EnrichedContext.model_validate(context)
        name = self._name(caller, collection)
        result = await self._answers.checklists.process(self._access.read_scope(caller), name,
                                                        ctx, top_k)
        return checklist_json(result)

    def embed(self, caller: Principal, texts: list[str], *, collection: str | None = None,
              input_type: str = "query") -> list[list[float]]:
        """``texts`` embedded with the collection's server-side embedder."""
        info = self._sv.collections.get(self._name(caller, collection))
        embedders = self._sv.embedders
        if not embedders.known(info.embedding_provider):
            raise InvalidInput(f"Collection '{info.name}' has no server-side embedder "
                               "(create it with 'embed')")
        assert info.embedding_provider is not None
        emb = embedders.get(info.embedding_provider, info.embedding_model)
        vecs = emb.embed(list(texts), "query" if input_type == "query" else "document")
        out: list[list[float]] = np.asarray(vecs, dtype=np.float32).tolist()
        return out

    def embed_context(self, caller: Principal, context: Mapping[str, Any], *,
                      collection: str | None = None) -> list[float]:
        """An alert (spec 003's EnrichedContext) formatted as a query, embedded."""
        text = context_query(EnrichedContext.model_validate(context))
        return self.embed(caller, [text], collection=collection)[0]

    def retrieve(self, caller: Principal, context: Mapping[str, Any], k: int = 5, *,
                 collection: str | None = None) -> list[Hit]:
        """Runbook chunks for an alert, with tag and shape boosts (synchronous)."""
        ctx = EnrichedContext.model_validate(context)
        name = self._name(caller, collection)
        return self._bridge.call(self._answers.checklists.retrieve,
                                 self._access.read_scope(caller), name, ctx, k)

    def format_prompt(self, context: Mapping[str, Any], chunks: list[Hit], *,
                      collection: str | None = None) -> str:
        """The checklist prompt for an alert and its chunks (pure: text in, text out)."""
        ctx = EnrichedContext.model_validate(context)
        return _format_prompt(self._answers.checklists.prompts(collection), ctx, chunks)

    def generate_checklist(self, context: Mapping[str, Any], chunks: list[Hit], *,
                           collection: str | None = None) -> Checklist:
        """A checklist from chunks the caller already has (no collection is read)."""
        ctx = EnrichedContext.model_validate(context)
        return self._bridge.call(self._answers.checklists.generate, ctx, chunks, collection)

    def process(self, caller: Principal, context: Mapping[str, Any], top_k: int = 5, *,
                collection: str | None = None) -> Checklist:
        """Spec 003 ``RagPipelineService.process``: retrieve ``top_k`` chunks, generate
        (synchronous)."""
        self._answers.llm()
        ctx = EnrichedContext.model_validate(context)
        name = self._name(caller, collection)
        return self._bridge.call(self._answers.checklists.process,
                                 self._access.read_scope(caller), name, ctx, top_k)
