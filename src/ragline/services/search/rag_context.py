"""Spec 001's ``fetchRagContext``: search the caller's tenant, format the context string.

The answer services never touch the store: they call a :class:`Retriever`, a
small async callable the facade wires to the search use case (and tests replace
with a scripted one). Every call carries the tenant, so a chat turn can only see
its caller's documents.

Relevance scale (what ``rag_relevance_threshold`` compares against): the search
pipeline's, :mod:`ragline.core.relevance` (``0.5 + cosine/2`` between the query
embedding and the document embedding, in [0, 1], the scale spec 001's 0.75 was
chosen on); a hit carries the number the search gave it, so chat and search agree
on every hit. A collection without embeddings has no relevance (``None``), which
never passes the threshold.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Protocol

from ragline.core.relevance import passes
from ragline.core.tenancy import TenantScope
from ragline.core.types import Metadata, Vector

log = logging.getLogger(__name__)


@dataclass
class Hit:
    """One retrieved chunk as the answer services see it."""

    id: str
    text: str
    metadata: Metadata
    score: float
    relevance: float | None = None
    collection: str = ""

    @property
    def source_type(self) -> str:
        return str(self.metadata.get("source_type") or self.metadata.get("sourceType") or "text")

    @property
    def title(self) -> str | None:
        t = self.metadata.get("title")
        return str(t) if t else None

    @property
    def filename(self) -> str | None:
        for key in ("original_filename", "originalFilename", "source_path", "path"):
            v = self.metadata.get(key)
            if v and not str(v).startswith(("http://", "https://")):
                return str(v)
        return None

    @property
    def original_filename(self) -> str | None:
        """Spec 001's ``originalFilename``: the file's name or path, none for pasted
        text (whose ``source_path`` is only its ``text-<hash>`` id) or a web page."""
        if self.source_type == "text":
            for key in ("original_filename", "originalFilename"):
                if self.metadata.get(key):
                    return str(self.metadata[key])
            return None
        return self.filename

    @property
    def url(self) -> str | None:
        for key in ("source_url", "sourceUrl", "url"):
            v = self.metadata.get(key)
            if v:
                return str(v)
        return None

    def source(self) -> dict[str, Any]:
        """What an answer cites: id, title, file/path, URL, scores."""
        return {"id": self.id, "collection": self.collection, "title": self.title,
                "source_path": self.filename, "source_url": self.url,
                "source_type": self.source_type, "score": self.score,
                "relevance": self.relevance}


class TurnEmbeddings:
    """Query embeddings of one turn, keyed ``connectionId:model`` (spec 000): collections
    sharing an embedding connection and model embed the turn's query once."""

    def __init__(self) -> None:
        self._vectors: dict[tuple[str, str], Vector] = {}
        self.hits = 0

    def get(self, key: str, text: str) -> Vector | None:
        vec = self._vectors.get((key, text))
        if vec is not None:
            self.hits += 1
            log.info("query embedding cache hit (%s)", key)
        return vec

    def put(self, key: str, text: str, vec: Vector) -> None:
        self._vectors[(key, text)] = vec


class Retriever(Protocol):
    """Search one collection of one tenant; hits best first, with ``relevance`` set."""

    async def __call__(self, tenant: TenantScope, collection: str, query: str, *, limit: int,
                       where: dict[str, Any] | None = None, candidates: int = 100,
                       boost: dict[str, Any] | None = None,
                       embeddings: TurnEmbeddings | None = None) -> list[Hit]: ...


def format_document(hit: Hit) -> str:
    """Spec 001's line: ``Document (Source: t, Title: x, File: f, URL: u, Score: s):`` + text.

    The score shown is the relevance (the value the threshold was applied to), or the
    search score when there is none.
    """
    score = hit.relevance if hit.relevance is not None else hit.score
    head = f"Document (Source: {hit.source_type}, Title: {hit.title or 'N/A'}"
    if hit.original_filename:
        head += f", File: {hit.original_filename}"
    if hit.url:
        head += f", URL: {hit.url}"
    return f"{head}, Score: {score:.4f}):\n{hit.text}"


def format_context(hits: list[Hit]) -> str | None:
    if not hits:
        return None
    return "\n\n---\n\n".join(format_document(h) for h in hits)


@dataclass
class RagContext:
    context: str | None
    documents: list[Hit] = field(default_factory=list)

    @property
    def top_relevance(self) -> float | None:
        return self.documents[0].relevance if self.documents else None


async def fetch_rag_context(retriever: Retriever, tenant: str, collection: str,
                            original_user_query: str, *, limit: int = 3,
                            num_candidates: int = 100, where: dict[str, Any] | None = None,
                            embeddings: TurnEmbeddings | None = None) -> RagContext:
    """Spec 001 ``fetchRagContext``: ``{context, documents}`` for the tenant's query."""
    docs = await retriever(tenant, collection, original_user_query, limit=limit, where=where,
                           candidates=num_candidates, embeddings=embeddings)
    return RagContext(format_context(docs), docs)


def passes_threshold(ctx: RagContext, threshold: float) -> bool:
    """Spec 001: the top document's relevance must reach the threshold (>=)."""
    return passes(ctx.top_relevance, threshold)
