"""Success bodies of the operations, connection and answer routes, for the OpenAPI
document: health, info, providers, connections, version, chat, conversations and
checklists (the rest, and the rules they follow: :mod:`ragline.api.schemas_out`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from ragline.api.schemas_out import TS, example, example_of


# -- operations ------------------------------------------------------------------------------
class ComponentHealth(BaseModel):
    status: Literal["ok", "degraded", "down"]
    timestamp: str
    details: dict[str, Any] = {}
    error: str | None = None


class DiskStatus(BaseModel):
    free_bytes: int | None = Field(None, description="Admin keys only.")
    reserve_bytes: int | None = Field(None, description="Admin keys only.")
    writes_allowed: bool = Field(description="False: writes answer 507 until space is freed.")


class CollectionStatus(BaseModel):
    name: str
    status: Literal["ok", "empty", "error"] = Field(
        description="ok: the store holds it; empty: nothing written yet; error: the store "
        "could not say.")
    dimension: int | None


class HealthOut(BaseModel):
    """Anonymous callers get ``status``, ``timestamp``, ``version`` and ``cross_encoder``;
    a user key adds the store's status, ``collections``, ``collection_status`` (its
    tenant's collections only) and ``disk.writes_allowed``; an admin key everything."""

    status: Literal["healthy", "degraded"]
    timestamp: str
    version: str
    store: ComponentHealth | None = Field(None, description="With a key (details: admin).")
    collections: int | None = Field(None, description="Collections the caller may read.")
    collection_status: list[CollectionStatus] | None = Field(
        None, description="Spec 004's per-collection status, with a key.")
    storage_bytes: int | None = Field(None, description="Admin keys only.")
    catalog_error: str | None = Field(None, description="When the catalog could not be read.")
    disk: DiskStatus | None = Field(None, description="With a key (sizes: admin).")
    cross_encoder: dict[str, str] | None = Field(None, description="When a reranker is "
                                                 "loaded: its model and status.")
    chat: dict[str, bool] | None = Field(None, description="`configured`: whether a chat "
                                         "model is configured (without one, POST /api/chat "
                                         "answers 503 naming the settings).")

    model_config = example({
        "status": "healthy", "timestamp": TS, "version": "0.1.0",
        "store": {"status": "ok", "timestamp": TS,
                  "details": {"engine": "qdrant-edge", "open_shards": 1}, "error": None},
        "collections": 1,
        "collection_status": [{"name": "docs", "status": "ok", "dimension": 384}],
        "storage_bytes": 2174976,
        "disk": {"free_bytes": 55223734272, "reserve_bytes": 268435456,
                 "writes_allowed": True}, "chat": {"configured": False}})


class InfoCollection(BaseModel):
    name: str
    count: int
    dimension: int | None
    size_bytes: int | None = Field(None, description="Admin keys only (server-wide).")
    embedding_provider: str | None
    embedding_model: str | None


class InfoCatalog(BaseModel):
    backend: Literal["sqlite", "postgres"]
    schema_version: int = Field(description="The version the catalog's database is at "
                                "(one numbering for both backends; docs/scaling.md).")


class InfoOut(BaseModel):
    version: str
    collections: list[InfoCollection]
    total_documents: int
    scope: Literal["server", "tenant"] = Field(
        "server", description="'server' (admin keys): every figure below; 'tenant' (user "
        "keys): the caller's collections and counts only.")
    storage_bytes: int | None = Field(None, description="Admin keys only.")
    embedding_cache: dict[str, Any] | None = Field(
        None, description="Admin keys only. Per cache key connectionId:model: hits, misses, "
        "size, the collections sharing it.")
    embedding_cache_totals: dict[str, Any] | None = Field(
        None, description="Admin keys only. hits, misses, hit_rate.")
    search_batching: dict[str, Any] | None = Field(None, description="Admin keys only.")
    indexing: dict[str, Any] | None = Field(
        None, description="Background index builds of the embedded store (null for stores "
        "without them): enabled, builds, failures, building, pending, last_swap_stall_ms, "
        "last_build (step timings in seconds).")
    catalog: InfoCatalog | None = Field(None, description="The catalog's backend and schema "
                                        "version.")

    model_config = example({
        "version": "0.1.0",
        "collections": [{"name": "docs", "count": 26, "dimension": 384,
                         "size_bytes": 1888256, "embedding_provider": None,
                         "embedding_model": None}],
        "total_documents": 26, "scope": "server", "storage_bytes": 2174976,
        "embedding_cache": {"local:all-MiniLM-L6-v2": {"hits": 1, "misses": 2, "size": 2,
                                                       "collections": ["docs"]}},
        "embedding_cache_totals": {"hits": 1, "misses": 2, "hit_rate": 0.3333},
        "search_batching": {"batches": 2, "items": 2, "mean_batch": 1.0},
        "indexing": {"enabled": True, "builds": 1, "failures": 0, "building": False,
                     "pending": 0, "last_swap_stall_ms": 512.3,
                     "last_build": {"copy_s": 0.4, "build_s": 61.2, "load_s": 0.31,
                                    "locked_s": 0.05, "close_s": 0.15, "replayed": 12,
                                    "total_s": 62.3}},
        "catalog": {"backend": "sqlite", "schema_version": 6}})


class ProviderInfo(BaseModel):
    name: str
    kind: str = Field(description="Its registry group: stores, embedders, rerankers, llms, "
                      "tools.")
    schema_: dict[str, Any] = Field(alias="schema", description="JSON Schema of its config "
                                    "(secrets writeOnly; a tool's: its arguments).")
    capabilities: list[str]

    model_config = example({"name": "local", "kind": "embedders",
                             "schema": {"type": "object", "properties": {}},
                             "capabilities": ["embeddings", "local", "offline"]})


class PluginProblem(BaseModel):
    kind: str
    name: str
    distribution: str | None = Field(description="The installed distribution declaring it.")
    reason: str = Field(description="Why it is not loaded (import error, not a provider, not "
                        "in RAGLINE_PROVIDERS_ALLOW).")


class ProvidersOut(BaseModel):
    """Registered providers by kind, and the installed plugins that did not load."""

    kinds: list[str]
    stores: list[ProviderInfo]
    embedders: list[ProviderInfo]
    rerankers: list[ProviderInfo]
    llms: list[ProviderInfo]
    tools: list[ProviderInfo]
    errors: list[PluginProblem] = Field(description="Plugins that failed to load, and why.")
    skipped: list[PluginProblem] = Field(description="Plugins RAGLINE_PROVIDERS_ALLOW keeps "
                                         "out.")

    model_config = example({
        "kinds": ["stores", "embedders", "rerankers", "llms", "tools"], "stores": [],
        "embedders": [example_of(ProviderInfo)], "rerankers": [], "llms": [], "tools": [],
        "errors": [{"kind": "stores", "name": "acme-broken", "distribution": "acme-ragline",
                    "reason": "import failed: ModuleNotFoundError: No module named 'acme'"}],
        "skipped": []})


class ProviderSchemaOut(ProviderInfo):
    """One provider's schema; ``providers`` lists every kind that has one of this name."""

    kinds: list[str]
    providers: list[ProviderInfo]

    model_config = example({**example_of(ProviderInfo), "kinds": ["embedders"],
                             "providers": [example_of(ProviderInfo)]})


class ConnectionOut(BaseModel):
    """A named connection; ``options``/``secrets_set``/``created_at`` for admins only, and
    never a secret's value."""

    id: str
    kind: str
    provider: str
    source: Literal["builtin", "config", "api"]
    capabilities: list[str]
    options: dict[str, Any] | None = Field(None, description="Its config without secrets.")
    secrets_set: list[str] | None = Field(None, description="Names of the secrets set.")
    created_at: str | None = None

    model_config = example({
        "id": "staging", "kind": "stores", "provider": "ragline-remote", "source": "api",
        "capabilities": ["collections", "search", "embeddings", "metadata_filtering",
                         "hybrid", "facets", "persistence", "passthrough"],
        "options": {"base_url": "http://rag2:8000", "timeout": 30.0, "verify_tls": True,
                    "retries": 3, "backoff": 0.2, "health_ttl": 30.0, "failure_ttl": 5.0,
                    "collection_prefix": "shard-"},
        "secrets_set": ["api_key"], "created_at": TS})


class ConnectionCreated(ConnectionOut):
    status: Literal["created"]

    model_config = example({"status": "created", **example_of(ConnectionOut)})


class ConnectionList(BaseModel):
    connections: list[ConnectionOut]
    count: int

    model_config = example({"connections": [
        {"id": "local", "kind": "stores", "provider": "qdrant-edge", "source": "builtin",
         "capabilities": ["collections", "search"]}, example_of(ConnectionOut)], "count": 2})


class ProviderHealth(BaseModel):
    """Spec 000's standard health: status, timestamp, service details, error."""

    status: Literal["ok", "degraded", "down"]
    timestamp: str
    details: dict[str, Any] = Field(description="latency_ms and the service's own figures "
                                    "(collection_count, storage_bytes, model, dimension...).")
    error: str | None

    model_config = example({"status": "ok", "timestamp": TS,
                             "details": {"url": "http://rag2:8000", "collection_count": 3,
                                         "storage_bytes": 2174976, "latency_ms": 4.2},
                             "error": None})


class ConnectionHealth(ProviderHealth):
    id: str

    model_config = example({"id": "staging", **example_of(ProviderHealth)})


class ConnectionDeleted(BaseModel):
    status: Literal["deleted"]
    id: str

    model_config = example({"status": "deleted", "id": "staging"})


class VersionOut(BaseModel):
    name: Literal["ragline"]
    version: str
    data_format_version: int
    catalog_schema_version: int = Field(description="The catalog schema version this ragline "
                                        "migrates to (SQLite and PostgreSQL alike).")
    python: str
    platform: str

    model_config = example({"name": "ragline", "version": "0.1.0", "data_format_version": 2,
                             "catalog_schema_version": 6,
                             "python": "3.11.7", "platform": "Linux-6.1-x86_64-with-glibc2.36"})


# -- answers ---------------------------------------------------------------------------------
class ChatAnswer(BaseModel):
    """``stream: false``; with streaming, the same fields but ``answer`` come in ``done``."""

    answer: str
    conversation_id: str
    strategy: str
    path: str
    tool: dict[str, Any] | None
    sources: list[dict[str, Any]]
    query: str
    topic: str
    timings: dict[str, float]

    model_config = example({
        "answer": "Nodes talk over topics: one publishes, others subscribe.",
        "conversation_id": "c0ffee", "strategy": "rag", "path": "retrieve", "tool": None,
        "sources": [{"id": "a", "title": "Lesson 3.1", "source_type": "md"}],
        "query": "how do nodes talk?", "topic": "ros2", "timings": {"total_ms": 812.4}})


class ConversationMessage(BaseModel):
    """A turn; assistant turns also carry the turn's strategy, path, tool and sources."""

    role: str
    content: str
    created_at: str


class ConversationOut(BaseModel):
    id: str
    collection: str | None
    topic: str
    created_at: str
    updated_at: str
    messages: list[ConversationMessage]

    model_config = example({
        "id": "c0ffee", "collection": "docs", "topic": "ros2", "created_at": TS,
        "updated_at": TS,
        "messages": [{"role": "user", "content": "how do nodes talk?", "created_at": TS,
                      "query": "how do nodes talk?"},
                     {"role": "assistant", "content": "Over topics.", "created_at": TS,
                      "strategy": "rag", "sources": []}]})


class ChecklistStepOut(BaseModel):
    order: int
    priority: Literal["high", "medium", "low"]
    action: str
    rationale: str
    source: str


class ChecklistOut(BaseModel):
    title: str
    steps: list[ChecklistStepOut]
    source_runbooks: list[str]
    fallback: bool = Field(description="True when the model's answer was unusable and a "
                           "generic checklist was returned.")

    model_config = example({
        "title": "High CPU on web-1",
        "steps": [{"order": 1, "priority": "high", "action": "Find the busiest process",
                   "rationale": "runbook cpu.md", "source": "runbooks/cpu.md"}],
        "source_runbooks": ["runbooks/cpu.md"], "fallback": False})
