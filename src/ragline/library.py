"""Spec 003's library API, as a thin adapter over the doors of :class:`~ragline.facade.Ragline`.

Spec 003 names its services ``EmbeddingService``, ``VectorStoreRepository``,
``RunbookRetriever``, ``PromptTemplates``, ``ChecklistGenerator`` and
``RagPipelineService``; :class:`Library` offers their methods under those names, each
one a call of a door with the caller it was made for (the one calling convention:
the caller is explicit, here once at construction)::

    lib = Library(rl, rl.owner())
    lib.store_batch("runbooks", [{"text": "...", "metadata": {...}}])
    checklist = lib.process(alert, top_k=2, collection="runbooks")

Nothing here holds logic or state of its own: a rule lives in the door it calls.
``collection=`` defaults to the default collection. The methods are synchronous and
run on the root's own event loop, so they work from plain code and from threads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragline.core.principal import Principal
from ragline.facade import DocumentInput, Ragline, SearchRequest
from ragline.services.answers.checklists import Checklist
from ragline.services.search.rag_context import Hit

__all__ = ["Library"]


class Library:
    def __init__(self, rl: Ragline, caller: Principal) -> None:
        """``rl``: a started root; ``caller``: who every call acts as (``rl.owner()``:
        the data directory's owner, on the default tenant)."""
        self.rl = rl
        self.caller = caller

    # -- EmbeddingService ----------------------------------------------------------------
    def embed_text(self, text: str, *, collection: str | None = None) -> list[float]:
        """The query embedding of ``text`` with the collection's server-side embedder."""
        return self.embed_texts([text], collection=collection)[0]

    def embed_texts(self, texts: list[str], *, collection: str | None = None,
                    input_type: str = "query") -> list[list[float]]:
        return self.rl.answers.embed(self.caller, texts, collection=collection,
                                     input_type=input_type)

    def embed_context(self, context: Mapping[str, Any], *,
                      collection: str | None = None) -> list[float]:
        """An alert (EnrichedContext) formatted as a query, embedded."""
        return self.rl.answers.embed_context(self.caller, context, collection=collection)

    # -- VectorStoreRepository -------------------------------------------------------------
    def store_chunk(self, collection: str, chunk: Mapping[str, Any]) -> str:
        """Spec 003's ``store``."""
        return self.store_batch(collection, [chunk])[0]

    def store_batch(self, collection: str, chunks: list[Mapping[str, Any]]) -> list[str]:
        """All chunks or none: one validated write through the documents door."""
        docs = [DocumentInput(str(c.get("text", "")), dict(c.get("metadata") or {}),
                              c.get("embedding"), c.get("id")) for c in chunks]
        return self.rl.documents.add(self.caller, collection, docs)

    def find_similar(self, embedding: list[float], k: int = 5, *,
                     collection: str | None = None) -> list[dict[str, Any]]:
        """Top ``k`` chunks by cosine similarity (dense search), each with its ``score``."""
        req = SearchRequest(collection=collection, embedding=[float(x) for x in embedding],
                            mode="dense", limit=k)
        res = self.rl.search.query_sync(self.caller, req)
        return [{"id": h.id, "text": h.text, "metadata": h.metadata, "score": h.score}
                for h in res.hits]

    # -- RunbookRetriever, PromptTemplates, ChecklistGenerator, RagPipelineService ---------
    def retrieve(self, context: Mapping[str, Any], k: int = 5, *,
                 collection: str | None = None) -> list[Hit]:
        """Runbook chunks for an alert, with tag and shape boosts."""
        return self.rl.answers.retrieve(self.caller, context, k, collection=collection)

    def format_prompt(self, context: Mapping[str, Any], chunks: list[Hit], *,
                      collection: str | None = None) -> str:
        return self.rl.answers.format_prompt(context, chunks, collection=collection)

    def generate_checklist(self, context: Mapping[str, Any], chunks: list[Hit], *,
                           collection: str | None = None) -> Checklist:
        return self.rl.answers.generate_checklist(context, chunks, collection=collection)

    def process(self, context: Mapping[str, Any], top_k: int = 5, *,
                collection: str | None = None) -> Checklist:
        """Retrieve ``top_k`` chunks for the alert, generate a checklist from them."""
        return self.rl.answers.process(self.caller, context, top_k, collection=collection)
