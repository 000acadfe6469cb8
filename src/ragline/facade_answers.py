"""The ``Ragline`` facade's answer block (issue 11): chat, conversations, checklists and
spec 003's library API.

Part of the facade, kept in its own module so ``facade.py`` stays readable: ``Ragline``
inherits :class:`AnswersMixin`. Every method takes the calling
:class:`~ragline.core.principal.Principal`; the HTTP ones as their first argument, the
library ones (spec 003's names) as a keyword ``caller`` that defaults to the data
directory's owner (``rl.owner()``). The services are wired by ``Ragline.start()`` and
live on ``rl.services.answers``; nothing here touches the store or the catalog.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from ragline.core.principal import Principal
from ragline.errors import CollectionNotFound, InvalidInput, ModelNotFound
from ragline.services.answers import AnswerServices
from ragline.services.chat import (
    MAX_MESSAGE_CHARS,
    AnswerOptions,
    ChatRequest,
    PreparedTurn,
)
from ragline.services.checklists import (
    Checklist,
    EnrichedContext,
    checklist_json,
    context_query,
)
from ragline.services.checklists import format_prompt as _format_prompt
from ragline.services.documents import DocumentInput
from ragline.services.rag_context import Hit
from ragline.services.search_retriever import ScopedRetriever
from ragline.services.searching import SearchRequest

if TYPE_CHECKING:
    from ragline.facade import CollectionView, Services
    from ragline.services.access import AccessPolicy
    from ragline.settings import Settings

__all__ = ["COMPLETION_MODEL_PREFIX", "GENERAL_MODEL", "AnswerOptions", "AnswersMixin"]

T = TypeVar("T")

GENERAL_MODEL = "ragline"
"""``/v1``'s model without a knowledge base: spec 001's general (or tool) path."""
COMPLETION_MODEL_PREFIX = "ragline/"
"""``/v1``'s model ids of collections: ``ragline/<collection>``."""


class AnswersMixin:
    settings: Settings

    if TYPE_CHECKING:  # provided by Ragline
        @property
        def services(self) -> Services: ...
        def owner(self) -> Principal: ...
        def list_collections(self, caller: Principal) -> list[CollectionView]: ...
        @property
        def access(self) -> AccessPolicy: ...
        def call_sync(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T: ...

    @property
    def _answers(self) -> AnswerServices:
        return self.services.answers

    def _name(self, caller: Principal, collection: str | None) -> str:
        """The one default-collection rule, then the caller's access check."""
        name = self.services.search.existing_default(collection)
        self.access.collection(caller, name)
        return name

    def _scoped(self, caller: Principal) -> ScopedRetriever:
        return ScopedRetriever(self._answers.retriever,
                               lambda name: self.access.collection(caller, name),
                               self.access.read_scope(caller))

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
            self.access.collection(caller, collection)
        elif not conversation_id and self.settings.default_collection:
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

    # -- the OpenAI-compatible surface (/v1, issue 40) ---------------------------------
    def completion_models(self, caller: Principal) -> list[tuple[str, str]]:
        """What ``GET /v1/models`` lists for this caller: ``(model id, created_at)`` for each
        collection the caller may read (``ragline/<collection>``, through the normal
        collection listing, so every access rule applies), then the general model
        ``ragline`` when a chat model is configured."""
        out = [(COMPLETION_MODEL_PREFIX + c.name, c.created_at)
               for c in self.list_collections(caller)]
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
                collection = self.access.collection(caller, name).name
            except CollectionNotFound:
                raise ModelNotFound(f"The model '{model}' does not exist: no collection "
                                    f"'{name}' for this key (GET /v1/models)") from None
        if len(message.strip()) > MAX_MESSAGE_CHARS:
            raise InvalidInput(f"The last user message is longer than {MAX_MESSAGE_CHARS} "
                               "characters")
        return await self._answers.chat.prepare(ChatRequest(
            caller.tenant, message, None, collection, self._scoped(caller), history=history,
            general=general, options=options))

    def get_conversation(self, caller: Principal, conversation_id: str) -> dict[str, Any]:
        return self._answers.conversations.get(caller.tenant, conversation_id).as_dict()

    def delete_conversation(self, caller: Principal, conversation_id: str) -> None:
        self._answers.conversations.delete(caller.tenant, conversation_id)

    async def checklist(self, caller: Principal, context: Mapping[str, Any], *,
                        collection: str | None = None, top_k: int | None = None
                        ) -> dict[str, Any]:
        self._answers.llm()
        ctx = EnrichedContext.model_validate(context)
        name = self._name(caller, collection)
        result = await self._answers.checklists.process(self.access.read_scope(caller), name,
                                                        ctx, top_k)
        return checklist_json(result)

    # -- library API (spec 003's services), synchronous ------------------------------
    def embed_text(self, text: str, *, collection: str | None = None,
                   caller: Principal | None = None) -> list[float]:
        """The query embedding of ``text`` with the collection's server-side embedder."""
        return self.embed_texts([text], collection=collection, caller=caller)[0]

    def embed_texts(self, texts: list[str], *, collection: str | None = None,
                    input_type: str = "query",
                    caller: Principal | None = None) -> list[list[float]]:
        who = caller or self.owner()
        info = self.services.collections.get(self._name(who, collection))
        embedders = self.services.embedders
        if not embedders.known(info.embedding_provider):
            raise InvalidInput(f"Collection '{info.name}' has no server-side embedder "
                               "(create it with 'embed')")
        assert info.embedding_provider is not None
        emb = embedders.get(info.embedding_provider, info.embedding_model)
        vecs = emb.embed(list(texts), "query" if input_type == "query" else "document")
        out: list[list[float]] = np.asarray(vecs, dtype=np.float32).tolist()
        return out

    def embed_context(self, context: Mapping[str, Any], *, collection: str | None = None,
                      caller: Principal | None = None) -> list[float]:
        """An alert (EnrichedContext) formatted as a query, embedded."""
        return self.embed_text(context_query(EnrichedContext.model_validate(context)),
                               collection=collection, caller=caller)

    def store_chunk(self, collection: str, chunk: Mapping[str, Any], *,
                    caller: Principal | None = None) -> str:
        return self.store_batch(collection, [chunk], caller=caller)[0]

    def store_batch(self, collection: str, chunks: list[Mapping[str, Any]], *,
                    caller: Principal | None = None) -> list[str]:
        """All chunks or none: one validated write through the documents use case."""
        who = caller or self.owner()
        self.access.collection(who, collection)
        docs = [DocumentInput(str(c.get("text", "")), dict(c.get("metadata") or {}),
                              c.get("embedding"), c.get("id")) for c in chunks]
        return self.services.documents.add(collection, docs, self.access.write_tenant(who))

    def find_similar(self, embedding: list[float], k: int = 5, *,
                     collection: str | None = None,
                     caller: Principal | None = None) -> list[dict[str, Any]]:
        """Top ``k`` chunks by cosine similarity (dense search), each with its ``score``."""
        who = caller or self.owner()
        req = SearchRequest(collection=collection, embedding=[float(x) for x in embedding],
                            mode="dense", limit=k)
        res = self.call_sync(self._search, who, req)
        return [{"id": h.id, "text": h.text, "metadata": h.metadata, "score": h.score}
                for h in res.hits]

    async def _search(self, caller: Principal, req: SearchRequest) -> Any:
        name = self._name(caller, req.collection)
        return await self.services.search.search(self.access.read_scope(caller), name, req)

    def retrieve(self, context: Mapping[str, Any], k: int = 5, *,
                 collection: str | None = None, caller: Principal | None = None) -> list[Hit]:
        """Runbook chunks for an alert, with tag and shape boosts."""
        who = caller or self.owner()
        ctx = EnrichedContext.model_validate(context)
        name = self._name(who, collection)
        return self.call_sync(self._answers.checklists.retrieve, self.access.read_scope(who),
                              name, ctx, k)

    def format_prompt(self, context: Mapping[str, Any], chunks: list[Hit], *,
                      collection: str | None = None) -> str:
        ctx = EnrichedContext.model_validate(context)
        return _format_prompt(self._answers.checklists.prompts(collection), ctx, chunks)

    def generate_checklist(self, context: Mapping[str, Any], chunks: list[Hit], *,
                           collection: str | None = None) -> Checklist:
        ctx = EnrichedContext.model_validate(context)
        return self.call_sync(self._answers.checklists.generate, ctx, chunks, collection)

    def process(self, context: Mapping[str, Any], top_k: int = 5, *,
                collection: str | None = None, caller: Principal | None = None) -> Checklist:
        """Spec 003 ``RagPipelineService.process``: retrieve ``top_k`` chunks, generate."""
        who = caller or self.owner()
        self._answers.llm()
        ctx = EnrichedContext.model_validate(context)
        name = self._name(who, collection)
        return self.call_sync(self._answers.checklists.process, self.access.read_scope(who),
                              name, ctx, top_k)
