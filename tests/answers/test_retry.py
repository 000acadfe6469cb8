"""The shared retry layer: what is transient, Retry-After, and no retries stacked above it."""

from __future__ import annotations

import httpx2
import openai
import pytest

from ragline.errors import ProviderError
from ragline.providers.retry import Retrier, RetryPolicy, classify, was_retried
from ragline.services.ingestion.ingest_pipeline import _retryable


def status_error(status: int, retry_after: str | None = None) -> openai.APIStatusError:
    headers = {"retry-after": retry_after} if retry_after else {}
    req = httpx2.Request("POST", "http://x/v1/chat/completions")
    resp = httpx2.Response(status, headers=headers, text="body", request=req)
    return openai.APIStatusError("e", response=resp, body=None)


def test_classification() -> None:
    for status in (408, 429, 500, 502, 503, 504):
        f = classify(status_error(status))
        assert f is not None and f.transient, status
    for status in (400, 401, 403, 404, 422):
        f = classify(status_error(status))
        assert f is not None and not f.transient, status
    f = classify(status_error(429, "7"))
    assert f is not None and f.retry_after == 7.0
    conn = openai.APIConnectionError(request=httpx2.Request("POST", "http://x"))
    assert classify(conn).transient  # type: ignore[union-attr]
    assert classify(ValueError("not ours")) is None


def test_retrier_retries_transient_only_and_marks_the_error() -> None:
    waits: list[float] = []
    r = Retrier(RetryPolicy(max_retries=3, backoff_base=1, backoff_max=5), "call")
    r.sleep = waits.append
    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise status_error(503) if len(calls) == 1 else status_error(429, "60")
        return "ok"

    assert r.call(flaky) == "ok" and waits == [1, 5]  # backoff, then Retry-After capped
    with pytest.raises(ProviderError) as err:
        r.call(lambda: (_ for _ in ()).throw(status_error(401)))
    assert err.value.details == {"status": 401, "transient": False, "attempts": 1}
    assert was_retried(err.value)
    with pytest.raises(ValueError):  # not an HTTP failure: untouched
        r.call(lambda: (_ for _ in ()).throw(ValueError("bug")))


def test_ingestion_does_not_retry_what_the_layer_handled() -> None:
    handled = ProviderError("failed after 6 attempt(s)",
                            details={"transient": True, "attempts": 6})
    assert not _retryable(handled)
    assert not _retryable(ProviderError("401", details={"transient": False, "attempts": 1}))
    assert _retryable(ProviderError("a provider without the shared layer"))
