"""The one retry layer for outbound model calls (embeddings and chat).

Why one layer: retries used to nest (the ingestion pipeline retried around the
embedder's own retries, 30 HTTP calls for one failing batch) and a 401 was retried
like a 503. Here a failure is classified once, at the provider boundary:

* transient (connection errors, timeouts, 408/409/425/429, 5xx) -> retried with
  exponential backoff, the wait taken from ``Retry-After`` when the server sends one,
  capped by ``backoff_max``;
* anything else (400, 401, 403, 404, 422...) -> raised at once.

What escapes is always a :class:`ProviderError` whose ``details["transient"]`` says
which kind it was and ``details["attempts"]`` how many calls were made, so callers
above (the ingestion pipeline) never retry again what was already retried here.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import httpx
import httpx2

from ragline.client.transport import parse_retry_after
from ragline.errors import ProviderError

retry_after_seconds = parse_retry_after  # one Retry-After parser (ragline.client's)

log = logging.getLogger(__name__)

T = TypeVar("T")

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
"""HTTP statuses worth another try; every other 4xx is the caller's mistake."""


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 5
    backoff_base: float = 0.5
    backoff_max: float = 30.0

    def wait(self, attempt: int, retry_after: float | None) -> float:
        """Seconds before retry number ``attempt + 1`` (attempt counts from 0)."""
        w = retry_after if retry_after is not None else self.backoff_base * (2**attempt)
        return min(w, self.backoff_max)


@dataclass
class Failure:
    """One failed call, classified."""

    transient: bool
    problem: str
    status: int | None = None
    retry_after: float | None = None


def classify(exc: BaseException) -> Failure | None:
    """A Failure for errors of the HTTP/SDK layer; None for anything else (re-raised).

    The OpenAI SDK is looked up, not imported: an error of the SDK means a provider
    loaded it, and importing it here cost every process ~0.9 s at start (every CLI
    command, every server), whether or not an OpenAI-compatible provider was used."""
    sdk = sys.modules.get("openai")
    if sdk is not None and isinstance(exc, sdk.APIStatusError):
        status = exc.status_code
        body = exc.response.text[:300] if exc.response is not None else ""
        return Failure(status in RETRY_STATUS, f"HTTP {status}: {body}", status,
                       parse_retry_after(exc.response.headers.get("retry-after")))
    if sdk is not None and isinstance(exc, sdk.APIConnectionError):  # and APITimeoutError
        cause = exc.__cause__ or exc
        return Failure(True, f"{type(cause).__name__}: {cause}")
    if isinstance(exc, httpx.TransportError | httpx2.TransportError):
        return Failure(True, f"{type(exc).__name__}: {exc}")
    return None


class Retrier:
    """Runs a call under a policy. ``scrub`` removes secrets from messages and logs;
    ``sleep``/``asleep`` are replaceable so tests record waits instead of waiting."""

    def __init__(self, policy: RetryPolicy, what: str, *,
                 scrub: Callable[[str], str] = lambda s: s) -> None:
        self.policy = policy
        self.what = what
        self.scrub = scrub
        self.sleep: Callable[[float], object] = time.sleep
        self.asleep: Callable[[float], Awaitable[object]] = asyncio.sleep

    def _give_up(self, failure: Failure, attempts: int) -> ProviderError:
        problem = self.scrub(failure.problem)
        if failure.transient:
            msg = f"{self.what} failed after {attempts} attempt(s) ({problem})"
        else:
            msg = f"{self.what} failed ({problem})"
        return ProviderError(msg, details={"status": failure.status,
                                           "transient": failure.transient,
                                           "attempts": attempts})

    def _next_wait(self, failure: Failure, attempt: int, attempts: int) -> float | None:
        if not failure.transient or attempt == attempts - 1:
            return None
        wait = self.policy.wait(attempt, failure.retry_after)
        log.warning("%s failed (%s); retry %d/%d in %.2fs", self.what,
                    self.scrub(failure.problem)[:120], attempt + 1, attempts - 1, wait)
        return wait

    def call(self, fn: Callable[[], T], retries: int | None = None) -> T:
        attempts = (self.policy.max_retries if retries is None else retries) + 1
        for attempt in range(attempts):
            try:
                return fn()
            except Exception as exc:
                failure = classify(exc)
                if failure is None:
                    raise
                wait = self._next_wait(failure, attempt, attempts)
                if wait is None:
                    raise self._give_up(failure, attempt + 1) from None
            self.sleep(wait)
        raise AssertionError("unreachable")

    async def acall(self, fn: Callable[[], Awaitable[T]], retries: int | None = None) -> T:
        attempts = (self.policy.max_retries if retries is None else retries) + 1
        for attempt in range(attempts):
            try:
                return await fn()
            except Exception as exc:
                failure = classify(exc)
                if failure is None:
                    raise
                wait = self._next_wait(failure, attempt, attempts)
                if wait is None:
                    raise self._give_up(failure, attempt + 1) from None
            await self.asleep(wait)
        raise AssertionError("unreachable")


def was_retried(exc: BaseException) -> bool:
    """True for a ProviderError this layer already retried or judged permanent: callers
    must not retry it again."""
    return isinstance(exc, ProviderError) and "transient" in exc.details
