"""The one exception hierarchy of ragline.

Every error a caller can cause or observe is one of these, so the HTTP layer
turns them into responses in a single handler and the CLI prints them the same
way. Storage and services raise these; they never import FastAPI.

::

    RaglineError                      500  internal_error
    ├── InvalidInput                  400  invalid_request
    │   ├── FilterError               400  invalid_filter
    │   └── ConfigError               400  invalid_config
    ├── AuthenticationError           401  unauthorized
    ├── Forbidden                     403  forbidden
    ├── NotFound                      404  not_found
    │   ├── CollectionNotFound        404  collection_not_found
    │   ├── DocumentNotFound          404  document_not_found
    │   ├── SourceNotFound            404  source_not_found
    │   ├── ProviderNotFound          404  provider_not_found
    │   ├── ConnectionNotFound        404  connection_not_found
    │   └── ModelNotFound             404  model_not_found
    ├── Conflict                      409  conflict
    │   ├── CollectionExists          409  collection_exists
    │   ├── ShardGone                 409  shard_gone
    │   ├── DataDirInUse              409  data_dir_in_use
    │   ├── ConnectionExists          409  connection_exists
    │   └── DataDirNotEmpty           409  data_dir_not_empty
    ├── PayloadTooLarge               413  payload_too_large
    ├── TooManyRequests               429  too_many_requests
    ├── ServiceUnavailable            503  service_unavailable
    │   ├── StoreUnavailable          503  store_unavailable
    │   ├── CatalogUnavailable        503  catalog_unavailable
    │   ├── ModelNotLoaded            503  model_not_loaded
    │   ├── IngestCancelled           503  ingestion_cancelled
    │   ├── LLMNotConfigured          503  llm_not_configured
    │   └── ServerUnreachable         503  server_unreachable
    ├── InsufficientStorage           507  insufficient_storage
    ├── ProviderError                 502  provider_error
    ├── StoreError                    500  store_error
    ├── ModelLoadError                500  model_load_failed
    ├── ModelExportError              500  model_export_failed
    ├── RerankError                   500  rerank_failed
    └── DataFormatError               500  data_format_unsupported

``status`` is the HTTP status and ``code`` a stable machine-readable name;
``message`` is what a person reads and is returned verbatim (the specs fix
several messages exactly), so it must never carry a secret or a server path.
Anything that is not a ``RaglineError`` is a bug: the HTTP layer answers it
with a 500 whose body carries only an error id that is also in the log.
``tests/test_error_tree.py`` fails when a subclass is missing from the drawing
above or drawn with another status or code.
"""

from __future__ import annotations

from typing import Any


class RaglineError(Exception):
    """Base of every ragline error."""

    status: int = 500
    code: str = "internal_error"

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"


class InvalidInput(RaglineError):
    status = 400
    code = "invalid_request"


class FilterError(InvalidInput):
    code = "invalid_filter"


class AuthenticationError(RaglineError):
    status = 401
    code = "unauthorized"


class Forbidden(RaglineError):
    """Authenticated, but the role does not allow this operation (never used to hide a
    record of another tenant: that is a 404)."""

    status = 403
    code = "forbidden"


class NotFound(RaglineError):
    status = 404
    code = "not_found"


class CollectionNotFound(NotFound):
    code = "collection_not_found"

    def __init__(self, name: str, *, message: str | None = None) -> None:
        super().__init__(message or f"Collection '{name}' not found")
        self.name = name


class DocumentNotFound(NotFound):
    code = "document_not_found"


class ProviderNotFound(NotFound):
    """No registered provider has this name (of this kind)."""

    code = "provider_not_found"


class ConnectionNotFound(NotFound):
    """No named connection has this id; the message lists the known ones."""

    code = "connection_not_found"


class ModelNotFound(NotFound):
    """``/v1/chat/completions`` named a model that is not one of the caller's."""

    code = "model_not_found"


class SourceNotFound(NotFound):
    """No ingested source with that id in the caller's tenant (another tenant's is a 404
    too)."""

    code = "source_not_found"


class Conflict(RaglineError):
    status = 409
    code = "conflict"


class CollectionExists(Conflict):
    code = "collection_exists"


class ShardGone(Conflict):
    """The shard an operation started on was dropped (emptied/deleted) under it."""

    code = "shard_gone"


class DataDirInUse(Conflict):
    """Another ragline process holds the data directory (one process per directory)."""

    code = "data_dir_in_use"


class ConnectionExists(Conflict):
    code = "connection_exists"


class PayloadTooLarge(RaglineError):
    status = 413
    code = "payload_too_large"


class TooManyRequests(RaglineError):
    """A bounded queue or pool is full; ``retry_after`` seconds go to ``Retry-After``."""

    status = 429
    code = "too_many_requests"

    def __init__(self, message: str, *, retry_after: int = 5) -> None:
        super().__init__(message, details={"retry_after": retry_after})
        self.retry_after = retry_after


class InsufficientStorage(RaglineError):
    """Free disk space is below the reserve: refused before the store is touched, so a
    full disk never kills the process (issue 10)."""

    status = 507
    code = "insufficient_storage"


class ServiceUnavailable(RaglineError):
    status = 503
    code = "service_unavailable"


class StoreUnavailable(ServiceUnavailable):
    code = "store_unavailable"


class CatalogUnavailable(ServiceUnavailable):
    """The shared (PostgreSQL) catalog cannot be reached."""

    code = "catalog_unavailable"


class ModelNotLoaded(ServiceUnavailable):
    code = "model_not_loaded"


class LLMNotConfigured(ServiceUnavailable):
    """Generation asked for, but no chat model is configured (the message names the
    settings to set); everything else keeps working."""

    code = "llm_not_configured"


class IngestCancelled(ServiceUnavailable):
    """An ingestion run was asked to stop (shutdown); what was committed stays committed."""

    code = "ingestion_cancelled"


class ServerUnreachable(ServiceUnavailable):
    """A ragline server could not be reached (refused, reset, timed out): raised by
    ``ragline.client`` after its retries, never by a server about itself."""

    code = "server_unreachable"


class ProviderError(RaglineError):
    status = 502
    code = "provider_error"


class StoreError(RaglineError):
    status = 500
    code = "store_error"


class ModelLoadError(RaglineError):
    """A model was configured but could not be loaded; the server must not start."""

    code = "model_load_failed"


class ModelExportError(RaglineError):
    """``ragline models build-reranker`` could not load, export or verify a model."""

    code = "model_export_failed"


class RerankError(RaglineError):
    """The reranking model raised while scoring."""

    code = "rerank_failed"


class ConfigError(InvalidInput):
    """A configuration value (file, environment or flag) is invalid; names the key."""

    code = "invalid_config"


class DataDirNotEmpty(Conflict):
    """A restore was asked into a data directory that already holds data."""

    code = "data_dir_not_empty"


class DataFormatError(RaglineError):
    """The data directory was written by a newer ragline (or is damaged)."""

    code = "data_format_unsupported"
