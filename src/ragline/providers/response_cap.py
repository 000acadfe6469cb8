"""A cap on the bytes a provider reads from one answer (issue 32).

An embedding or chat endpoint is a server someone configured, not necessarily one that
behaves: an answer that never ends, or a huge one, was read whole into memory by the
HTTP client before the provider looked at it. The providers that read answers over HTTP
(the OpenAI-compatible and Gemini embedders, the OpenAI-compatible chat model) send
their requests through :class:`CappedTransport` / :class:`AsyncCappedTransport`, which
wrap the client's transport:

* requests ask for ``Accept-Encoding: identity``, so the bytes counted are the bytes
  the client keeps; an answer compressed anyway (its decoded size could not be bounded)
  is refused;
* an answer whose ``Content-Length`` passes the cap is refused before its body is read;
* any other answer is counted as it streams in, and refused the moment the count passes
  the cap: memory stays within the cap and one network read.

Refusals are :class:`~ragline.errors.ProviderError` (502 to callers), never retried,
naming the provider option ``max_response_bytes``. The transports are httpx2's public
transport API (the ``openai`` SDK's HTTP library), so the SDK's own requests (chat
streams included) go through them; proxies from the environment are not used (a proxy
transport would read the answer past the cap).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx2

from ragline.errors import ProviderError

IDENTITY = frozenset({"", "identity"})


def too_large(what: str, limit: int, seen: str) -> ProviderError:
    return ProviderError(f"{what} answered more than {limit} bytes ({seen}); refused "
                         "(provider option max_response_bytes)",
                         details={"transient": False, "limit": limit})


def _check_head(response: httpx2.Response, what: str, limit: int) -> None:
    encoding = response.headers.get("content-encoding", "").strip().lower()
    if encoding not in IDENTITY:
        raise ProviderError(f"{what} answered with Content-Encoding {encoding!r} although "
                            "'identity' was asked: its decoded size cannot be bounded; refused",
                            details={"transient": False})
    declared = response.headers.get("content-length", "").strip()
    if declared.isdigit() and int(declared) > limit:
        raise too_large(what, limit, f"Content-Length {declared}")


def _with_stream(response: httpx2.Response, request: httpx2.Request,
                 stream: httpx2.SyncByteStream | httpx2.AsyncByteStream) -> httpx2.Response:
    """``response`` (status, headers, extensions) with its body read through ``stream``."""
    return httpx2.Response(response.status_code, headers=response.headers, stream=stream,
                           extensions=response.extensions, request=request)


class _Count:
    def __init__(self, what: str, limit: int) -> None:
        self.what, self.limit, self.seen = what, limit, 0

    def add(self, chunk: bytes) -> bytes:
        self.seen += len(chunk)
        if self.seen > self.limit:
            raise too_large(self.what, self.limit, f"{self.seen} bytes read so far")
        return chunk


class _CappedStream(httpx2.SyncByteStream):
    def __init__(self, inner: httpx2.SyncByteStream, count: _Count) -> None:
        self._inner, self._count = inner, count

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._inner:
            yield self._count.add(chunk)

    def close(self) -> None:
        self._inner.close()


class _AsyncCappedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, count: _Count) -> None:
        self._inner, self._count = inner, count

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            yield self._count.add(chunk)

    async def aclose(self) -> None:
        await self._inner.aclose()


class CappedTransport(httpx2.BaseTransport):
    """``inner`` (default: a plain :class:`httpx2.HTTPTransport`) with every answer capped
    at ``limit`` bytes; ``what`` names the endpoint in refusals."""

    def __init__(self, what: str, limit: int, inner: httpx2.BaseTransport | None = None
                 ) -> None:
        self.what, self.limit = what, limit
        self._inner = inner if inner is not None else httpx2.HTTPTransport()

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        request.headers["Accept-Encoding"] = "identity"
        response = self._inner.handle_request(request)
        try:
            _check_head(response, self.what, self.limit)
        except ProviderError:
            response.close()
            raise
        assert isinstance(response.stream, httpx2.SyncByteStream)
        count = _Count(self.what, self.limit)
        return _with_stream(response, request, _CappedStream(response.stream, count))

    def close(self) -> None:
        self._inner.close()


class AsyncCappedTransport(httpx2.AsyncBaseTransport):
    """:class:`CappedTransport` for async clients."""

    def __init__(self, what: str, limit: int, inner: httpx2.AsyncBaseTransport | None = None
                 ) -> None:
        self.what, self.limit = what, limit
        self._inner = inner if inner is not None else httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        request.headers["Accept-Encoding"] = "identity"
        response = await self._inner.handle_async_request(request)
        try:
            _check_head(response, self.what, self.limit)
        except ProviderError:
            await response.aclose()
            raise
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        count = _Count(self.what, self.limit)
        return _with_stream(response, request, _AsyncCappedStream(response.stream, count))

    async def aclose(self) -> None:
        await self._inner.aclose()
