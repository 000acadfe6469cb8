"""Request and response bodies of the data API (spec 000/002)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

QUERY_INT_MAX = 1_000_000_000
"""Largest ``limit``/``offset`` a listing takes; beyond it a 400 (a huge value was a 500)."""


class EmbedConfig(BaseModel):
    provider: str = Field(description="An embedding provider ragline runs (e.g. 'local').")
    model: str | None = Field(None, description="A model name of that provider (default: "
                              "the provider's default). Never a path.")


class CollectionCreate(BaseModel):
    name: str
    metadata: dict[str, Any] | None = None
    embedding_provider: str | None = Field(
        None, description="Spec 000: stored as metadata only; documents must then carry "
        "pre-computed embeddings.")
    embedding_model: str | None = Field(None, description="Spec 000: stored as metadata only.")
    embed: EmbedConfig | None = Field(
        None, description="Opt in to server-side embedding: documents and text queries are "
        "embedded by ragline with this provider and model.")

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"name": "docs", "metadata": {"book": "robolearn"}, "embed": {"provider": "local"}}]})


class MetadataUpdate(BaseModel):
    metadata: dict[str, Any]

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"metadata": {"book": "robolearn", "subject": "robotics"}}]})


class DocumentIn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str | None = None
    text: str = ""
    metadata: dict[str, Any] | None = None
    embedding: Any = None


class DocumentsAdd(BaseModel):
    documents: list[DocumentIn] | None = None

    model_config = ConfigDict(json_schema_extra={"examples": [{"documents": [
        {"id": "a", "text": "ROS 2 topics carry messages between nodes",
         "metadata": {"chapter": 3, "tags": ["ros2"]}}]}]})


class DocumentsDelete(BaseModel):
    ids: list[str] | None = None
    where: dict[str, Any] | None = None

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"ids": ["a"]}, {"where": {"chapter": {"$lte": 2}}}]})


class VectorSearch(BaseModel):
    embedding: Any = None
    query: str | None = None
    mode: Literal["dense", "sparse", "hybrid"] | None = None
    where: dict[str, Any] | None = None
    limit: int = Field(10, ge=1, le=1000)
    include_embeddings: bool = False
    score_threshold: float | None = None
    fusion: Literal["rrf", "dbsf"] | None = None
    rrf_k: int | None = Field(None, ge=1, le=1000)
    candidates: int | None = Field(None, ge=1, le=1000)
    rerank: bool = Field(False, description="Rescore the top candidates with the cross-encoder.")
    rerank_candidates: int = Field(50, ge=1, le=1000)
    boost: dict[str, Any] | None = Field(None, description="Metadata boosts (spec 003); "
                                         "overrides the collection's 'boost' metadata.")
    expand: Literal["none", "neighbors", "section", "document"] = Field(
        "none", description="Add surrounding text to each hit: its prev/next chunks, its "
        "section or its whole source (see services/search/expand.py).")
    group_by: str | None = Field(
        None, min_length=1, description="Distinct results: 'source' (the document a chunk "
        "came from) or a metadata field. 'limit' counts groups; each result is its group's "
        "best hit, with up to group_size - 1 more under 'group'.")
    group_size: int = Field(1, ge=1, le=100)
    mmr: float | None = Field(
        None, ge=0.0, le=1.0, description="Maximal marginal relevance: the weight of "
        "relevance against novelty (1 = the ranking as is; 0.5-0.7 are common).")
    overviews: Literal["yield", "keep"] | None = Field(
        None, description="Whether an overview page (README/index) ranked above a page it "
        "summarises yields to it (default: the server's search_overviews).")
    relevance_threshold: float | None = Field(
        None, ge=0.0, le=1.0, description="Drop hits whose 'relevance' (0.5 + cosine/2, "
        "the chat's scale, the same in every mode) is below this.")
    explain: bool = Field(False, description="Add 'scores': the raw per-leg scores "
                          "(dense cosine, sparse BM25, fused, rerank, boost).")
    relevance: bool = Field(
        True, description="Give each hit its 'relevance'. false: no 'relevance' on the hits, "
        "and a sparse search then does not embed the query for it (measured on 2 cores, 100 "
        "connections: ~2,400 sparse searches/s instead of ~700; BENCHMARKS.md). Not with "
        "'relevance_threshold'.")

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"query": "how do nodes talk?", "where": {"chapter": {"$lte": 3}}, "limit": 5}]})


BOOK_FILTERS = ("hardware_tier", "module", "chapter_min", "chapter_max", "lesson",
                "proficiency_levels", "layer", "book_id")
"""The book-style parameters of ``POST /search``, ANDed with ``where``."""


class BookSearch(VectorSearch):
    """``POST /search`` (spec 004): a default collection plus the book's filters."""

    collection: str | None = None
    hardware_tier: int | None = Field(None, description="Return content of this tier or lower.")
    module: str | int | None = Field(None, description="The module's number (1 or \"1\") "
                                     "or its directory name (\"module-1-ros2\").")
    chapter_min: int | None = None
    chapter_max: int | None = None
    lesson: int | None = None
    proficiency_levels: list[str] | None = None
    layer: str | None = None
    book_id: str | None = Field(None, min_length=1, max_length=128,
                                description="Spec 004's book: chunks of this book only.")

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"query": "how do robots sense?", "hardware_tier": 2, "chapter_max": 3, "limit": 5}]})


class DocumentOut(BaseModel):
    id: str
    text: str
    metadata: dict[str, Any]
    shared: bool = Field(False, description="Present (true) only on a record of the shared "
                         "corpus (tenant '*') an admin published to every reader; read-only "
                         "to user keys.")

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"id": "a", "text": "ROS 2 topics carry messages between nodes",
         "metadata": {"chapter": 3, "tags": ["ros2"]}}]})


class DocumentList(BaseModel):
    documents: list[DocumentOut]
    count: int
    total: int

    model_config = ConfigDict(json_schema_extra={"examples": [{"documents": [
        {"id": "a", "text": "ROS 2 topics carry messages between nodes",
         "metadata": {"chapter": 3, "tags": ["ros2"]}}], "count": 1, "total": 1}]})


class ConnectionTest(BaseModel):
    """A provider and its config (``GET /api/providers/{name}/schema`` describes it)."""

    provider: str = Field(description="A provider name, e.g. 'ragline-remote'.")
    kind: Literal["stores", "embedders", "rerankers", "llms", "tools"] = Field(
        "stores", description="The provider's kind; collections route to 'stores'; "
        "'tools' with provider 'searxng' configures the chat's search_engine tool.")
    options: dict[str, Any] = Field(default_factory=dict,
                                    description="The provider's config; secrets are stored "
                                    "but never returned.")

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"provider": "ragline-remote", "kind": "stores",
         "options": {"base_url": "http://rag2:8000", "api_key": "rl_0123456789ab_secret"}}]})


class ConnectionCreate(ConnectionTest):
    id: str = Field(description="The connection's id, used as ?service=ID.")

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"id": "staging", "provider": "ragline-remote", "kind": "stores",
         "options": {"base_url": "http://rag2:8000", "api_key": "rl_0123456789ab_secret"}}]})
