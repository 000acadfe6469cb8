"""The client's retry layer and its one HTTP → error mapping, with scripted transports
(the live-server tests cover real answers; these make the transient failures happen on
cue: 429 with Retry-After, 503s, proxy 502/504, refused connections, read timeouts)."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
import pytest

from ragline import errors
from ragline.api.errors import error_body
from ragline.client import AsyncClient, Client, RetryPolicy, error_from_response
from ragline.client.transport import _tree

FAST = RetryPolicy(attempts=3, backoff=0.01, max_backoff=0.02)


def scripted(*answers: httpx.Response | Exception) -> tuple[list[httpx.Request],
                                                            Callable[[httpx.Request],
                                                                     httpx.Response]]:
    seen: list[httpx.Request] = []
    queue = list(answers)

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(answer, Exception):
            raise answer
        return answer
    return seen, handler


def err(status: int, code: str, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(status, json=error_body(status, code, f"{code}!"), headers=headers)


OK = httpx.Response(200, json={"status": "healthy"})
COLLECTIONS = httpx.Response(200, json={"collections": [], "count": 0})


def client(handler: Callable[[httpx.Request], httpx.Response]) -> Client:
    return Client("http://rl.test", retry=FAST, transport=httpx.MockTransport(handler))


def test_429_waits_for_retry_after_then_succeeds() -> None:
    seen, handler = scripted(err(429, "too_many_requests", {"Retry-After": "0.3"}), OK)
    t0 = time.monotonic()
    assert client(handler).health().status == "healthy"
    assert len(seen) == 2 and time.monotonic() - t0 >= 0.3


def test_429_after_every_attempt_raises_too_many_requests() -> None:
    seen, handler = scripted(err(429, "too_many_requests", {"Retry-After": "0"}))
    with pytest.raises(errors.TooManyRequests) as exc:
        client(handler).health()
    assert len(seen) == 3 and exc.value.retry_after == 0


def test_503_retried_unless_it_cannot_go_away() -> None:
    seen, handler = scripted(err(503, "store_unavailable"), OK)
    assert client(handler).health().status == "healthy" and len(seen) == 2
    seen, handler = scripted(err(503, "model_not_loaded"))
    with pytest.raises(errors.ModelNotLoaded):
        client(handler).rerank("q", [{"id": 1, "text": "t"}])
    assert len(seen) == 1


def test_proxy_502_504_retried_only_when_idempotent() -> None:
    seen, handler = scripted(httpx.Response(502, text="bad gateway"), COLLECTIONS)
    assert client(handler).list_collections() == [] and len(seen) == 2
    seen, handler = scripted(httpx.Response(504, text="gateway timeout"), COLLECTIONS)
    with pytest.raises(errors.ServiceUnavailable) as exc:
        client(handler).create_collection("c")  # a POST that may have been done
    assert len(seen) == 1 and exc.value.status == 504 and "504" in exc.value.message


def test_refused_connections_retried_then_server_unreachable() -> None:
    seen, handler = scripted(httpx.ConnectError("refused"))
    with pytest.raises(errors.ServerUnreachable) as exc:
        client(handler).create_collection("c")
    assert len(seen) == 3 and exc.value.code == "server_unreachable"


def test_read_timeout_is_not_retried() -> None:
    seen, handler = scripted(httpx.ReadTimeout("slow"))
    with pytest.raises(errors.ServerUnreachable) as exc:
        client(handler).list_collections()
    assert len(seen) == 1 and "timed out" in exc.value.message


def test_key_and_tenant_headers_are_sent() -> None:
    seen, handler = scripted(COLLECTIONS)
    Client("http://rl.test", api_key="rl_k", tenant="t1",
           transport=httpx.MockTransport(handler)).list_collections()
    assert seen[0].headers["authorization"] == "Bearer rl_k"
    assert seen[0].headers["x-ragline-tenant"] == "t1"


async def test_async_client_retries_the_same_way() -> None:
    seen, handler = scripted(err(429, "too_many_requests", {"Retry-After": "0"}),
                             httpx.ConnectError("refused"),
                             httpx.Response(200, json={"status": "healthy"}))
    async with AsyncClient("http://rl.test", retry=FAST,
                           transport=httpx.MockTransport(handler)) as rl:
        assert (await rl.health()).status == "healthy"
    assert len(seen) == 3


@pytest.mark.parametrize("cls", [c for c in _tree() if c.__module__ == "ragline.errors"],
                         ids=lambda c: c.__name__)
def test_every_error_of_the_tree_comes_back_as_itself(cls: type[errors.RaglineError]) -> None:
    exc = error_from_response(err(cls.status, cls.code))
    assert type(exc) is cls
    assert (exc.status, exc.code, exc.message) == (cls.status, cls.code, f"{cls.code}!")


def test_unknown_codes_fall_back_on_the_status() -> None:
    assert type(error_from_response(err(404, "no_such_code"))) is errors.NotFound
    odd = error_from_response(err(405, "method_not_allowed"))
    assert type(odd) is errors.RaglineError and odd.status == 405
    plain = error_from_response(httpx.Response(500, text="<html>oops</html>"))
    assert plain.status == 500 and "500" in plain.message
