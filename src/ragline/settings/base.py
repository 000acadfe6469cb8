"""The first half of the settings' fields (storage, scale-out, limits, background
builds, bulk writes, hardening) and the helpers their defaults use; ``ragline.settings``
is the one public module (``Settings`` completes these fields)."""

from __future__ import annotations

import os
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
)
from pydantic_settings import (
    BaseSettings,
)

CONFIG_ENV = "RAGLINE_CONFIG"
DEFAULT_CONFIG_FILE = Path("ragline.toml")
# The TOML file the Settings being built read (see load_settings); a context
# variable, not a global, so concurrent tests building settings do not mix.
_config_file: ContextVar[Path | None] = ContextVar("ragline_config_file", default=None)


ASIDE_SECTIONS: tuple[str, ...] = (
    "Try With AI", "Exercise", "Exercises", "Checkpoint", "Key Concepts Checkpoint",
    "Mastery Gate", "Quiz", "Self-Assessment", "Reflect",
    "Reflection", "Independent Practice", "Hands-On Challenge",
    "Hands-On Challenges", "Learning Objectives", "Learning Outcomes", "Prerequisites",
    "Navigation", "Next Steps", "What Comes Next?",
)
"""Default section titles (any heading level; a heading that starts with one, like
"Exercise: Add a camera", counts) of chunks that practise or frame a lesson rather than
teach it: the default of ``search_aside_sections`` (issue 36)."""


def _spec_frontmatter_defaults() -> dict[str, str | int | float | bool]:
    return {"proficiency_level": "A2", "hardware_tier": 1}


def _per_core(per: int, least: int, most: int) -> int:
    """A default that grows with the CPUs this process may use (2 cores: the values
    measured as best there; more cores: the batches and threads to fill them)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 2
    return max(least, min(most, per * cpus))


class PostgresCatalogOptions(BaseModel):
    """Where the shared catalog and job queue live when ``catalog = "postgres"``
    (docs/scaling.md): typed here, like a provider's own Config, so a typo in
    ``RAGLINE_CATALOG_OPTIONS`` is an error and the DSN is a secret."""

    model_config = ConfigDict(extra="forbid")

    dsn: SecretStr | None = Field(None, description="libpq URI or key/value DSN of the "
                                  "PostgreSQL that holds the catalog and the job queue.")
    db_schema: str = Field("ragline", pattern=r"^[a-z_][a-z0-9_]{0,62}$",
                           description="Schema of the catalog tables (migrated on start).")
    pool_size: int = Field(8, ge=1, le=256, description="Connections per process.")
    job_lease_s: float = Field(
        30.0, gt=0, description="A worker holds a job this long without a heartbeat; after "
        "that (a killed worker) another worker takes it again.")
    job_max_attempts: int = Field(3, ge=1, description="Claims of one job before it fails.")
    worker_poll_s: float = Field(0.5, gt=0, description="How often an idle worker looks "
                                 "for a queued job.")


class StorageSettings(BaseSettings):
    """Storage, scale-out, limits, background builds, bulk writes and hardening
    (the fields; their environment prefix and sources are ``Settings``'s)."""

    # --- storage -----------------------------------------------------------
    data_dir: Path = Field(Path("./data"), description="Where the catalog and shards live.")
    store: str = Field("qdrant-edge", description="Vector store provider name (registry "
                       "group ragline.stores).")
    store_options: dict[str, Any] = Field(
        default_factory=dict, description="The store provider's own config (its JSON Schema: "
        "GET /api/providers), e.g. RAGLINE_STORE_OPTIONS='{\"hnsw_ef\": 256}'. The data "
        "directory's 'collections' folder is filled in as 'path' for embedded stores.")
    default_tenant: str = "default"

    # --- scale-out: a shared catalog and job queue (issue 14; docs/scaling.md) ---------
    catalog: Literal["sqlite", "postgres"] = Field(
        "sqlite", description="'sqlite': the catalog and in-process jobs in the data "
        "directory (one process). 'postgres': collections, ingestion state, jobs, keys and "
        "conversations in PostgreSQL (catalog_options), shared by any number of API "
        "processes and `ragline worker` processes; needs a server store (pgvector, qdrant).")
    catalog_options: PostgresCatalogOptions = Field(
        default_factory=PostgresCatalogOptions,
        description="The PostgreSQL catalog's options, e.g. RAGLINE_CATALOG_OPTIONS="
        "'{\"dsn\": \"postgresql://rag:pw@db/rag\"}'.")

    # --- limits ------------------------------------------------------------
    max_documents_per_request: int = 50_000
    list_default_limit: int = 100
    list_max_limit: int = 1000
    filter_max_depth: int = 8
    filter_max_conditions: int = 256
    filter_max_in_values: int = 1024

    # --- scale: indexes built in the background (issue 18; docs/storage.md) -------------
    background_indexing: bool = Field(
        True, description="Build HNSW/payload indexes of growing collections in the "
        "background (a copy optimized in a subprocess, then swapped in).")
    indexing_min_points: int = Field(
        20_000, ge=1, description="A build starts once this many points are unindexed ...")
    indexing_growth: float = Field(
        0.05, ge=0.0, description="... and they are at least this fraction of the indexed "
        "points (every build copies the whole shard).")
    indexing_interval_s: float = Field(
        5.0, gt=0, description="How often shards are checked for a due build.")

    # --- bulk writes (issue 18): the server process's garbage collector --------------
    gc_gen0_threshold: int = Field(
        50_000, ge=0, description="Python's first-generation garbage-collection threshold "
        "in 'ragline serve' processes (Python's default: 700), which also freeze the objects "
        "made at start-up out of later collections. A batch of 1,000 parsed 384-d documents "
        "set off ~13 collections that each walked its vectors (~9 ms a batch, plus a 100-200 "
        "ms full collection every ~15 batches); 0 keeps Python's defaults.")

    # --- hardening (issue 10): limits checked before work is done ----------------
    max_request_bytes: int = Field(
        64 * 1024 * 1024, ge=1024, description="Largest request body (uploads and the webhook "
        "have their own limits); checked on Content-Length and while reading.")
    webhook_max_bytes: int = Field(
        25 * 1024 * 1024, ge=1024, description="Largest GitHub webhook body (GitHub caps "
        "payloads at 25 MB), checked before the signature.")
    max_json_depth: int = Field(
        64, ge=8, le=1000, description="Deepest nesting of lists and objects in a JSON "
        "request body (embedding arrays aside); deeper is a 400 naming the field.")
    max_document_chars: int = Field(
        1_000_000, ge=1, description="Longest document text accepted by the documents API.")
    max_query_chars: int = Field(
        20_000, ge=1, description="Longest search query text.")
    max_metadata_bytes: int = Field(
        65_536, ge=64, description="Largest metadata object of one document (as JSON).")
    disk_reserve_bytes: int = Field(
        256 * 1024 * 1024, ge=0, description="Free space every write must leave on the data "
        "directory's filesystem (opening shards and the largest write need it); below it "
        "writes answer 507 and reads go on. 0 disables the check.")
    max_embedding_dimension: int = Field(
        4096, ge=1, description="Largest pre-computed embedding accepted (a larger one would "
        "lock a collection to that size).")
