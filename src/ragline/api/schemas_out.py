"""Success bodies of every operation, for the OpenAPI document (issue 9).

These models *describe* what the routes already send; they are declared with
:func:`ok` in each route's ``responses=`` and never used to re-serialise a
response, so the JSON on the wire (pinned by the specs in ``shared/spec`` and by
the tests) stays exactly what the route builds, and the hot paths pay no extra
validation. ``tests/api/test_openapi_contract.py`` checks that real responses
validate against these schemas and that every example does too.

Each model carries one example (``json_schema_extra``); ``api/openapi.py`` also
puts it on the response's media type, where Swagger UI shows it. The bodies of the
operations, connection and answer routes are in :mod:`ragline.api.schemas_ops`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

TS = "2026-11-23T14:11:03.667599+00:00"
JOB_ID = "97ab568c9b154ac5b34407c32280990d"


def example(example: dict[str, Any] | list[Any]) -> ConfigDict:
    """A model's one example, as its ``model_config``."""
    return ConfigDict(json_schema_extra={"examples": [example]})


def example_of(model: type[BaseModel]) -> Any:
    """The first example a model declares (every model here declares one)."""
    extra = model.model_config.get("json_schema_extra")
    assert isinstance(extra, dict), f"{model.__name__} declares no example"
    examples = extra["examples"]
    assert isinstance(examples, list)
    return examples[0]


def ok(model: type[BaseModel], status: int = 200, description: str = "Success.",
       example: Any = None) -> dict[int | str, dict[str, Any]]:
    """``responses=`` entry declaring ``model`` as the body of ``status``.

    The response shows ``example`` or, by default, the model's own, which
    ``api/openapi.py`` copies in after FastAPI built the document (FastAPI drops
    every ``null`` from examples, which would make them contradict their schema).
    """
    example_of(model)  # every declared body has an example
    entry: dict[str, Any] = {"model": model, "description": description}
    if example is not None:
        entry["content"] = {"application/json": {"example": example}}
    return {status: entry}


# -- collections ----------------------------------------------------------------------------
class EmbedOut(BaseModel):
    provider: str
    model: str | None


class CollectionOut(BaseModel):
    """A collection as the caller sees it (``count``: the caller's tenant's documents)."""

    name: str
    metadata: dict[str, Any]
    dimension: int | None = Field(description="Vector size; null until the first write.")
    embedding_provider: str | None = Field(description="Spec 000 metadata (not used to embed).")
    embedding_model: str | None
    count: int
    created_at: str
    updated_at: str
    embed: EmbedOut | None = Field(None, description="Server-side embedding, when opted in.")

    model_config = example({
        "name": "docs", "metadata": {}, "dimension": 384, "embedding_provider": None,
        "embedding_model": None, "count": 1, "created_at": TS, "updated_at": TS,
        "embed": {"provider": "local", "model": "all-MiniLM-L6-v2"}})


class CollectionCreated(CollectionOut):
    status: Literal["created"]

    model_config = example({"status": "created", **example_of(CollectionOut), "count": 0})


class CollectionUpdated(CollectionOut):
    status: Literal["updated"]
    mode: Literal["replace", "merge"]

    model_config = example({"status": "updated", "mode": "merge",
                             **example_of(CollectionOut), "metadata": {"book": "robolearn"}})


class CollectionList(BaseModel):
    collections: list[CollectionOut]
    count: int

    model_config = example({"collections": [example_of(CollectionOut)], "count": 1})


class CollectionDeleted(BaseModel):
    status: Literal["deleted"]
    collection: str

    model_config = example({"status": "deleted", "collection": "docs"})


# -- sources ---------------------------------------------------------------------------------
SOURCE: dict[str, Any] = {
    "source_id": "chapter-3/topics", "origin": "directory", "source_path": "chapter-3/topics.md",
    "source_hash": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "state": "ingested", "chunk_count": 2, "created_at": TS, "updated_at": TS, "root": None}

class SourceSummary(BaseModel):
    source_id: str = Field(description="The source's id: a file's path without its extension, "
                           "'upload/NAME', or the id of a text or URL.")
    origin: str = Field(description="directory, upload, text or url.")
    source_path: str = Field(description="Path relative to the ingested root, file name or URL.")
    source_hash: str | None = Field(description="SHA-256 of the bytes last ingested (null while "
                                    "a first write is pending).")
    state: str = Field(description="ingested (state and store agree), pending (a first write "
                       "that has not finished) or modified (chunks were deleted outside "
                       "ingestion; the next ingestion writes it again).")
    chunk_count: int
    created_at: str
    updated_at: str
    root: str | None = Field(None, description="Directory it was read from (local callers "
                             "only; null over HTTP).")
    shared: bool = Field(False, description="Part of the shared corpus (tenant '*') that an "
                         "admin published to every reader; read-only to user keys.")

    model_config = example(SOURCE)


class SourceList(BaseModel):
    sources: list[SourceSummary]
    count: int
    total: int

    model_config = example({"sources": [SOURCE], "count": 1, "total": 1})


class SourceOut(SourceSummary):
    chunk_ids: list[str]
    chunks_in_store: int = Field(description="How many of chunk_ids the store holds.")
    title: str | None

    model_config = example({**SOURCE, "chunk_ids": ["chapter-3/topics#0", "chapter-3/topics#1"],
                             "chunks_in_store": 2, "title": "Topics"})


class SourceDeleted(BaseModel):
    status: Literal["deleted"]
    collection: str
    source_id: str
    count_deleted: int = Field(description="Chunks removed from the store.")

    model_config = example({"status": "deleted", "collection": "docs",
                             "source_id": "chapter-3/topics", "count_deleted": 2})


# -- documents -------------------------------------------------------------------------------
class DocumentsAdded(BaseModel):
    status: Literal["success"]
    collection: str
    count: int
    ids: list[str] = Field(description="The stored ids, generated where none was given.")

    model_config = example({"status": "success", "collection": "docs", "count": 1,
                             "ids": ["a"]})


class DocumentsDeleted(BaseModel):
    status: Literal["deleted"]
    collection: str
    count_deleted: int

    model_config = example({"status": "deleted", "collection": "docs", "count_deleted": 2})


class CollectionEmptied(BaseModel):
    status: Literal["emptied"]
    collection: str
    count_deleted: int

    model_config = example({"status": "emptied", "collection": "docs", "count_deleted": 40})


class MetadataValues(BaseModel):
    field: str | None
    values: list[Any] = Field(description="Distinct values of the field (list items "
                              "counted one by one).")
    count: int

    model_config = example({"field": "chapter", "values": [1, 2, 3], "count": 3})


# -- search ----------------------------------------------------------------------------------
class SearchHitOut(BaseModel):
    id: str
    text: str
    metadata: dict[str, Any]
    score: float
    embedding: list[float] | None = Field(None, description="With include_embeddings only.")
    expand: str | None = Field(None, description="With 'expand' other than none.")
    context: str | None = Field(None, description="The text around the hit ('expand').")
    context_ids: list[str] | None = Field(None, description="The chunks 'context' joins.")
    relevance: float | None = Field(
        None, description="0.5 + cosine/2 between the query's and the chunk's embeddings, in "
        "[0, 1]: the same in every mode (the chat's relevance scale); absent without "
        "embeddings. See docs/search.md.")
    scores: dict[str, float | None] | None = Field(
        None, description="With 'explain': raw per-leg scores (dense, sparse, fused, "
        "rerank, boost); sparse is null for a hit outside the BM25 candidates.")
    group: list[SearchHitOut] | None = Field(
        None, description="With 'group_by': the other hits of this hit's group, best first.")


_HIT = {"id": "a", "text": "ROS 2 topics carry messages between nodes",
        "metadata": {"chapter": 3, "tags": ["ros2"]}, "score": 0.83, "relevance": 0.91}


class SearchResults(BaseModel):
    results: list[SearchHitOut]
    mode: str = Field(description="dense, sparse or hybrid: the mode that ran.")
    took_ms: float
    stages: list[str] = Field(description="What ran, in order (e.g. 'hybrid:rrf', 'rerank').")
    warnings: list[str] | None = Field(None, description="Present when something was "
                                       "degraded or ignored.")

    model_config = example({"results": [_HIT], "mode": "hybrid", "took_ms": 6.53,
                             "stages": ["hybrid:rrf"]})


class BookSearchResults(SearchResults):
    collection: str = Field(description="The collection searched (the default when none "
                            "was named).")

    model_config = example({**example_of(SearchResults), "collection": "robolearn"})


# -- context ---------------------------------------------------------------------------------
class ChunkOut(BaseModel):
    """A chunk with its place in its source (fields read from the chunk's metadata)."""

    id: str
    text: str
    metadata: dict[str, Any]
    parent_doc_id: Any = Field(description="The source the chunk belongs to.")
    chunk_index: Any
    section_id: Any
    section_title: Any
    prev_chunk_id: Any
    next_chunk_id: Any


_CHUNK = {"id": "c8", "text": "## Proprioception\n\nAn inertial measurement unit ...",
          "metadata": {"parent_doc_id": "module-1/lesson-1", "chunk_index": 8},
          "parent_doc_id": "module-1/lesson-1", "chunk_index": 8,
          "section_id": "proprioception", "section_title": "Proprioception",
          "prev_chunk_id": "c7", "next_chunk_id": "c9"}


class ContextOut(BaseModel):
    """Without ``window``: ``prev``/``next`` are single chunks (or null); with it, lists."""

    chunk: ChunkOut
    parent_doc_id: Any
    prev: ChunkOut | list[ChunkOut] | None
    next: ChunkOut | list[ChunkOut] | None
    window: int | None = Field(None, description="Present when asked for.")
    prev_chunk_id: Any
    next_chunk_id: Any

    model_config = example({
        "chunk": _CHUNK, "parent_doc_id": "module-1/lesson-1",
        "prev": {**_CHUNK, "id": "c7", "chunk_index": 7, "prev_chunk_id": "c6",
                 "next_chunk_id": "c8"},
        "next": {**_CHUNK, "id": "c9", "chunk_index": 9, "prev_chunk_id": "c8",
                 "next_chunk_id": None},
        "prev_chunk_id": "c7", "next_chunk_id": "c9"})


class LessonOut(BaseModel):
    parent_doc_id: str
    title: Any
    source_path: Any
    collection: str
    total_chunks: int
    chunks: list[ChunkOut] = Field(description="In chunk_index order.")
    text: str = Field(description="The chunks joined (overlaps removed).")

    model_config = example({
        "parent_doc_id": "module-1/lesson-1", "title": "Lesson 1.1: How Robots Sense",
        "source_path": "module-1/lesson-1.md", "collection": "robolearn", "total_chunks": 1,
        "chunks": [{**_CHUNK, "chunk_index": 0, "prev_chunk_id": None,
                    "next_chunk_id": None}],
        "text": "## Proprioception\n\nAn inertial measurement unit ..."})


# -- ingestion -------------------------------------------------------------------------------
class JobAccepted(BaseModel):
    job_id: str
    status: str
    collection: str
    mode: str

    model_config = example({"job_id": JOB_ID, "status": "queued", "collection": "book",
                             "mode": "incremental"})


class JobOut(BaseModel):
    """A job with its counters (every one present, 0 until reached) and progress."""

    job_id: str
    status: Literal["queued", "running", "succeeded", "failed"]
    mode: str
    kind: str
    trigger: str
    collection: str
    path: str | None
    restricted_paths: list[str] | None
    files_total: int
    files_seen: int
    files_changed: int
    files_skipped: int
    files_deleted: int
    files_failed: int
    chunks_created: int
    chunks_updated: int
    chunks_deleted: int
    texts_embedded: int
    embedding_calls: int
    created_at: str
    started_at: str | None
    finished_at: str | None
    duration_s: float | None
    error: str | None
    warnings: list[str]
    result: dict[str, Any] | None
    files_done: int
    rate_files_per_s: float | None
    eta_s: float | None

    model_config = example({
        "job_id": JOB_ID, "status": "succeeded", "mode": "incremental", "kind": "directory",
        "trigger": "api", "collection": "book", "path": "/srv/books/robolearn",
        "restricted_paths": None, "files_total": 6, "files_seen": 6, "files_changed": 6,
        "files_skipped": 0, "files_deleted": 0, "files_failed": 0, "chunks_created": 23,
        "chunks_updated": 0, "chunks_deleted": 0, "texts_embedded": 23, "embedding_calls": 1,
        "created_at": TS, "started_at": TS, "finished_at": TS, "duration_s": 1.371,
        "error": None, "warnings": [], "result": None, "files_done": 6,
        "rate_files_per_s": 4.376, "eta_s": 0.0})


class JobList(BaseModel):
    jobs: list[JobOut] = Field(description="Newest first.")
    count: int

    model_config = example({"jobs": [example_of(JobOut)], "count": 1})


class JobRerun(BaseModel):
    job_id: str
    status: str
    rerun_of: str

    model_config = example({"job_id": "fdeb29aecc7648a1ba62c779e4a880b8",
                             "status": "queued", "rerun_of": JOB_ID})


class WebhookResult(BaseModel):
    """200: ``pong`` or a replayed delivery (``duplicate``); 202: ``queued`` or ``ignored``."""

    status: Literal["queued", "ignored", "pong", "duplicate"]
    duplicate: bool | None = None
    delivery: str | None = None
    reason: str | None = None
    job_id: str | None = None
    collection: str | None = None

    model_config = example({"status": "queued", "job_id": JOB_ID, "collection": "book"})


class IngestProcessed(BaseModel):
    """201: the source was small enough to process while the request waited."""

    message: str
    sourceId: str
    chunksCreated: int
    title: str | None
    unchanged: bool

    model_config = example({"message": "Document processed successfully.",
                             "sourceId": "upload/notes.md", "chunksCreated": 3,
                             "title": "Notes", "unchanged": False})


class IngestQueued(BaseModel):
    """202: a larger source became a job (poll ``/ingestion/status/{job_id}``)."""

    message: str
    jobId: str
    job_id: str
    status: Literal["queued"]

    model_config = example({"message": "Document accepted for processing.",
                             "jobId": JOB_ID, "job_id": JOB_ID, "status": "queued"})


# -- keys ------------------------------------------------------------------------------------
class KeyOut(BaseModel):
    """A key as listed: everything but the secret (which is not stored)."""

    id: str
    role: Literal["admin", "user"]
    tenant: str
    name: str
    created_at: str
    last_used_at: str | None
    revoked_at: str | None

    model_config = example({"id": "d1c449346431", "role": "user", "tenant": "alice",
                             "name": "alice's laptop", "created_at": TS,
                             "last_used_at": None, "revoked_at": None})


class KeyCreated(KeyOut):
    key: str = Field(description="The secret, shown this once.")

    model_config = example({**example_of(KeyOut),
                             "key": "rl_d1c449346431_XmGVdoYUvGI77lCNDeKtCshalJIB7ov9Q9VHnmzJW8Y"})


class KeyRevoked(KeyOut):
    status: Literal["revoked"]

    model_config = example({"status": "revoked", **example_of(KeyOut), "revoked_at": TS})


class KeyList(BaseModel):
    keys: list[KeyOut]
    count: int

    model_config = example({"keys": [example_of(KeyOut)], "count": 1})
