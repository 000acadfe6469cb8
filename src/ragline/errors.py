"""The one exception hierarchy of ragline.

Every error a caller can cause or observe is one of these, so the HTTP layer
turns them into responses in a single handler and the CLI prints them the same
way. Storage and services raise these; they never import FastAPI.

::

    RaglineError                      500  internal_error
    ├── InvalidInput                  400  invalid_request
    │   └── FilterError               400  invalid_filter
    ├── AuthenticationError           401  unauthorized
    ├── NotFound                      404  not_found
    │   ├── CollectionNotFound        404  collection_not_found
    │   └── DocumentNotFound          404  document_not_found
    ├── Conflict                      409  conflict
    │   ├── CollectionExists          409  collection_exists
    │   └── ShardGone                 409  shard_gone
    ├── PayloadTooLarge               413  payload_too_large
    ├── TooManyRequests               429  too_many_requests  (Retry-After)
    ├── ServiceUnavailable            503  service_unavailable
    │   ├── StoreUnavailable          503  store_unavailable
    │   └── ModelNotLoaded            503  model_not_loaded
    ├── InsufficientStorage           507  insufficient_storage
    ├── ProviderError                 502  provider_error
    └── StoreError                    500  store_error

``status`` is the HTTP status and ``code`` a stable machine-readable name;
``message`` is what a person reads and is returned verbatim (the specs fix
several messages exactly).
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


class Conflict(RaglineError):
    status = 409
    code = "conflict"


class CollectionExists(Conflict):
    code = "collection_exists"


class ShardGone(Conflict):
    """The shard an operation started on was dropped (emptied/deleted) under it."""

    code = "shard_gone"


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


class ModelNotLoaded(ServiceUnavailable):
    code = "model_not_loaded"


class ProviderError(RaglineError):
    status = 502
    code = "provider_error"


class StoreError(RaglineError):
    status = 500
    code = "store_error"
