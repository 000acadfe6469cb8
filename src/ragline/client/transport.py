"""What the sync and async clients share: one request description, one retry policy and
one mapping from HTTP answers onto the ``ragline.errors`` tree.

The server puts a stable ``error`` code in every error body (see
``ragline.api.errors``); the client turns that code back into the same
``RaglineError`` subclass the server raised, so code written against the
``Ragline`` facade and code written against a remote server catch the same
exceptions. An unknown code falls back on the status (a 404 is a ``NotFound``);
an unknown status is a plain ``RaglineError`` carrying it.

Retries (:class:`RetryPolicy`): a request is sent again only when doing so
cannot do harm and may help:

* the connection could not be made (nothing was sent), any method;
* 429 (the server refused before doing anything), any method, after the
  ``Retry-After`` the server asked for (capped by ``max_retry_after``);
* 503 (the server refused: starting, store unavailable), any method, except the
  503s that will not go away by waiting (no model loaded, no LLM configured);
* 502 and 504 (a proxy in between gave up; the server may have done the work),
  only for requests marked idempotent (reads, PUT, DELETE, search, rerank).

A read timeout is never retried: the server is working, and asking again only
adds load. Transport failures that survive the retries become
:class:`~ragline.errors.ServerUnreachable`.
"""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import httpx

from ragline import errors
from ragline.errors import RaglineError, ServerUnreachable

T = TypeVar("T")

TENANT_HEADER = "X-Ragline-Tenant"
PERMANENT_503 = frozenset({"model_not_loaded", "llm_not_configured"})


@dataclass
class Call(Generic[T]):
    """One API operation: what to send and how to read the answer."""

    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    params: dict[str, Any] | None = None
    json: Any = None
    files: dict[str, Any] | None = None
    idempotent: bool = False
    headers: dict[str, str] = field(default_factory=dict)

    def request_kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {}
        if self.params:
            kw["params"] = {k: v for k, v in self.params.items() if v is not None}
        if self.json is not None:
            kw["json"] = self.json
        if self.files is not None:
            kw["files"] = self.files
        if self.headers:
            kw["headers"] = self.headers
        return kw


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry transient failures (see the module docstring)."""

    attempts: int = 3
    backoff: float = 0.25
    max_backoff: float = 4.0
    max_retry_after: float = 30.0

    def delay(self, attempt: int, call: Call[Any], response: httpx.Response | None,
              exc: BaseException | None) -> float | None:
        """Seconds to wait before attempt ``attempt + 1``, or None to stop here."""
        if attempt >= self.attempts:
            return None
        backoff = min(self.max_backoff, self.backoff * 2.0 ** (attempt - 1))
        if exc is not None:
            return backoff if _unsent(exc) else None
        assert response is not None
        status = response.status_code
        if status == 429:
            asked = retry_after(response)
            return backoff if asked is None else min(asked, self.max_retry_after)
        if status == 503:
            if _code(response) in PERMANENT_503:
                return None
            return min(retry_after(response) or backoff, self.max_retry_after)
        if status in (502, 504) and call.idempotent:
            return backoff
        return None


def _unsent(exc: BaseException) -> bool:
    """Failures where the request never reached the server: safe to send again."""
    return isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout)


def retry_after(response: httpx.Response) -> float | None:
    """``Retry-After`` of an answer as seconds, None when absent or unreadable."""
    return parse_retry_after(response.headers.get("retry-after"))


def parse_retry_after(value: str | None) -> float | None:
    """``Retry-After`` (delta-seconds or an HTTP date) as seconds; None if absent or bad."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0.0, when - time.time())


def _body(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _code(response: httpx.Response) -> str | None:
    code = _body(response).get("error")
    return code if isinstance(code, str) else None


def _tree() -> Iterator[type[RaglineError]]:
    stack: list[type[RaglineError]] = [RaglineError]
    while stack:
        cls = stack.pop()
        yield cls
        stack.extend(cls.__subclasses__())


def _by_code() -> dict[str, type[RaglineError]]:
    return {cls.code: cls for cls in _tree() if cls.__module__ == errors.__name__}


BY_STATUS: dict[int, type[RaglineError]] = {
    400: errors.InvalidInput, 401: errors.AuthenticationError, 403: errors.Forbidden,
    404: errors.NotFound, 409: errors.Conflict, 413: errors.PayloadTooLarge,
    422: errors.InvalidInput, 429: errors.TooManyRequests, 502: errors.ProviderError,
    503: errors.ServiceUnavailable, 504: errors.ServiceUnavailable,
    507: errors.InsufficientStorage,
}


def error_from_response(response: httpx.Response) -> RaglineError:
    """The ``RaglineError`` an error answer stands for (the one HTTP → error mapping)."""
    body = _body(response)
    status = response.status_code
    code = body.get("error")
    cls = _by_code().get(code) if isinstance(code, str) else None
    if cls is None or cls.status != status:  # a proxy's 502, a code this client lacks
        cls = BY_STATUS.get(status, RaglineError)
    message = body.get("message") or body.get("detail") or \
        f"HTTP {status} {response.reason_phrase}".strip()
    if not isinstance(message, str):
        message = str(message)
    details = {k: v for k, v in body.items() if k not in ("detail", "message", "error")}
    details["status"] = status
    if isinstance(code, str):
        details["code"] = code
    exc = cls.__new__(cls)
    RaglineError.__init__(exc, message, details=details)
    if cls.status != status:  # e.g. 405: keep what the server said on the instance
        exc.status = status
    if isinstance(exc, errors.TooManyRequests):
        asked = retry_after(response)
        exc.retry_after = 5 if asked is None else math.ceil(asked)
    if isinstance(exc, errors.CollectionNotFound):
        exc.name = ""
    return exc


def unreachable(base_url: str, exc: BaseException) -> ServerUnreachable:
    """A transport failure after the retries, named without the request's secrets."""
    kind = "timed out" if isinstance(exc, httpx.TimeoutException) else "could not be reached"
    return ServerUnreachable(f"The ragline server at {base_url} {kind} "
                             f"({type(exc).__name__})")


def parsed(call: Call[T], response: httpx.Response) -> T:
    """The answer read into its model; a body this client cannot read is a ProviderError
    (a server of another version, or something else answering on that address)."""
    try:
        return call.parse(response)
    except (ValueError, KeyError, TypeError) as exc:  # pydantic's ValidationError included
        raise errors.ProviderError(f"Unexpected answer to {call.method} {call.path}: "
                                   f"{type(exc).__name__}: {str(exc)[:300]}") from exc


def check(response: httpx.Response) -> httpx.Response:
    if response.status_code >= 400:
        raise error_from_response(response)
    return response


def auth_headers(api_key: str | None, tenant: str | None) -> dict[str, str]:
    headers: dict[str, str] = {}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    if tenant:
        headers[TENANT_HEADER] = tenant
    return headers
