"""What a ragline server answers, as typed models.

Each model names the fields the server promises and keeps any others
(``extra="allow"``): a newer server that adds a field must not break an older
client, and a caller can still read the new field as an attribute. The names
follow the JSON bodies of docs/api.md one to one, so ``model_dump()`` gives the
server's body back (the CLI's ``--json`` prints exactly that).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ApiModel(BaseModel):
    """Base of every answer model: unknown fields are kept, not refused."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class Collection(ApiModel):
    name: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    dimension: int | None = None
    embedding_provider: str | None = None
    embedding_model: str | None = None
    count: int = 0
    created_at: str = ""
    updated_at: str = ""
    embed: dict[str, str | None] | None = None


class CollectionList(ApiModel):
    collections: list[Collection]
    count: int


class Document(ApiModel):
    id: str
    text: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)
    shared: bool = False  # of the shared corpus (tenant '*')


class DocumentPage(ApiModel):
    documents: list[Document]
    count: int
    total: int


class DocumentsAdded(ApiModel):
    collection: str
    count: int
    ids: list[str]


class DocumentsDeleted(ApiModel):
    collection: str
    count_deleted: int


class MetadataValues(ApiModel):
    field: str | None
    values: list[Any]
    count: int


class SearchHit(ApiModel):
    """A result; expansion fields (``context``, ``prev_chunk_id``...) arrive as extras."""

    id: str
    text: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)
    score: float | None = None
    embedding: list[float] | None = None
    shared: bool = False  # of the shared corpus (tenant '*')


class SearchResult(ApiModel):
    results: list[SearchHit]
    mode: str | None = None
    took_ms: float = 0.0
    stages: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    collection: str | None = None  # POST /search names the collection it used


class Source(ApiModel):
    """An ingested source (a file of a tree, an upload, a text, a URL) and its state."""

    source_id: str
    origin: str
    source_path: str
    source_hash: str | None = None
    state: str
    chunk_count: int
    created_at: str = ""
    updated_at: str = ""
    root: str | None = None


class SourceDetail(Source):
    chunk_ids: list[str] = Field(default_factory=list)
    chunks_in_store: int = 0
    title: str | None = None


class SourceList(ApiModel):
    sources: list[Source]
    count: int
    total: int


class SourceDeleted(ApiModel):
    collection: str
    source_id: str
    count_deleted: int


class ChunkContext(ApiModel):
    """``GET /context/{id}``: the chunk, its neighbours and its source."""

    chunk: dict[str, Any]
    parent_doc_id: str | None = None
    prev_chunk_id: str | None = None
    next_chunk_id: str | None = None


class Lesson(ApiModel):
    """``GET /lesson/{parent_doc_id}``: every chunk of one source in order."""

    parent_doc_id: str
    title: str | None = None
    total_chunks: int
    chunks: list[dict[str, Any]]


class Reranked(ApiModel):
    id: str | int
    score: float
    original_rank: int


class JobStarted(ApiModel):
    """``POST /ingestion/trigger`` and ``.../rerun``: a job accepted (202)."""

    job_id: str
    status: str
    collection: str | None = None
    mode: str | None = None
    rerun_of: str | None = None


class Job(ApiModel):
    job_id: str
    status: str
    mode: str | None = None
    kind: str | None = None
    trigger: str | None = None
    collection: str | None = None
    path: str | None = None
    created_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    duration_s: float | None = None
    error: str | None = None
    warnings: list[str] = Field(default_factory=list)
    result: dict[str, Any] | None = None
    files_done: int = 0
    files_total: int = 0
    chunks_created: int = 0
    eta_s: float | None = None

    @property
    def finished(self) -> bool:
        return self.status in ("succeeded", "failed")


class JobList(ApiModel):
    jobs: list[Job]
    count: int


class Ingested(ApiModel):
    """Per-user ingestion (upload, URL, text): processed now (201) or queued as a job (202)."""

    message: str
    source_id: str | None = Field(None, alias="sourceId")
    chunks_created: int | None = Field(None, alias="chunksCreated")
    title: str | None = None
    unchanged: bool | None = None
    job_id: str | None = None
    status: str | None = None


class ChatAnswer(ApiModel):
    """``POST /api/chat`` with ``stream: false``."""

    answer: str
    conversation_id: str
    strategy: str | None = None
    path: str | None = None
    tool: dict[str, Any] | None = None
    sources: list[dict[str, Any]] = Field(default_factory=list)
    timings: dict[str, Any] = Field(default_factory=dict)


class ChatEvent(ApiModel):
    """One server-sent event of a streamed chat: ``token``, ``done`` or ``error``."""

    event: str
    data: dict[str, Any]


class Conversation(ApiModel):
    id: str | None = None
    messages: list[dict[str, Any]] = Field(default_factory=list)


class Checklist(ApiModel):
    """``POST /api/checklists``: spec 003's checklist; its fields arrive as they are."""


class ApiKey(ApiModel):
    id: str
    role: str
    tenant: str
    name: str = ""
    created_at: str = ""
    last_used_at: str | None = None
    revoked_at: str | None = None


class CreatedKey(ApiKey):
    key: str = Field(description="The secret, shown once.")


class KeyList(ApiModel):
    keys: list[ApiKey]
    count: int


class Health(ApiModel):
    status: str = "unknown"
    timestamp: str | None = None
    version: str | None = None
    collections: int | None = None
    storage_bytes: int | None = None
    cross_encoder: dict[str, Any] | None = None


class Info(ApiModel):
    version: str
    collections: list[dict[str, Any]]
    total_documents: int
    storage_bytes: int | None = None
    catalog: dict[str, Any] | None = None  # backend and schema version


class Version(ApiModel):
    name: str
    version: str
    data_format_version: int | None = None
    catalog_schema_version: int | None = None
