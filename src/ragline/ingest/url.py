"""Fetching a web page, text or PDF by URL (hermitAI ``POST /api/rag/ingest/url``).

Safety rules, all enforced here so no caller can forget one:

* only ``http`` and ``https``;
* every hop, redirects included, is resolved and checked by
  :mod:`ragline.ingest.netguard`, and the request goes to the checked address
  (the ``Host`` header and TLS SNI/verification still use the host name);
* redirects are followed by hand, at most ``max_redirects``;
* the body is read in a stream and abandoned past ``max_bytes``
  (:class:`PayloadTooLarge`), so a huge or endless response cannot fill memory;
* proxies from the environment are ignored (``trust_env=False``): a proxy
  would connect on our behalf to an address we never checked;
* one total deadline covers the whole fetch, connect, response headers and body,
  redirects included: a server trickling header lines (which no per-read timeout
  catches) has its socket shut down at the deadline (:class:`_Deadline`, through
  httpcore's public ``trace`` extension), so a fetch worker is never held longer.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import PurePosixPath

import httpx

from ragline.errors import InvalidInput, PayloadTooLarge
from ragline.ingest.budgets import DEFAULT_LIMITS, ParserLimits
from ragline.ingest.html import html_to_markdown
from ragline.ingest.loader import PARSERS, build_document
from ragline.ingest.markdown import parse_markdown
from ragline.ingest.metadata import merge_metadata, normalize_metadata
from ragline.ingest.netguard import Resolver, resolve_checked
from ragline.ingest.pdf import parse_pdf
from ragline.ingest.text import decode_bytes
from ragline.ingest.types import MetadataValue, ParsedContent, SourceDocument

DEFAULT_MAX_BYTES = 5 * 1024 * 1024
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
USER_AGENT = "ragline/0.1 (+https://github.com/ragline)"

ContentParser = Callable[[bytes, str, str | None, ParserLimits], ParsedContent]
"""``(body, final URL, charset, parser budgets) -> ParsedContent``."""


def _html(data: bytes, url: str, charset: str | None, limits: ParserLimits) -> ParsedContent:
    title, markdown = html_to_markdown(decode_bytes(data, url, charset), url=url, limits=limits)
    return ParsedContent(text=markdown, source_type="html", title=title, text_format="markdown")


def _plain(data: bytes, url: str, charset: str | None, limits: ParserLimits) -> ParsedContent:
    return ParsedContent(text=decode_bytes(data, url, charset).strip("\n"), source_type="txt")


def _markdown(data: bytes, url: str, charset: str | None, limits: ParserLimits) -> ParsedContent:
    return parse_markdown(data, url, limits=limits)


def _pdf(data: bytes, url: str, charset: str | None, limits: ParserLimits) -> ParsedContent:
    return parse_pdf(data, url, limits=limits)


CONTENT_PARSERS: dict[str, ContentParser] = {
    "text/html": _html,
    "application/xhtml+xml": _html,
    "text/plain": _plain,
    "text/markdown": _markdown,
    "text/x-markdown": _markdown,
    "application/pdf": _pdf,
}
"""Media type → parser for fetched bodies. Unknown types fall back to the URL's
extension in :data:`ragline.ingest.loader.PARSERS`."""


def canonical_url(url: str) -> str:
    """The URL as an id: scheme and host lower-cased, fragment and default port dropped."""
    return str(_parse(url))


def _parse(url: str | httpx.URL) -> httpx.URL:
    try:
        parsed = httpx.URL(url) if isinstance(url, str) else url
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        raise InvalidInput(f"invalid URL {url!r} ({exc})") from exc
    if parsed.scheme not in ("http", "https"):
        raise InvalidInput(f"only http and https URLs can be fetched, not {parsed.scheme!r}")
    if not parsed.host:
        raise InvalidInput(f"invalid URL {str(url)!r}: no host")
    return parsed.copy_with(fragment=None)  # never sent to the server


class _Deadline:
    """The fetch's total deadline, enforced on its sockets.

    httpx's timeouts bound each network wait, so a server sending a header line every
    few seconds is never timed out. Each connection's socket is registered when it is
    opened (httpcore's ``trace`` extension reports the new network stream) and, when
    the deadline passes, shut down: the blocked read returns at once and the fetch
    fails with "took longer than the total deadline"."""

    def __init__(self, seconds: float | None) -> None:
        self.at = None if seconds is None else time.monotonic() + seconds
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = None if seconds is None else threading.Timer(seconds, self._expire)
        if self._timer is not None:
            self._timer.daemon = True
            self._timer.start()

    def remaining(self, cap: float) -> float:
        return cap if self.at is None else max(0.1, min(cap, self.at - time.monotonic()))

    def trace(self, event: str, info: Mapping[str, object]) -> None:
        """httpcore's trace hook: note each new connection's socket."""
        if event != "connection.connect_tcp.complete":
            return
        stream = info.get("return_value")
        get_extra = getattr(stream, "get_extra_info", None)
        sock = get_extra("socket") if get_extra is not None else None
        if isinstance(sock, socket.socket):
            with self._lock:
                self._sockets.append(sock)
                late = self.expired
            if late:
                _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)

    def check(self, url: object) -> None:
        if self.expired or (self.at is not None and time.monotonic() > self.at):
            raise InvalidInput(f"fetching {url} took longer than the total deadline; giving up")

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already closed
        sock.shutdown(socket.SHUT_RDWR)


def _send(client: httpx.Client, url: httpx.URL, addresses: list[str],
          deadline: _Deadline) -> httpx.Response:
    """Open a streamed GET to the first checked address that accepts a connection."""
    headers = {"Host": url.netloc.decode("ascii"), "User-Agent": USER_AGENT}
    extensions: dict[str, object] = {"trace": deadline.trace}
    if url.scheme == "https":
        extensions["sni_hostname"] = url.host
    error: Exception | None = None
    for address in addresses:
        request = client.build_request(
            "GET", url.copy_with(host=address), headers=headers, extensions=extensions
        )
        try:
            return client.send(request, stream=True)
        except httpx.ConnectError as exc:
            deadline.check(url)
            error = exc
        except httpx.TimeoutException as exc:
            deadline.check(url)
            raise InvalidInput(f"timed out fetching {url}") from exc
        except httpx.HTTPError as exc:
            deadline.check(url)
            raise InvalidInput(f"could not fetch {url} ({exc})") from exc
    raise InvalidInput(f"could not connect to {url.host} ({error})")


def _read_capped(response: httpx.Response, max_bytes: int, deadline: _Deadline) -> bytes:
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise PayloadTooLarge(f"response is {declared} bytes; the limit is {max_bytes} bytes "
                              "(setting url_fetch_max_bytes)")
    body = bytearray()
    try:
        for piece in response.iter_bytes():
            body += piece
            deadline.check(response.url)  # a byte every few seconds adds up
            if len(body) > max_bytes:
                raise PayloadTooLarge(f"response exceeds the limit of {max_bytes} bytes "
                                      "(setting url_fetch_max_bytes)")
    except httpx.HTTPError as exc:
        deadline.check(response.url)
        raise InvalidInput(f"could not read {response.url} ({exc})") from exc
    deadline.check(response.url)  # the socket shut at the deadline can look like an end
    return bytes(body)


def _fetch(
    url: httpx.URL, *, allow_private: bool, timeout: float, max_bytes: int,
    max_redirects: int, resolver: Resolver | None, transport: httpx.BaseTransport | None,
    total_timeout: float | None = None,
) -> tuple[httpx.URL, httpx.Headers, bytes]:  # fmt: skip
    """Follow redirects by hand, checking each hop; return the final URL, headers and body.

    ``timeout`` bounds each network wait; ``total_timeout`` the whole fetch,
    connect, response headers and body, redirects included (a server dripping a byte
    every few seconds never trips a per-read timeout, issues 10 and 32).
    """
    deadline = _Deadline(total_timeout)
    try:
        for _ in range(max_redirects + 1):
            deadline.check(url)
            port = url.port or (443 if url.scheme == "https" else 80)
            addresses = resolve_checked(
                url.host, port, allow_private=allow_private, resolver=resolver
            )
            with httpx.Client(
                timeout=deadline.remaining(timeout), follow_redirects=False, trust_env=False,
                transport=transport,
            ) as client:
                response = _send(client, url, addresses, deadline)
                try:
                    location = response.headers.get("location")
                    if response.status_code in REDIRECT_STATUSES and location:
                        url = _parse(url.join(location))
                        continue
                    if response.status_code >= 400:
                        raise InvalidInput(
                            f"fetching {url} failed with HTTP {response.status_code}",
                            details={"status": response.status_code},
                        )
                    return url, response.headers, _read_capped(response, max_bytes, deadline)
                finally:
                    response.close()
        raise InvalidInput(f"too many redirects (more than {max_redirects}) fetching the URL")
    finally:
        deadline.cancel()


def fetch_url(
    url: str,
    *,
    allow_private: bool = False,
    timeout: float = 10.0,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_redirects: int = 5,
    source_id: str | None = None,
    defaults: Mapping[str, object] | None = None,
    resolver: Resolver | None = None,
    transport: httpx.BaseTransport | None = None,
    total_timeout: float | None = None,
    limits: ParserLimits = DEFAULT_LIMITS,
) -> SourceDocument:
    """Fetch ``url`` and parse it into a ``url`` :class:`SourceDocument`.

    HTML becomes Markdown (header-aware chunking applies), ``text/plain`` and
    ``text/markdown`` are kept as they are, PDFs keep their pages. The source id
    defaults to the canonical requested URL, so fetching it again updates the
    same source; ``metadata`` gains ``source_url`` (after redirects) and
    ``content_type``. ``limits`` are the parser budgets (HTML tags and nesting, PDF
    pages and text). ``resolver`` and ``transport`` exist for tests.

    Raises :class:`InvalidInput` (bad scheme, refused address, HTTP error,
    unsupported type, too many redirects) or :class:`PayloadTooLarge`.
    """
    requested = _parse(url)
    final, headers, body = _fetch(
        requested, allow_private=allow_private, timeout=timeout, max_bytes=max_bytes,
        max_redirects=max_redirects, resolver=resolver, transport=transport,
        total_timeout=total_timeout,
    )  # fmt: skip
    if not body.strip():
        raise InvalidInput(f"{final} returned an empty body")
    media_type, _, params = headers.get("content-type", "").partition(";")
    media_type = media_type.strip().lower()
    charset = next(
        (p.split("=", 1)[1].strip(" \"'") for p in params.split(";") if "charset=" in p.lower()),
        None,
    )
    final_str = str(final)
    suffix = PurePosixPath(final.path).suffix.lower()
    parser = CONTENT_PARSERS.get(media_type)
    if parser is not None:
        parsed = parser(body, final_str, charset, limits)
    elif suffix in PARSERS:
        parsed = PARSERS[suffix](body, final_str, limits=limits)
    else:
        raise InvalidInput(f"unsupported content type {media_type or '(none)'!r} at {final_str}")
    own: dict[str, MetadataValue] = {"source_url": final_str, "content_type": media_type}
    parsed.metadata = merge_metadata(
        normalize_metadata(dict(defaults or {})), parsed.metadata, own, name=final_str
    )
    parsed.source_type = "url"
    fallback = PurePosixPath(final.path).name or final.host
    return build_document(
        parsed,
        body,
        source_id=source_id or canonical_url(str(requested)),
        source_path=final_str,
        fallback_title=fallback,
    )
